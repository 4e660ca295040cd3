#include "td/data/batches.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>
#include <future>
#include <utility>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/mapped_copy.h"
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
  // On a memory-mapped TensorDict each contiguous leaf is gathered by GatherMapped instead.
  static TensorDict Gather(const TensorDict& data, const at::Tensor& rows) {
    if (data.storage().capabilities().has(Capability::kLazy)) {
      return data.index({rows}).to_dense();
    }
    std::vector<int64_t> batch = data.batch_size().vec();
    batch[0] = rows.size(0);
    if (data.is_memmap()) {
      return data.named_apply(
          [&rows](const NestedKey& key, const at::Tensor& leaf) {
            if (leaf.device().is_cpu() && leaf.is_contiguous()) {
              return GatherMapped(key, leaf, rows);
            }
            return leaf.index_select(0, rows.to(leaf.device()));
          },
          ApplyOptions().batch_size(std::move(batch)));
    }
    return data.apply(
        [&rows](const at::Tensor& leaf) {
          return leaf.index_select(0, leaf.device() == rows.device() ? rows
                                                                      : rows.to(leaf.device()));
        },
        ApplyOptions().batch_size(std::move(batch)));
  }

  // The rows of a contiguous CPU leaf mapped from a file, copied row by row with memcpy under the
  // SIGBUS guard (NOTE [ SIGBUS guard ] in td/core/mapped_copy.h), in chunks over LibTorch's
  // threads as index_select would: a file another process truncated is then a MemmapError naming
  // the key, not the end of the process.
  static at::Tensor GatherMapped(const NestedKey& key, const at::Tensor& leaf,
                                 const at::Tensor& rows) {
    std::vector<int64_t> shape = leaf.sizes().vec();
    shape[0] = rows.size(0);
    at::Tensor out = at::empty(shape, leaf.options());
    const int64_t n = rows.size(0);
    if (n == 0 || out.numel() == 0) return out;
    const int64_t row_bytes = leaf.stride(0) * static_cast<int64_t>(leaf.element_size());
    const auto* src = static_cast<const char*>(leaf.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    const at::Tensor idx = rows.contiguous();
    const int64_t* r = idx.data_ptr<int64_t>();
    std::atomic<bool> faulted{false};
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / row_bytes);
    at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
      const bool ok = internal::GuardedCopy([&] {
        for (int64_t i = begin; i < end; ++i) {
          std::memcpy(dst + i * row_bytes, src + r[i] * row_bytes, static_cast<size_t>(row_bytes));
        }
      });
      if (!ok) faulted = true;
    });
    if (faulted) {
      TD_FAIL(MemmapError, "BatchLoader: reading rows of key ", key.repr(), " (",
              SizeRepr(leaf.sizes()), " ", DtypeName(leaf.scalar_type()),
              ") from its memory-mapped file raised SIGBUS: the file is shorter than when it was "
              "mapped (truncated by another process?); load the TensorDict again");
    }
    return out;
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
