// TensorDictParams: a module that registers the leaves of a TensorDict as its parameters, so that
// optimizers, named_parameters(), to(device) and state dicts see them — the C++ counterpart of
// Python's TensorDictParams, typically around stacked ensemble parameters used with to_module.
//
//   td::nn::TensorDictParams holder(td::nn::from_modules(a, b, c));   // independent leaves
//   torch::optim::Adam adam(holder->parameters());                     // trains them
//   td::TensorDict params = holder->params();   // the registered tensors, same layout
//   holder->named_parameters();                 // "0.weight", "0.bias", ... (nested keys)
//
// Floating-point (and complex) leaves become parameters that require grad; other leaves (e.g.
// BatchNorm's num_batches_tracked) become buffers. A nested TensorDict becomes a child
// TensorDictParams under its key, so named_parameters() uses dotted names. The registered
// tensors are new autograd leaves sharing memory with the TensorDict given (like
// nn.Parameter(t) in Python): writing into one in place writes into the other, but gradients
// stop at the registered leaves. Non-tensor entries are kept and returned by params().
#pragma once

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <ostream>
#include <string>
#include <vector>

#include "td/core/tensordict.h"

namespace td::nn {

// Upstream's constructor options.
struct TensorDictParamsOptions {
  // false: floating-point and complex leaves become parameters (requiring grad), the others
  // buffers. true (upstream's no_convert=True): no conversion, a leaf that requires grad (what a
  // parameter is in LibTorch) is registered as a parameter and every other leaf as a buffer.
  TORCH_ARG(bool, no_convert) = false;
  // params() returns a locked TensorDict (nested levels included): set() of a new key throws
  // LockedError instead of silently not registering anything.
  TORCH_ARG(bool, lock) = false;
};

class TensorDictParamsImpl : public torch::nn::Cloneable<TensorDictParamsImpl> {
 public:
  // Throws ValueError naming a key that cannot be a module attribute name (empty, or with a
  // '.').
  explicit TensorDictParamsImpl(const TensorDict& params,
                                const TensorDictParamsOptions& options = {});
  const TensorDictParamsOptions& options() const { return options_; }

  // The registered tensors laid out like the TensorDict given at construction (same keys, order
  // and batch sizes). A new TensorDict on every call whose leaves ARE the registered tensors:
  // in-place writes (set_, apply_, optimizer steps) reach the module; adding keys does not
  // register anything.
  TensorDict params() const;
  // Same as params(): lets a TensorDictParams sit where a module is expected to return its
  // parameters.
  TensorDict forward() { return params(); }

  // Re-registers fresh tensors of the same layout (used by clone()).
  void reset() override;
  // td::nn::TensorDictParams(batch_size=[3], params=4, buffers=0)
  void pretty_print(std::ostream& stream) const override;

 private:
  enum class Kind { kParameter, kBuffer, kChild, kNonTensor };
  void register_from(const TensorDict& params, bool fresh);

  TensorDictParamsOptions options_;
  std::vector<std::pair<std::string, Kind>> order_;
  std::vector<int64_t> batch_size_;
  std::optional<at::Device> device_;
  TensorDict layout_;  // what the tensors were built from (clone() copies shapes from it)
};
TORCH_MODULE(TensorDictParams);

}  // namespace td::nn
