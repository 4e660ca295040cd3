// Batches of a TensorDict at memory speed: BatchLoader cuts the rows (first batch dim) of a
// TensorDict into batches, in order or shuffled, and gathers each batch with ONE call over the
// TensorDict (an apply of `leaf.index_select(0, rows)`: one gather per leaf, no per-row work, no
// stacking; a lazy stack picks the rows through its own hook and stacks each key once).
// Optionally the next batch is gathered on a TBB worker while the caller works on the current one.
// On a memory-mapped TensorDict a batch reads only its own rows from the files.
//
//   td::TensorDict data = td::TensorDict::load_memmap("/data/images");       // batch [1000000]
//   td::data::BatchLoader loader(data, td::data::BatchOptions(256).shuffle(true).seed(7)
//                                          .drop_last(true).prefetch(true));
//   for (int epoch = 0; epoch < 3; ++epoch) {
//     for (const td::TensorDict& batch : loader) {        // each begin() is a new epoch/shuffle
//       train(batch.get("image"), batch.get("label"));    // batch size [256]
//     }
//   }
//
// This is the fast path; td::data::TensorDictDataset (dataset.h) is the torch::data one.
// Batches are new tensors (a gather), never views of the data: writing into one leaves the
// dataset alone. The data are read while batches are prepared (on another thread with prefetch):
// do not write into the TensorDict while iterating it. Bazel: //td/data (@tensordict//td/data).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>

#include "td/core/tensordict.h"

namespace td::data {

struct BatchOptions {
  BatchOptions() = default;
  BatchOptions(int64_t batch_size) : batch_size_(batch_size) {}  // NOLINT
  // Rows per batch (the last batch may be smaller, see drop_last).
  TORCH_ARG(int64_t, batch_size) = 1;
  // A new random order of the rows every epoch.
  TORCH_ARG(bool, shuffle) = false;
  // Leave out the last batch when it has fewer than batch_size rows.
  TORCH_ARG(bool, drop_last) = false;
  // The order of epoch e is a function of (seed, e) only: runs with the same seed see the same
  // batches.
  TORCH_ARG(uint64_t, seed) = 0;
  // Gather batch k + 1 on a TBB worker while batch k is in use (td::parallel::BackgroundTasks,
  // under td's thread policy).
  TORCH_ARG(bool, prefetch) = false;
};

class BatchLoader {
  struct Epoch;

 public:
  // Throws ValueError when `data` has no batch dims or batch_size < 1.
  //   td::data::BatchLoader loader(data, td::data::BatchOptions(32).shuffle(true));
  BatchLoader(TensorDict data, BatchOptions options);
  ~BatchLoader();
  BatchLoader(BatchLoader&&) noexcept;
  BatchLoader& operator=(BatchLoader&&) noexcept;

  // An input iterator over the batches of one epoch.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = TensorDict;
    using difference_type = std::ptrdiff_t;
    using pointer = const TensorDict*;
    using reference = TensorDict;

    Iterator() = default;
    // The current batch, by value (a TensorDict is a handle: this copies no tensor). By value so
    // that `const td::TensorDict& b = *loader.begin();` binds a temporary whose life is extended
    // to b's, instead of a reference into the iterator that ends with the statement. `++` hands
    // out the next batch; the batch already taken stays valid.
    TensorDict operator*() const { return *current_; }
    // Into the iterator: valid until it is advanced or destroyed (not past the statement on a
    // temporary such as loader.begin()).
    const TensorDict* operator->() const { return &*current_; }
    // Moves to the next batch; rethrows what gathering it threw.
    Iterator& operator++();
    // Only end() compares equal to an iterator past the last batch.
    bool operator==(const Iterator& other) const { return !current_ == !other.current_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class BatchLoader;
    std::shared_ptr<Epoch> epoch_;
    std::optional<TensorDict> current_;
  };

  // Starts the next epoch (a new order when shuffling) and returns its first batch. Iterators of
  // an earlier epoch stay valid and keep their own order. Rethrows what gathering threw.
  Iterator begin();
  Iterator end() const { return Iterator(); }

  // Batches per epoch: ceil(rows / batch_size), or floor with drop_last.
  int64_t size() const;
  // Rows of the TensorDict.
  int64_t num_rows() const { return rows_; }
  // Epochs started so far (begin() calls).
  int64_t epoch() const { return epoch_; }
  // The row order of epoch `e` (0-based): an int64 tensor [rows]; arange when not shuffling.
  //   at::Tensor first = loader.order(0).slice(0, 0, 256);   // the rows of epoch 0's batch 0
  at::Tensor order(int64_t e) const;
  const BatchOptions& options() const { return options_; }
  const TensorDict& tensordict() const { return data_; }

 private:
  struct Prefetcher;
  TensorDict data_;
  BatchOptions options_;
  int64_t rows_ = 0;
  int64_t epoch_ = 0;
  std::shared_ptr<Prefetcher> prefetcher_;
};

}  // namespace td::data
