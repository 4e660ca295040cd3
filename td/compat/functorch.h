// LibTorch's functorch interpreter stack, as td::vmap (td/functional/vmap.h) uses it: push and
// pop a vmap layer, wrap a tensor with a batch dim at a level, and look through such a wrapper.
// See NOTE [ LibTorch versions ] in td/compat/torch.h.
//
// The calls are LibTorch's own (declared in ATen/functorch/DynamicLayer.h and
// ATen/functorch/BatchedTensorImpl.h, exported from libtorch_cpu in 1.13 and 2.x); what differs
// between versions is kept in functorch.cc: the randomness enum is unscoped in 1.13 and scoped in
// 2.x, a layer's batch size is int64_t in 1.13 and c10::SymInt in 2.x, and 2.x also counts
// BatchedNestedTensor wrappers as batched. Everything here acts on the calling thread's stack
// (functorch keeps it thread-local).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace td::compat::functorch {

// How random operations behave inside a vmap layer (functorch's RandomnessType).
enum class Randomness {
  kError,      // a random operation throws
  kDifferent,  // each member draws its own values
  kSame,       // every member draws the same values
};

// Pushes a vmap layer mapping over `batch_size` members; returns its level (1 for the outermost
// layer of the thread, 2 for one nested inside, ...).
int64_t PushVmapLayer(int64_t batch_size, Randomness randomness);

// Pops the innermost layer, which must be the vmap layer `level` (c10::Error otherwise, with
// nothing popped).
void PopVmapLayer(int64_t level);

// The number of functorch layers active on this thread (0 outside any vmap).
int64_t LayerDepth();

// `tensor` seen with its dim `dim` as the batch dim of level `level` (it must be the innermost
// layer): sizes() of the result leave that dim out.
at::Tensor AddBatchDim(const at::Tensor& tensor, int64_t dim, int64_t level);

// What a batched tensor wraps: the tensor with the batch dim (which may itself be batched at an
// outer level), the position of the batch dim in it, and the level.
struct Unwrapped {
  at::Tensor value;
  int64_t bdim = 0;
  int64_t level = 0;
};
// The outermost wrapper of `tensor`, or nullopt when it is not a batched tensor.
std::optional<Unwrapped> Unwrap(const at::Tensor& tensor);

// The plain tensor under every batched wrapper of `tensor` (all members of every level), or
// `tensor` itself when it is not batched: what a value check that must read the data (item())
// looks at inside vmap, where reading a batched tensor's data throws.
at::Tensor UnwrapAll(const at::Tensor& tensor);

// Whether LibTorch warns when an operation without a batching rule runs member by member.
bool FallbackWarningEnabled();
void SetFallbackWarningEnabled(bool enabled);
// Whether such operations run at all (when false they throw "Batching rule not implemented").
bool FallbackEnabled();
void SetFallbackEnabled(bool enabled);

}  // namespace td::compat::functorch
