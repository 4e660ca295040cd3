// Helpers shared by the lazy backends to read an `at::indexing::TensorIndex` list the way
// Tensor::index does, so that an index over the batch dims can be mapped onto members / sources.
// Internal to td/backends.
#pragma once

#include <ATen/TensorIndexing.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "td/core/leaves.h"

namespace td {
namespace backends_internal {

// An index list with the Ellipsis expanded and full slices appended so that it covers every batch
// dim. For each item, `dim` is the first batch dim it consumes (-1 for None) and `out_dim` the
// first dim of the result it produces (-1 for an integer, which produces none).
struct ExpandedIndex {
  struct Item {
    at::indexing::TensorIndex index;
    int64_t dim;
    int64_t out_dim;
  };
  std::vector<Item> items;
  // True when some item is an index tensor (advanced indexing: the result's dims move).
  bool has_tensor = false;
  // The batch dims of the result.
  int64_t out_dims = 0;
};

// nullopt when the list cannot be expanded against `batch_dims` (too many indices, two
// Ellipses, a bool scalar index): the caller leaves such lists to the core, which reports them.
std::optional<ExpandedIndex> ExpandIndices(at::ArrayRef<at::indexing::TensorIndex> indices,
                                           int64_t batch_dims);

using internal::AsInt;  // int64_t in LibTorch 1.13, c10::SymInt in 2.x

// `indices` without the full slices at its end (they select nothing and cost a slice call per
// leaf). `sizes`: the sizes of the dims the items of `ex` consume.
std::vector<at::indexing::TensorIndex> WithoutTrailingFullSlices(const ExpandedIndex& ex,
                                                                 at::IntArrayRef sizes);

// True for a slice that keeps every element of a dim of size `size`.
bool IsFullSlice(const at::indexing::TensorIndex& index, int64_t size);

// The positions (0..size-1) an index over one dim of size `size` selects, and whether it is a
// single integer (which removes the dim). Integers and slices are computed without tensors; index
// and mask tensors go through LibTorch. Throws IndexError for an out-of-range integer or index.
std::vector<int64_t> Positions(const at::indexing::TensorIndex& index, int64_t size,
                               bool* single);

// The index list of the items, in order.
std::vector<at::indexing::TensorIndex> Indices(const std::vector<ExpandedIndex::Item>& items);

}  // namespace backends_internal
}  // namespace td
