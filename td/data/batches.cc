#include "td/data/batches.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <future>
#include <utility>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/storage.h"
#include "td/executor/executor.h"

namespace td::data {

// One TBB worker that gathers the next batch in the background.
struct BatchLoader::Prefetcher {
  td::parallel::BackgroundTasks tasks{1};
};

struct BatchLoader::Epoch {
  TensorDict data;
  at::Tensor order;  // int64 [rows]
  int64_t rows = 0;
  int64_t batch_size = 1;
  int64_t num_batches = 0;
  int64_t next = 0;  // the next batch to hand out
  std::shared_ptr<Prefetcher> prefetcher;
  std::optional<std::future<TensorDict>> pending;  // batch `next`, being gathered

  // One index_select per leaf (through one apply over all leaves): on rows along dim 0 it is
  // several times faster than advanced indexing (`leaf.index({rows})`, a TensorIterator gather).
  // A lazy backend (a lazy stack) would compute every whole leaf for apply, so it picks the
  // batch's rows through its own indexing hook (a lazy stack of the picked members), which
  // to_dense() then stacks once per key: batches are new tensors on every backend.
  static TensorDict Gather(const TensorDict& data, const at::Tensor& rows) {
    if (data.storage().capabilities().has(Capability::kLazy)) {
      return data.index({rows}).to_dense();
    }
    std::vector<int64_t> batch = data.batch_size().vec();
    batch[0] = rows.size(0);
    return data.apply(
        [&rows](const at::Tensor& leaf) {
          return leaf.index_select(0, leaf.device() == rows.device() ? rows
                                                                      : rows.to(leaf.device()));
        },
        ApplyOptions().batch_size(std::move(batch)));
  }

  // Batch b < num_batches starts inside the rows (b * batch_size < rows), so neither the start
  // nor its length can overflow, whatever batch_size is.
  at::Tensor RowsOf(int64_t b) const {
    const int64_t start = b * batch_size;
    return order.slice(0, start, start + std::min(batch_size, rows - start));
  }

  void Submit() {
    if (!prefetcher || next >= num_batches) return;
    auto promise = std::make_shared<std::promise<TensorDict>>();
    pending = promise->get_future();
    prefetcher->tasks.submit([promise, data = data, rows = RowsOf(next)] {
      try {
        promise->set_value(Gather(data, rows));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
  }

  std::optional<TensorDict> Next() {
    if (next >= num_batches) return std::nullopt;
    TensorDict out;
    if (pending) {
      std::future<TensorDict> f = std::move(*pending);
      pending.reset();
      ++next;
      out = f.get();
    } else {
      out = Gather(data, RowsOf(next));
      ++next;
    }
    Submit();
    return out;
  }
};

BatchLoader::BatchLoader(TensorDict data, BatchOptions options)
    : data_(std::move(data)), options_(options) {
  if (data_.batch_dims() == 0) {
    TD_FAIL(ValueError, "BatchLoader: the TensorDict has batch size ", SizeRepr(data_.batch_size()),
                     "; batches are taken along the first batch dim, so it needs at least one");
  }
  if (options_.batch_size() < 1) {
    TD_FAIL(ValueError, "BatchLoader: batch_size must be at least 1, got ", options_.batch_size());
  }
  rows_ = data_.batch_size()[0];
  if (options_.prefetch()) prefetcher_ = std::make_shared<Prefetcher>();
}

BatchLoader::~BatchLoader() = default;
BatchLoader::BatchLoader(BatchLoader&&) noexcept = default;
BatchLoader& BatchLoader::operator=(BatchLoader&&) noexcept = default;

int64_t BatchLoader::size() const {
  // Without (rows + b - 1) / b, which overflows for batch sizes near INT64_MAX.
  const int64_t b = options_.batch_size();
  return rows_ / b + (!options_.drop_last() && rows_ % b != 0 ? 1 : 0);
}

at::Tensor BatchLoader::order(int64_t e) const {
  if (!options_.shuffle()) return at::arange(rows_, at::kLong);
  // splitmix64 of (seed, epoch): nearby seeds and epochs give unrelated orders.
  uint64_t z = options_.seed() + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(e + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(z);
  return at::randperm(rows_, gen, at::TensorOptions().dtype(at::kLong));
}

BatchLoader::Iterator BatchLoader::begin() {
  auto epoch = std::make_shared<Epoch>();
  epoch->data = data_;
  epoch->order = order(epoch_++);
  epoch->rows = rows_;
  epoch->batch_size = options_.batch_size();
  epoch->num_batches = size();
  epoch->prefetcher = prefetcher_;
  epoch->Submit();
  Iterator it;
  it.epoch_ = std::move(epoch);
  it.current_ = it.epoch_->Next();
  return it;
}

BatchLoader::Iterator& BatchLoader::Iterator::operator++() {
  current_.reset();
  if (epoch_) current_ = epoch_->Next();
  return *this;
}

}  // namespace td::data
