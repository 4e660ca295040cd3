// The one reading of an index list over a TensorDict's batch dims, shared by the core's index() /
// index_put_ and by the lazy backends that map an index onto their members or sources (see
// NOTE [ Batch indexing ] in td/core/indexing.cc). Internal to tensordict.
#pragma once

#include <ATen/TensorIndexing.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace td::internal {

// An index list with the Ellipsis expanded and full slices appended so that it covers every batch
// dim. For each item, `dim` is the first batch dim it consumes (-1 for None and a bool scalar) and
// `out_dim` the first dim of the result it produces (-1 for an integer, which produces none, and
// for a bool scalar).
struct BatchIndex {
  struct Item {
    at::indexing::TensorIndex index;
    int64_t dim;
    int64_t out_dim;
  };
  std::vector<Item> items;
  // The first `given` items come from the caller's list (Ellipsis expanded); the rest are the
  // full slices appended for the batch dims it left out.
  size_t given = 0;
  // Some item is an index or mask tensor: advanced indexing, the result's dims move.
  bool has_tensor = false;
  // Some item is a bool scalar (adds a dim of size 1 or 0, as for tensors).
  bool has_boolean = false;
  // The batch dims of the result when there is no bool scalar.
  int64_t out_dims = 0;
};

// Reads `indices` against batch size `batch`, checking everything that does not need the data:
// one Ellipsis at most, no more dims than the batch has, integers in range, masks of the shape of
// the batch dims they cover, defined index tensors, no negative slice steps. Throws IndexError
// (ValueError for a negative step) naming the index, the batch dim and the batch size; `op`
// ("index", "index_put_") starts the message where the operation matters.
//   BatchIndex ex = ExpandBatchIndex({0, Slice()}, {4, 3, 2}, "index");  // 3 items, out_dims 2
BatchIndex ExpandBatchIndex(at::ArrayRef<at::indexing::TensorIndex> indices,
                            at::IntArrayRef batch, const char* op);

// The first `count` items' indices, in order.
std::vector<at::indexing::TensorIndex> Indices(const BatchIndex& ex, size_t count);

// The items' indices without the full slices at the end (they select nothing and cost a slice
// call per leaf). `sizes`: the sizes of the batch dims.
std::vector<at::indexing::TensorIndex> WithoutTrailingFullSlices(const BatchIndex& ex,
                                                                 at::IntArrayRef sizes);

// True for a slice that keeps every element of a dim of size `size`.
bool IsFullSlice(const at::indexing::TensorIndex& index, int64_t size);

// True for a bool or uint8 tensor (a mask).
bool IsMask(const at::Tensor& t);

// The positions (0..size-1) an index over one dim of size `size` selects, and whether it is a
// single integer (which removes the dim). Integers and slices are computed without tensors; index
// and mask tensors go through LibTorch. Throws IndexError for an out-of-range integer or index.
std::vector<int64_t> Positions(const at::indexing::TensorIndex& index, int64_t size,
                               bool* single);

}  // namespace td::internal
