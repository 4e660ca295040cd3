// td::data::ClassBatchLoader: td::data::BatchLoader (td/data/batches.h) over a TensorClass,
// handing out batches of the class. The batches are BatchLoader's (one gather per field, shuffled
// per epoch, seeded, drop_last, prefetch); non-tensor fields are carried into every batch. Link
// //td/tensorclass:data (it brings //td/tensorclass and //td/data).
//
//   Transition replay = Transition::load_memmap("/data/replay");          // batch [100000]
//   td::data::ClassBatchLoader loader(replay, td::data::BatchOptions(256).shuffle(true));
//   for (const Transition& batch : loader) train(batch.obs(), batch.action());   // batch [256]
//
// Everything BatchLoader says holds: batches are new tensors (never views of the data), the data
// must not be written while it is iterated, and `*it` returns the batch by value.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>

#include "td/core/tensordict.h"
#include "td/data/batches.h"
#include "td/tensorclass/tensorclass.h"

namespace td::data {

template <class D>
class ClassBatchLoader {
  static_assert(::td::internal::tensorclass::kIsTensorClass<D>,
                "td::data::ClassBatchLoader<D>: D must be a td::TensorClass (for a TensorDict, "
                "use td::data::BatchLoader)");

 public:
  // Throws as BatchLoader's constructor (ValueError when `data` has no batch dims or
  // batch_size < 1).
  //   td::data::ClassBatchLoader loader(replay, td::data::BatchOptions(32).shuffle(true));
  ClassBatchLoader(const D& data, BatchOptions options)
      : loader_(data.tensordict(), std::move(options)) {}

  // An input iterator over the batches of one epoch (BatchLoader::Iterator's, as D).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = D;
    using difference_type = std::ptrdiff_t;
    using pointer = const D*;
    using reference = D;

    Iterator() = default;
    // The current batch, by value (a handle: no tensor is copied).
    D operator*() const { return *current_; }
    // Into the iterator: valid until it is advanced or destroyed.
    const D* operator->() const { return &*current_; }
    // Moves to the next batch; rethrows what gathering it threw.
    Iterator& operator++() {
      ++it_;
      load();
      return *this;
    }
    bool operator==(const Iterator& other) const { return it_ == other.it_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    friend class ClassBatchLoader;
    explicit Iterator(BatchLoader::Iterator it) : it_(std::move(it)) { load(); }
    // The batches hold the fields the data holds (a gather of each), so they are wrapped as D
    // without a check.
    void load() {
      if (it_ == BatchLoader::Iterator()) {
        current_.reset();
      } else {
        current_ = D::wrap(*it_);
      }
    }
    BatchLoader::Iterator it_;
    std::optional<D> current_;
  };

  // Starts the next epoch (a new order when shuffling) and returns its first batch.
  Iterator begin() { return Iterator(loader_.begin()); }
  Iterator end() const { return Iterator(); }

  // Batches per epoch, rows, epochs started, the row order of epoch `e`: as BatchLoader's.
  int64_t size() const { return loader_.size(); }
  int64_t num_rows() const { return loader_.num_rows(); }
  int64_t epoch() const { return loader_.epoch(); }
  at::Tensor order(int64_t e) const { return loader_.order(e); }
  const BatchOptions& options() const { return loader_.options(); }
  // The data (a handle on the class's fields).
  D data() const { return D::wrap(loader_.tensordict()); }
  // The TensorDict loader underneath.
  BatchLoader& loader() { return loader_; }

 private:
  BatchLoader loader_;
};

}  // namespace td::data
