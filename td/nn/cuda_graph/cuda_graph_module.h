// td::nn::CudaGraphModule: upstream's tensordict.nn.CudaGraphModule for TensorDict modules. The
// wrapped module's forward runs eagerly for `warmup - 1` calls, is captured into a CUDA graph on
// the next call, and every later call copies the input's leaves into the captured (static) input
// TensorDict, replays the graph and returns a copy of the static output: no per-op launch cost.
//
//   td::nn::TensorDictModule policy(torch::nn::Linear(4, 2), {"obs"}, {"action"});
//   policy->to(at::kCUDA);
//   td::nn::CudaGraphModule graphed(policy);            // warmup 2: call 1 eager, 2 captures
//   for (...) graphed(batch);                           // batch["action"] written, as policy's
//
// Built only against a CUDA LibTorch: CMake with -DTENSORDICT_CUDA=ON (tensordict::nn_cuda_graph);
// Bazel does not build this package (td/nn/cuda_graph/cuda.bzl). docs/cuda.md has the rules.
//
// NOTE [ What a CUDA graph replays ]
// A graph replays the kernels of the captured call on the same memory. So after the capture
// every call must look exactly like it, and anything else is refused, checked on the whole
// input before anything is copied (nothing is replayed then):
//   * the same tensor leaves, keyed as at the capture (a missing key is a KeyError; a new key
//     is a ValueError, except the module's own out keys, which an earlier call wrote);
//   * each with the same shape and batch size (ValueError naming the key and both shapes), the
//     same dtype (TypeError) and on the captured CUDA device (ValueError: a CPU leaf is refused
//     by name, also at the warm-up and capture calls);
//   * no leaf requiring grad (c10::Error, upstream's message: the graph is no autograd node).
// Non-tensor entries are read at the capture; later values are not seen (as upstream). The
// module's parameters are read in place by the graph: in-place updates (optimizer steps,
// load_state_dict, to_module's copies) are seen by later replays, replacing a parameter tensor
// is not. Control flow that depends on data and host synchronisation (.item(), printing a CUDA
// tensor) cannot be captured: the capture is an error naming the module, and the next call tries
// again. reset() drops the graph so that the next calls warm up and capture anew (say for a new
// batch size).
// Streams: warm-up and capture run on two side streams of the device (upstream's); the caller's
// current stream waits for them, and replays run on the caller's current stream (copies in,
// replay, copy out are ordered by it: no device-wide synchronisation).
// Without a CUDA device (a CUDA LibTorch on a machine without a GPU) every call runs the module
// eagerly, with a warning at construction, as upstream does.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <torch/arg.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/common.h"

namespace at::cuda {
struct CUDAGraph;
}  // namespace at::cuda

namespace td::nn {

struct CudaGraphOptions {
  // Calls before the graph exists: `warmup - 1` eager calls, then the capture (at least 1).
  TORCH_ARG(int64_t, warmup) = 2;
  // The CUDA device whose streams run the warm-up and the capture (default: the current one).
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
};

// Not a torch::nn::Module, as upstream's is not (its parameters are the wrapped module's:
// module()). Calls are serialised by a mutex; use one per thread for concurrent replays.
class CudaGraphModule {
 public:
  // Throws ValueError for a null module, warmup < 1 or a device that is not CUDA.
  explicit CudaGraphModule(std::shared_ptr<TensorDictModuleBase> module,
                           CudaGraphOptions options = {});
  template <class M>
  explicit CudaGraphModule(const torch::nn::ModuleHolder<M>& module,
                           CudaGraphOptions options = {})
      : CudaGraphModule(std::shared_ptr<TensorDictModuleBase>(module.ptr()),
                        std::move(options)) {}
  ~CudaGraphModule();
  CudaGraphModule(const CudaGraphModule&) = delete;
  CudaGraphModule& operator=(const CudaGraphModule&) = delete;

  // The module's forward, as above. Before the capture: what the module returns (the capture
  // call runs it eagerly once more and returns that). After: when the module writes into its
  // input, `td` with copies of the output keys written; otherwise a copy of the static output.
  // Errors: NOTE [ What a CUDA graph replays ].
  TensorDict operator()(const TensorDict& td);
  TensorDict forward(const TensorDict& td) { return (*this)(td); }

  // Drops the graph and the static TensorDicts: the next calls warm up and capture again.
  void reset();

  bool captured() const;
  // Whether a CUDA device was found at construction (else every call is eager).
  bool has_cuda() const { return has_cuda_; }
  int64_t warmup() const { return warmup_; }
  const std::shared_ptr<TensorDictModuleBase>& module() const { return module_; }
  const std::vector<NestedKey>& in_keys() const { return module_->in_keys(); }
  const std::vector<NestedKey>& out_keys() const { return module_->out_keys(); }
  // The captured input and output (empty TensorDicts before the capture). Their leaves are the
  // graph's memory, rewritten by every replay: copy what you keep.
  const TensorDict& static_input() const { return static_in_; }
  const TensorDict& static_output() const { return static_out_; }

 private:
  struct Leaf {
    NestedKey key;
    std::vector<int64_t> shape;
    at::ScalarType dtype;
  };
  TensorDict warm_up(const TensorDict& td);
  TensorDict capture(const TensorDict& td);
  TensorDict replay(const TensorDict& td);
  void check_leaves(const TensorDict& td, const char* when) const;
  void check_replay_input(const TensorDict& td) const;

  std::shared_ptr<TensorDictModuleBase> module_;
  int64_t warmup_;
  bool has_cuda_ = false;
  at::Device device_{at::kCUDA, 0};
  std::optional<c10::Stream> warmup_stream_;
  std::optional<c10::Stream> capture_stream_;
  std::mutex mu_;
  int64_t counter_ = 0;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  std::vector<Leaf> signature_;  // the captured input's tensor leaves
  std::vector<int64_t> batch_size_;
  TensorDict static_in_;
  TensorDict static_out_;
  bool out_is_input_ = false;
  std::vector<NestedKey> written_;  // out_is_input_: the keys copied back into the caller's td
};

}  // namespace td::nn
