// Internal to the library: how batch operations move the values of a NonTensorStack.
//
// NOTE [ Non-tensor stacks ]
// A non-tensor entry (td::NonTensorData) is one of Python tensordict's three kinds:
//  * NonTensorData and MetaData hold one value for the whole batch; every batch operation carries
//    them as they are (indexing, reshaping, stacking equal values, moving to a device).
//  * NonTensorStack holds one value per batch element: a JSON list nested as its level's batch
//    size, checked wherever such an entry is set or rebuilt (CheckStackShape). An operation that
//    moves batch elements moves these values the same way, through a stand-in: an int64 tensor
//    of the level's batch size numbering the values in row-major order (StackIndex). The
//    operation runs on that tensor as on any leaf, and the result's values are the numbered
//    values at the positions of its output (GatherStack). One mechanism thus covers indexing of
//    every kind, shape ops, split / unbind, gather, stack and cat, and a lazy stack's or lazy
//    view's entries (td/core/internal/leaves.h: LeafTree::NonTensorMode).
//  * Combining (stack, cat, a lazy stack's get): inputs that are all NonTensorData (or all
//    MetaData) of equal value give that value; anything else gives a NonTensorStack of every
//    input's values, as upstream's `_stack_non_tensor` (equal NonTensorData stay one, different
//    ones become a NonTensorStack).
//  * A result whose level has no batch dims left (td.index({0})) holds the single value as
//    NonTensorData, as upstream's NonTensorStack[0].
//  * An operation that changes a level's batch size without moving elements (a reduction over
//    batch dims, apply with another batch size) cannot say where the values go: a NonTensorStack
//    there is a ValueError naming the key (FailStackDoesNotFit).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "td/core/nested_key.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

// Throws BatchSizeError naming `key` when a NonTensorStack's `values` are not a list nested as
// `batch` (NOTE [ Non-tensor stacks ]), or when `batch` has no dims.
void CheckStackShape(const nlohmann::json& values, at::IntArrayRef batch, const NestedKey& key);

// The values the stand-ins of one entry number, shared by the inputs of a combining operation.
struct StackTable {
  std::vector<nlohmann::json> values;
  // Every input so far was non-stacked data of kind `kind` equal to values[0].
  bool uniform = true;
  NonTensorData::Kind kind = NonTensorData::Kind::kData;

  // Appends `d`'s values (one for NonTensorData / MetaData, every element of a NonTensorStack)
  // and returns the int64 stand-in of shape `batch` numbering them, on `device`.
  at::Tensor Add(const NonTensorData& d, at::IntArrayRef batch, const at::Device& device);
  // The entry at the positions numbered by `index` (a stand-in after an operation): the uniform
  // value when every input was that value, one value when `index` has no dims, a NonTensorStack
  // nested as index's shape otherwise.
  NonTensorData Gather(const at::Tensor& index) const;
};

// ValueError: the NonTensorStack `key` (one value per element of `stack_batch`) is in a level
// an operation gave batch size `batch` without moving its elements.
[[noreturn]] void FailStackDoesNotFit(const NestedKey& key, at::IntArrayRef stack_batch,
                                      at::IntArrayRef batch);

// A NonTensorStack read from a file (memmap, .tdz, consolidated), held by a level of batch size
// `batch`: a NonTensorStack over `batch` (values of any dims past the level's stay lists); in a
// level without batch dims, NonTensorData holding the list. InvalidArgument stating both shapes
// when the values do not nest as `batch`.
absl::StatusOr<NonTensorData> StackFromFile(nlohmann::json values, at::IntArrayRef batch);

// The shape of a NonTensorStack's nested list: the length of the first list at each depth, up
// to `max_dims` dims (for error messages and the fit check).
std::vector<int64_t> StackShape(const nlohmann::json& values, size_t max_dims);

// `d` moved through `fn` (a function of a batch-shaped tensor giving a batch-shaped tensor):
// `d` itself unless it is a NonTensorStack. For backends that apply an operation lazily per
// entry (td/backends/lazy_view).
template <class Fn>
NonTensorData MoveStack(const NonTensorData& d, at::IntArrayRef batch, const at::Device& device,
                        Fn&& fn) {
  if (!d.is_stack()) return d;
  StackTable table;
  return table.Gather(fn(table.Add(d, batch, device)));
}

}  // namespace internal
}  // namespace td
