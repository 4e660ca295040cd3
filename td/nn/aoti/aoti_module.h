// AOTInductor packages as TensorDict modules: a `.pt2` file that Python wrote with
// `torch._inductor.aoti_compile_and_package(torch.export.export(model, (), kwargs))` runs in C++
// through LibTorch's torch::inductor::AOTIModelPackageLoader, reading its inputs from and writing
// its outputs to a TensorDict, like any td::nn module (TensorDictSequential, probabilistic
// chains, select_out_keys, clone).
//
//   td::nn::AotiModule policy("policy.pt2");      // keys from the package (see below)
//   policy(data);                                  // data["action"] = the package(obs=..., ...)
//   td::nn::AotiModule actor("policy.pt2", {"obs", {"next", "hidden"}}, {"action"});
//   actor->load_constants(learner_params);         // new weights, no re-export
//
// Only where LibTorch has the loader (2.6 and later; not 1.13): //td/nn/aoti is empty elsewhere
// (td/compat/aoti.bzl). Bazel: @tensordict//td/nn/aoti; CMake: tensordict::nn_aoti, defined
// likewise only where LibTorch has the loader. docs/nn.md, "AOTInductor packages", has the export
// recipe this file refers to.
//
// NOTE [ AOTInductor keys and checks ]
// Keys. A package knows its keyword argument names (the call spec's kwargs dict, in order) and
// its number of outputs, not TensorDict keys. upstream's export tutorial exports a TensorDict
// module with keyword arguments named after its in_keys, a nested key's parts joined by "_" (as
// tensordict.nn.dispatch does), and outputs in out_keys order. Given in_keys must each join to
// one of the package's argument names, and together fill all of them. Without in_keys: the
// recipe's metadata entry "tensordict.signature" (see below) names the keys; a package without
// it gets one key per argument, its name unchanged ("next_hidden" stays the key "next_hidden",
// since "_" may be part of a key), or split on "_" with AotiModuleOptions().split_names(true)
// ("next_hidden" -> ("next", "hidden")). out_keys likewise come from the signature when not
// given; a package without it needs them.
// Checks. The compiled model does not check its inputs (only when the process has the
// environment variable AOTI_RUNTIME_CHECK_INPUTS set, which this library never sets): a tensor of
// another dtype or shape runs on reinterpreted memory. So forward() checks every input before the
// run, and throws naming the key, what was expected and what was found: KeyError for a missing
// key; ValueError for a device the package was not compiled for (metadata AOTI_DEVICE_KEY, in
// every package); with the signature, TypeError for a dtype and ValueError for a rank or a size
// other than the batch dimension(s) it left open. Without the signature only the names, the
// count and the device are checked. Inputs are made contiguous (the compiled code assumes the
// strides of the example inputs, which for torch.randn are contiguous).
// The signature: the package's metadata entry "tensordict.signature" (inductor_configs=
// {"aot_inductor.metadata": {"tensordict.signature": json}} at export), a JSON object
//   {"version": 1, "inputs": [{"key": ["next", "hidden"], "arg": "next_hidden",
//    "dtype": "float32", "shape": [null, 10]}, ...], "out_keys": [["action"]]}
// where null in a shape is a dimension of any size (the exported dynamic batch dimension).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/common.h"

namespace td::nn {

namespace internal {
struct AotiPackage;
}  // namespace internal

struct AotiModuleOptions {
  // The model inside the package (the loader's model_name; aoti_compile_and_package writes
  // "model").
  TORCH_ARG(std::string, model_name) = "model";
  // Without in_keys and without the signature: split argument names on "_" into nested keys
  // (see NOTE [ AOTInductor keys and checks ]).
  TORCH_ARG(bool, split_names) = false;
  // Where the outputs are written (as TensorDictModule's).
  TORCH_ARG(OutputMode, output) = OutputMode::kInput;
  // The loader's run_single_threaded and device_index (-1: the current device).
  TORCH_ARG(bool, run_single_threaded) = false;
  TORCH_ARG(int64_t, device_index) = -1;
};

// One input the package takes: the key that fills it, its argument name, and, from the
// signature, its dtype and shape (nullopt: not recorded; a nullopt dimension: any size).
struct AotiInput {
  NestedKey key;
  std::string arg;
  std::optional<c10::ScalarType> dtype;
  std::optional<std::vector<std::optional<int64_t>>> shape;
};

class AotiModuleImpl : public Cloneable<AotiModuleImpl> {
 public:
  // Loads the package at `path` and maps its arguments to keys (NOTE [ AOTInductor keys and
  // checks ]); empty in_keys / out_keys come from the package, given ones win over the
  // signature's. in_keys() lists the keys in the package's argument order. Throws ValueError
  // naming the file when the loader cannot open it or its model, when its call spec takes
  // positional arguments or a container; ValueError naming the key and the package's argument
  // names when a given in key joins to no argument or to one another key fills, or an argument
  // is left unfilled; ValueError when the number of out_keys is not the package's number of
  // outputs, or out keys are needed and the package does not name them.
  //   AotiModuleImpl("policy.pt2", {"obs", {"next", "hidden"}}, {"action"});
  explicit AotiModuleImpl(std::string path, Keys in_keys = {}, Keys out_keys = {},
                          AotiModuleOptions options = {});
  AotiModuleImpl(std::string path, AotiModuleOptions options)
      : AotiModuleImpl(std::move(path), Keys(), Keys(), std::move(options)) {}

