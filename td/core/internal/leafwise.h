// Internal to td/core: the one leaf-wise engine of the element-wise operations, whose operands
// may be a TensorDict, a tensor or a number (td::Operand): td/core/pointwise_ops.cc and
// td/core/memory_ops.cc. Built on NOTE [ Leaf maps ] (td/core/internal/leaves.h) and following
// NOTE [ Leaf-wise math ] (td/core/pointwise_ops.cc): one `_foreach_*` call over all leaves where LibTorch has one, a per-leaf
// rerun for a keyed error when it throws, and in-place forms that validate every leaf (writable,
// operands broadcast to the leaf's shape, op accepted on one-element probes of the dtypes)
// before anything is written. Not API.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <vector>

#include "td/core/internal/leaves.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

// A 0-dim tensor holding `s` that promotes like a Python number (a "wrapped number").
at::Tensor WrappedNumber(const at::Scalar& s);

// A one-element tensor of `t`'s dtype and device (for the in-place dry runs).
at::Tensor Probe(const at::Tensor& t);
// Throws c10::Error naming the key when an in-place op may not modify leaf `i` of `tree` (a leaf
// tensor that requires grad while grad mode is on).
void CheckWritable(const LeafTree& tree, size_t i, const char* op);

// True when grad mode is on and a leaf requires grad: then no `_foreach_*` kernel may run (in
// LibTorch 1.13 they have no derivatives), each leaf gets its own graph.
bool TracksGrad(const std::vector<at::Tensor>& leaves);

// One operand's value for one leaf: a tensor, or a number (`s`).
struct LeafArg {
  at::Tensor t;
  std::optional<at::Scalar> s;
  // The tensor, or the number as a wrapped-number tensor.
  at::Tensor tensor() const { return s ? WrappedNumber(*s) : t; }
};

// One operand resolved against a tree: one tensor per leaf, or one number.
struct ResolvedOperand {
  std::vector<at::Tensor> list;
  std::optional<at::Scalar> scalar;
  bool is_scalar() const { return scalar.has_value(); }
  LeafArg at(size_t i) const { return scalar ? LeafArg{at::Tensor(), scalar} : LeafArg{list[i], {}}; }
};

// The operand's value for each leaf of `tree` (a TensorDict operand is aligned by key: KeyError
// listing the leaves it lacks).
ResolvedOperand Resolve(const LeafTree& tree, const Operand& operand);

using EachOutFn = std::function<at::Tensor(const at::Tensor& leaf, const std::vector<LeafArg>& args)>;
// Returns nullopt when no all-leaves kernel applies to these operands.
using ForeachOutFn = std::function<std::optional<std::vector<at::Tensor>>(
    at::TensorList leaves, const std::vector<ResolvedOperand>& args)>;
using EachInFn = std::function<void(at::Tensor& target, const std::vector<LeafArg>& args)>;
// Returns false when no all-leaves kernel applies to these operands.
using ForeachInFn =
    std::function<bool(at::TensorList leaves, const std::vector<ResolvedOperand>& args)>;

// NOTE [ One buffer, one kernel ] (td/core/leafwise.cc): when `leaves` span one buffer, one copy
// of it into a new buffer with `options` (dtype and/or device) merged into the leaves' own, and
// each leaf's view into the copy; nullopt when they do not (the caller then goes leaf by leaf).
// Large CPU buffers are copied in parallel chunks. Errors of the copy propagate
// (a buffer mapped from a truncated file: MemmapError naming it).
std::optional<std::vector<at::Tensor>> CopyOneBuffer(const std::vector<at::Tensor>& leaves,
                                                     const at::TensorOptions& options);

// fn(leaf) for every leaf, rebuilt into a TensorDict of the same structure and batch size (with
// `check`, each result must keep its level's batch dims). No operands, no foreach kernel: the
// casts, copies and *_like calls of memory_ops.cc.
TensorDict MapLeaves(const TensorDict& td, const std::function<at::Tensor(const at::Tensor&)>& fn,
                     const char* what, bool check = false,
                     const parallel::ParallelOptions& parallel =
                         parallel::ParallelOptions().parallel(false));

// Out of place: a new TensorDict with each(leaf, args of the leaf) in place of every leaf (or
// foreach's results); every result must keep its level's batch dims (BatchSizeError).
TensorDict LeafwiseOut(const TensorDict& td, const std::vector<const Operand*>& operands,
                       const ForeachOutFn& foreach, const EachOutFn& each, const char* what);
// An in-place op's check of the values it is given, for errors LibTorch raises only while
// writing (an integer remainder by zero): throws when `leaf` cannot take `args`.
using ValueCheckFn = std::function<void(const at::Tensor& leaf, const std::vector<LeafArg>& args)>;
// In place: validates every leaf (dtypes and shapes on probes, then `values` on the real
// arguments when given), then each(leaf, args) (or foreach) writes, through NOTE [ In-place
// writes ] (internal/in_place.h). A call that fails writes nothing.
TensorDict& LeafwiseIn(TensorDict& td, const std::vector<const Operand*>& operands,
                       const ForeachInFn& foreach, const EachInFn& each, const char* op,
                       const ValueCheckFn& values = {});

}  // namespace internal
}  // namespace td
