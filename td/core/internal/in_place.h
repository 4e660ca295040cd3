// Internal to td/core: the one path every in-place operation writes through.
//
// NOTE [ In-place writes ]
// A Capability::kLazy backend (lazy stack, lazy view) computes its tensors on every read, so a
// tensor that get() returned may be a temporary: writing into it changes nothing the TensorDict
// holds. The core's in-place operations (apply_, the pointwise `op_` methods, zero_ / fill_ /
// clamp_, index_put_, masked_fill_, set_at_, detach_, requires_grad_) therefore never write into
// the leaves of a TensorDict they flattened themselves, and never ask whether a level is lazy.
// They write through one of these:
//   * WriteLeaves(td, what, write): `write(tree)` validates, then writes into tree.leaves() in
//     place. The flattener notes each level's backend as it walks and stops at the first lazy
//     one without reading it (LeafTree(td, /*stop_at_lazy=*/true)). When no level is lazy,
//     `tree` is td's own flattening, so the writes land in td's tensors: one walk, no copy. When
//     one is, `tree` flattens a dense copy of td (the lazy entries computed once, by to_dense())
//     and, after `write` returns, every leaf of the copy is written back through the storage
//     with set_() (a lazy stack writes into its members, a view into its source).
//   * WriteInPlace(td, write, only_keys): for writes that are not leaf by leaf (index_put_ of a
//     TensorDict value, which may create keys; set_at_ of one key): `write(target)` gets td
//     itself when no level is lazy, otherwise a dense copy of the keys `only_keys()` lists (all
//     of which td must have: KeyError otherwise), written back the same way, keys `write`
//     created with set().
// When `write` throws, nothing has been written back. With LazyLevels::kReject (detach_,
// requires_grad_: properties of the tensors themselves, which a write-back of values cannot
// carry) a lazy level is a TypeError naming the operation and the backend instead.
#pragma once

#include <vector>

#include "absl/functional/function_ref.h"
#include "td/core/internal/leaves.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

enum class LazyLevels {
  kWriteBack,  // write into a dense copy, then set_() every leaf back
  kReject,     // TypeError: the operation cannot reach the tensors a lazy level reads
};

void WriteLeaves(TensorDict& td, const char* what, absl::FunctionRef<void(const LeafTree&)> write,
                 LazyLevels lazy = LazyLevels::kWriteBack);

void WriteInPlace(TensorDict& td, absl::FunctionRef<void(TensorDict&)> write,
                  absl::FunctionRef<std::vector<NestedKey>()> only_keys);

// A scalar that does not fit a leaf's dtype (300 into uint8, -1.5 into bool) is refused by
// LibTorch only when that leaf is written: writes of a scalar (index_put_, masked_fill_) check
// every leaf's dtype first, so that a failing call writes nothing. The error names the key.
void CheckScalarFits(const LeafTree& tree, const at::Scalar& value, const char* op);

}  // namespace internal
}  // namespace td
