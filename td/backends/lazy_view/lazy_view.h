// The lazy_view backends: TensorDicts that read and write another TensorDict (the source)
// through a batch transform, computing nothing until an entry is read.
//
//   td::TensorDict data({}, {N});                       // any backend: dense, memmap, ...
//   td::TensorDict row = td::index_view(data, {i});     // reads and writes data at index i
//   row.set("obs", obs);          // a new key: a zero tensor of shape [N, *obs.shape] is
//                                 // allocated in `data` first, then row i is written
//   td::TensorDict t = td::permute_view(data3d, {2, 0, 1});
//   t.set_("x", x);               // lands in data3d as x.permute({1, 2, 0})
//
// NOTE [ Lazy views ]
// A view holds a handle to its source and one transform of the source's leading batch dims:
//  * index_view (backend "index_view"): source.index(indices). Writes go through the source's
//    own index_put_, so a key the source lacks is first allocated there as zeros of the full
//    source batch size (lazy preallocation on every backend), and values are cast to the
//    source tensors' dtype. A key cannot change its feature shape through a partial view
//    (no Capability::kReplaceEntries).
//  * permute_view / transpose_view ("permute_view"), unsqueeze_view ("unsqueeze_view"),
//    squeeze_view ("squeeze_view"), reshape_view ("reshape_view", torch's view() of the batch):
//    bijective transforms. get() applies the op to the source leaf (a view of it, except for a
//    reshape of a non-viewable leaf, which copies); every write applies the inverse op and
//    lands in the source (set() of a new key or of another shape replaces the source's entry).
// Keys, deletions and non-tensor entries are the source's (a non-tensor entry set through an
// index view is set for the whole source). A sub-TensorDict read through a view is a view of
// the source's sub-TensorDict with the same transform. The batch size of a view follows its
// source: set_batch_size() throws (call to_dense() for a free-standing copy). All views declare
// Capability::kLazy, so the core's in-place operations write through set_()/index_put_().
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "td/core/tensordict.h"

namespace td {

// A view of `source` at batch index `indices` (same index rules as TensorDict::index). Throws
// IndexError for an invalid index (naming it and the batch size).
//   td::TensorDict first_two = td::index_view(data, {at::indexing::Slice(0, 2)});
TensorDict index_view(const TensorDict& source, at::ArrayRef<at::indexing::TensorIndex> indices);
TensorDict index_view(const TensorDict& source,
                      std::initializer_list<at::indexing::TensorIndex> indices);

// A view with the batch dims reordered (`dims`: a permutation of 0..batch_dims-1, negative
// allowed). Throws ValueError for anything else.
//   td::TensorDict t = td::permute_view(data, {1, 0});
TensorDict permute_view(const TensorDict& source, at::IntArrayRef dims);
// permute_view swapping batch dims dim0 and dim1. Throws IndexError for an out-of-range dim.
TensorDict transpose_view(const TensorDict& source, int64_t dim0, int64_t dim1);
// A view with a batch dim of size 1 inserted at `dim` (in [-batch_dims-1, batch_dims]).
// Throws IndexError for an out-of-range dim.
TensorDict unsqueeze_view(const TensorDict& source, int64_t dim);
// A view without batch dim `dim`, which must have size 1 (ValueError naming the batch size
// otherwise; IndexError for an out-of-range dim).
TensorDict squeeze_view(const TensorDict& source, int64_t dim);
// A view of the batch dims as `shape` (one dim may be -1), like torch's view(). Throws
// ValueError when the number of elements differs.
//   td::TensorDict flat = td::reshape_view(data, {-1});
TensorDict reshape_view(const TensorDict& source, at::IntArrayRef shape);

// A TensorDict on one of the view backends above, with the view-specific calls. Like
// td::LazyStackedTensorDict it is a handle (it converts to a TensorDict sharing the entries).
class LazyViewTensorDict : public TensorDict {
 public:
  // The view handle of `td`, or nullopt when td is not one of the views above: how code outside
  // this backend asks "is this a view?".
  //   if (auto v = td::LazyViewTensorDict::from(row)) v->source().is_same(data);   // true
  static std::optional<LazyViewTensorDict> from(const TensorDict& td);

  // The TensorDict the view reads from and writes to.
  TensorDict source() const;

 private:
  explicit LazyViewTensorDict(const TensorDict& td) : TensorDict(td) {}
};

}  // namespace td