  // Reads in_keys() from `td`, checks them (see the NOTE), runs the package, writes out_keys()
  // where options().output() says. All outputs are written or none.
  TensorDict forward(const TensorDict& td) override;
  // The same, writing into `out` (Python's tensordict_out=).
  TensorDict forward_into(const TensorDict& td, TensorDict out);
  // The inputs in in_keys() order, checked the same way; the outputs in out_keys() order.
  std::vector<at::Tensor> forward_tensors(const std::vector<at::Tensor>& inputs) override;

  // The package's inputs, in in_keys() order (which is the call order).
  const std::vector<AotiInput>& inputs() const { return inputs_; }
  // True when the package has the "tensordict.signature" metadata.
  bool has_signature() const;
  // The device the package was compiled for ("cpu", "cuda", ...).
  const std::string& device_type() const;
  // The package's metadata (AOTI_DEVICE_KEY, the user's aot_inductor.metadata entries).
  const std::unordered_map<std::string, std::string>& metadata() const;
  const std::string& path() const { return path_; }
  const AotiModuleOptions& options() const { return options_; }

  // True where this LibTorch's loader gives the values of a package's constants (2.14; not
  // 2.6, whose constants() and load_constants() throw ValueError saying so).
  static bool constants_available();
  // The package's constants (its parameters and buffers, as far as the package keeps them:
  // see docs/nn.md) as a nested TensorDict with batch size [], named as from_module names an
  // eager module's ("net.0.weight" -> {"net", "0", "weight"}). The leaves are the package's
  // own tensors: use load_constants() to change them, not in-place writes.
  //   td::TensorDict params = policy->constants();
  TensorDict constants() const;
  // Puts `params` (named as constants() names them; a subset is fine) into the package: the new
  // values go into the package's second constant buffer, with the others copied from the
  // current ones, folded constants are recomputed there, and the buffers are swapped; calls in
  // flight finish on the old buffer. Throws, with nothing changed: KeyError naming a key that is
  // not a constant of the package (with its constants); ValueError naming the key and both
  // shapes, dtypes or devices when one differs; TypeError for non-tensor data.
  //   policy->load_constants(td::nn::from_module(learner));
  void load_constants(const TensorDict& params);

  // Loads the package again (clone() gives a copy with its own constants, equal to these).
  void reset() override;
  // td::nn::AotiModule(path=policy.pt2, in_keys=[...], out_keys=[...])
  void pretty_print(std::ostream& stream) const override;

 private:
  void map_keys(std::vector<NestedKey> in_keys, std::vector<NestedKey> out_keys);
  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs) const;
  at::Tensor checked(const at::Tensor& t, size_t i) const;

  std::string path_;
  AotiModuleOptions options_;
  std::shared_ptr<internal::AotiPackage> package_;
  std::vector<AotiInput> inputs_;
};

// The module holder (like TensorDictModule for TensorDictModuleImpl), with constructors that
// take braced key lists:
//   td::nn::AotiModule policy("policy.pt2");
//   td::nn::AotiModule actor("policy.pt2", {"obs", {"next", "hidden"}}, {"action"});
class AotiModule : public torch::nn::ModuleHolder<AotiModuleImpl> {
 public:
  AotiModule(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  AotiModule(std::shared_ptr<AotiModuleImpl> impl)       // NOLINT
      : ModuleHolder(std::move(impl)) {}
  explicit AotiModule(std::string path, Keys in_keys = {}, Keys out_keys = {},
                      AotiModuleOptions options = {})
      : ModuleHolder(std::make_shared<AotiModuleImpl>(std::move(path), std::move(in_keys),
                                                      std::move(out_keys), std::move(options))) {}
  AotiModule(std::string path, AotiModuleOptions options)
      : ModuleHolder(std::make_shared<AotiModuleImpl>(std::move(path), std::move(options))) {}
};

}  // namespace td::nn
