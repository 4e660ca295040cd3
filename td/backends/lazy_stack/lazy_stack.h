// The lazy_stack backend: a TensorDict that stacks other TensorDicts without copying them.
//
//   std::vector<td::TensorDict> steps = ...;          // each with batch size [3]
//   td::LazyStackedTensorDict s = td::lazy_stack(steps, 0);   // batch size [N, 3]; copies nothing
//   at::Tensor obs = s.get("obs");                    // stacks "obs" only: one at::stack call
//   td::TensorDict second = s.index({1});             // the member steps[1] itself
//   s.set_("obs", at::zeros_like(obs));               // writes through to every member
//
// NOTE [ Lazy stack semantics ]
// * The stack holds the member handles it was given (plus appended ones); every write goes to the
//   members: set() and set_() split the value along the stack dim, del_() removes the key from
//   every member, a sub-TensorDict read through the stack is itself a lazy stack of the members'
//   sub-TensorDicts (so writing to it writes to the members), lock_() locks the members.
// * get(key) stacks that key only; reading other keys costs nothing. get() of the same key twice
//   stacks twice: call to_dense() / contiguous() to keep a stacked copy.
// * Members share one batch size but may disagree on feature shapes ("ragged" keys) and on key
//   sets. keys() lists the keys every member holds (in the first member's order);
//   exclusive_keys() on the storage lists the others, and operations that need every key
//   (to_dense(), contiguous()) name them in their KeyError. A ragged key fails a dense get() with
//   a ValueError naming the key, the differing shapes and the alternatives: get_list(),
//   get_padded() and get_nestedtensor(). Printing shows a ragged dim as -1.
// * Indexing with an integer along the stack dim returns the member itself; a slice or an
//   index tensor along the stack dim returns a lazy stack of the selected members; indices that
//   leave the stack dim whole index the members and stack the results lazily. index_put_ writes
//   through to the members in every one of these cases.
// * Non-tensor entries: when every member holds the same value, get() returns it; when they
//   differ, get() returns a JSON array with one value per member.
// td::stack stays dense, as in the Python package; td::lazy_stack is the lazy one.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {

// How get_padded() pads ragged dims.
struct PadOptions {
  // The value written in the padding.
  TORCH_ARG(double, padding_value) = 0.0;
  // "right" pads after the data of each dim, "left" before it.
  TORCH_ARG(std::string, padding_side) = "right";
};

// A TensorDict on the lazy_stack backend, with the stack-specific calls. It is a TensorDict handle
// (it converts to one and shares the same entries); see NOTE [ Lazy stack semantics ].
class LazyStackedTensorDict : public TensorDict {
 public:
  // The lazy-stack handle of `td` (sharing its entries), or nullopt when td is on another
  // backend: how code outside this backend asks "is this a lazy stack?".
  //   if (auto s = td::LazyStackedTensorDict::from(td)) n = s->tensordicts().size();
  static std::optional<LazyStackedTensorDict> from(const TensorDict& td);
  // from(td), throwing c10::TypeError when td is on another backend.
  //   td::LazyStackedTensorDict s(some_td.get_tensordict("nested"));
  explicit LazyStackedTensorDict(const TensorDict& td);

  // The stacked TensorDicts (the handles themselves: writing to them writes to the stack).
  const std::vector<TensorDict>& tensordicts() const;
  // The dim of the batch size along which the members are stacked.
  int64_t stack_dim() const;

  // Adds a member at the end (the batch size grows by one along the stack dim). Throws
  // BatchSizeError when td's batch size differs from the members', LockedError when the stack
  // is locked.
  //   s.append(td::TensorDict({{"obs", at::zeros({3, 4})}}, {3}));
  LazyStackedTensorDict& append(const TensorDict& td);
  // Adds a member before position `index` (negative counts from the end; -1 is before the last,
  // size is after the last). Same errors as append(), plus IndexError for an out-of-range index.
  LazyStackedTensorDict& insert(int64_t index, const TensorDict& td);
  // append() for each TensorDict, all checked before any is added.
  LazyStackedTensorDict& extend(const std::vector<TensorDict>& tds);

  // The members' tensors under `key`, one per member, not copied (each has the member's shape).
  // Throws KeyError when a member lacks the key (naming the members that do), TypeError when an
  // entry is not a tensor.
  //   std::vector<at::Tensor> parts = s.get_list("ragged");
  std::vector<at::Tensor> get_list(const NestedKey& key) const;
  // The members' tensors padded to the largest size of every dim, then stacked along the stack
  // dim. Throws ValueError when members differ in number of dims or padding_side is neither
  // "left" nor "right"; the errors of get_list().
  //   at::Tensor padded = s.get_padded("ragged", td::PadOptions().padding_value(-1));
  at::Tensor get_padded(const NestedKey& key, const PadOptions& options = {}) const;
  // Python's get_nestedtensor(key): a nested tensor (LibTorch's ragged tensor) holding the
  // members' tensors; its first dim indexes the members (to_padded_tensor() of a TensorDict
  // holding it pads it). Throws ValueError unless the stack dim is 0; the errors of get_list().
  //   at::Tensor n = s.get_nestedtensor("ragged");   // n.unbind(0)[i] is member i's tensor
  at::Tensor get_nestedtensor(const NestedKey& key) const;
  // The same, with `default_value` in place of the tensor of each member that lacks `key`
  // (upstream's default=tensor).
  at::Tensor get_nestedtensor(const NestedKey& key, const at::Tensor& default_value) const;
  // Python's valid_keys: keys(options), the keys every member holds (exclusive_keys() on the
  // storage lists the others).
  std::vector<NestedKey> valid_keys(const KeysOptions& options = {}) const {
    return keys(options);
  }
  // The sub-TensorDict under `key`, as a lazy stack of the members' sub-TensorDicts.
  LazyStackedTensorDict get_lazy_stack(const NestedKey& key) const;
};

// Stacks `tds` along batch dim `dim` without copying anything (negative dims count from the end
// of the resulting batch size). Throws ValueError for an empty list, BatchSizeError when the batch
// sizes differ (naming both), IndexError when dim is out of range.
//   td::LazyStackedTensorDict s = td::lazy_stack({a, b, c}, 0);
LazyStackedTensorDict lazy_stack(const std::vector<TensorDict>& tds, int64_t dim = 0);

// Python's td.to_lazystack(dim): `td` as a lazy stack along batch dim `dim` (negative counts from
// the end): lazy_stack(td.unbind(dim), dim), whose members are views of td's slices (in-place writes
// through the stack, set_ and index_put_, go to td's tensors). A lazy stack already stacked along `dim` is returned as it is; one stacked along
// another dim is restacked along `dim` (upstream's way to swap the stack dim). Throws IndexError
// when dim is out of range, ValueError when td's size along dim is 0 (a stack needs a member).
//   td::LazyStackedTensorDict s = td::to_lazystack(td, 1);   // s.stack_dim() == 1
LazyStackedTensorDict to_lazystack(const TensorDict& td, int64_t dim = 0);

}  // namespace td
