#include "td/parallel/map.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/stack.h"
#include "td/executor/executor.h"

namespace td {
namespace parallel {

at::Generator ChunkInfo::generator() const {
  if (!generator_) generator_ = at::make_generator<at::CPUGeneratorImpl>(seed_);
  return *generator_;
}

namespace internal {
namespace {

// How the batch dim is cut. Chunk i covers rows [start, start + length) along `dim`.
struct ChunkPlan {
  int64_t dim = 0;
  int64_t rows = 0;
  bool unbind = false;    // chunksize 0: one item per chunk, `dim` removed
  int64_t count = 0;      // number of chunks
  int64_t chunksize = 0;  // > 0: fixed-size chunks; 0: `count` nearly equal chunks

  std::pair<int64_t, int64_t> range(int64_t i) const {
    if (unbind) return {i, 1};
    if (chunksize > 0) {
      const int64_t start = i * chunksize;
      return {start, std::min(chunksize, rows - start)};
    }
    const int64_t base = rows / count, extra = rows % count;
    return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
  }

  std::string describe(int64_t i) const {
    auto [start, length] = range(i);
    if (unbind) return absl::StrCat("item ", start, " along dim ", dim);
    return absl::StrCat("chunk ", i, " (rows [", start, ", ", start + length, ") along dim ", dim,
                        ")");
  }
};

int Workers(const MapOptions& options) {
  if (options.num_workers() < 0) {
    TD_FAIL(ValueError, "map: num_workers must be >= 0 (0 means td::parallel::num_threads()), got ",
                     options.num_workers());
  }
  return options.num_workers() > 0 ? options.num_workers() : num_threads();
}

ChunkPlan PlanChunks(const TensorDict& data, const MapOptions& options, int workers) {
  ChunkPlan plan;
  const int64_t dims = data.batch_dims();
  int64_t dim = options.dim();
  if (dim < -dims || dim >= dims) {
    TD_FAIL(IndexError, "map: dim ", options.dim(), " is not a batch dim of a TensorDict with batch size ",
                     SizeRepr(data.batch_size()), " (expected a dim in [", -dims, ", ", dims, "))");
  }
  plan.dim = dim < 0 ? dim + dims : dim;
  plan.rows = data.batch_size()[plan.dim];
  if (options.chunksize() && options.num_chunks()) {
    TD_FAIL(ValueError, "map: give chunksize (", *options.chunksize(), ") or num_chunks (",
                     *options.num_chunks(), "), not both");
  }
  if (options.chunksize() && *options.chunksize() < 0) {
    TD_FAIL(ValueError, "map: chunksize must be >= 0 (0 means one item at a time), got ",
                     *options.chunksize());
  }
  if (options.num_chunks() && *options.num_chunks() < 1) {
    TD_FAIL(ValueError, "map: num_chunks must be >= 1, got ", *options.num_chunks());
  }
  if (options.chunksize() && *options.chunksize() == 0) {
    if (plan.rows == 0) {
      TD_FAIL(ValueError, "map: chunksize 0 maps item by item, but dim ", plan.dim,
                       " of batch size ", SizeRepr(data.batch_size()), " has no items");
    }
    plan.unbind = true;
    plan.count = plan.rows;
    return plan;
  }
  if (plan.rows == 0) {  // one empty chunk, so that the result still has fn's keys
    plan.count = 1;
    plan.chunksize = 1;
    return plan;
  }
  if (options.chunksize()) {
    plan.chunksize = *options.chunksize();
    plan.count = (plan.rows + plan.chunksize - 1) / plan.chunksize;
  } else {
    plan.count = std::min<int64_t>(plan.rows, options.num_chunks().value_or(workers));
  }
  return plan;
}

// The index of chunk i's rows: every earlier batch dim whole, then the rows [start, start +
// length) along `dim` (or item `start`, which removes the dim, when unbind). Chunks are taken with
// TensorDict::index and written with index_put_, so every backend gives views / writes through
// (a lazy stack or view included; see NOTE [ Storage interface ]).
std::vector<at::indexing::TensorIndex> ChunkIndex(const ChunkPlan& plan, int64_t i) {
  using at::indexing::Slice;
  auto [start, length] = plan.range(i);
  std::vector<at::indexing::TensorIndex> index(static_cast<size_t>(plan.dim), Slice());
  if (plan.unbind) {
    index.emplace_back(start);
  } else {
    index.emplace_back(Slice(start, start + length));
  }
  return index;
}

uint64_t BaseSeed(const MapOptions& options) {
  if (options.seed()) return *options.seed();
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

void CheckOut(const TensorDict& data, const TensorDict& out, const ChunkPlan& plan) {
  if (out.batch_dims() <= plan.dim || out.batch_size()[plan.dim] != plan.rows) {
    TD_FAIL(BatchSizeError, "map: out has batch size ", SizeRepr(out.batch_size()),
                         " but the results of a TensorDict with batch size ",
                         SizeRepr(data.batch_size()), " need ", plan.rows, " rows along dim ",
                         plan.dim);
  }
}

struct ChunkResult {
  TensorDict td;
  bool in_place;  // the chunk itself (fn modified it or returned it)
};

ChunkResult RunChunk(const TensorDict& data, const ChunkFn& fn, const ChunkPlan& plan, int64_t i,
                     uint64_t base_seed) {
  auto [start, length] = plan.range(i);
  TensorDict chunk = data.index(ChunkIndex(plan, i));
  const ChunkInfo info(i, start, length, base_seed + static_cast<uint64_t>(i));
  std::optional<TensorDict> r;
  try {
    r = fn(chunk, info);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("while mapping ", plan.describe(i)));
    throw;
  } catch (const std::exception& e) {
    TD_FAIL(c10::Error, e.what(), "\n(while mapping ", plan.describe(i), ")");
  }
  if (!r || r->is_same(chunk)) return {std::move(chunk), true};
  return {std::move(*r), false};
}

// Writes chunk i's result into its rows of `out` with index_put_. Writes of different chunks touch
// different rows and run concurrently; a write that has to create keys `out` lacks (index_put_'s
// lazy preallocation) changes `out`'s structure, so it runs alone.
class OutWriter {
 public:
  OutWriter(const TensorDict& data, const TensorDict& out, const ChunkPlan& plan)
      : data_(data), out_(out), plan_(plan) {}

  void Write(int64_t i, const ChunkResult& result) {
    if (result.in_place && out_.is_same(data_)) return;  // already there
    try {
      {
        std::shared_lock<std::shared_mutex> read(mu_);
        if (HasEveryLeaf(result.td)) {
          out_.index_put_(ChunkIndex(plan_, i), result.td);
          return;
        }
      }
      std::unique_lock<std::shared_mutex> write(mu_);
      out_.index_put_(ChunkIndex(plan_, i), result.td);
    } catch (c10::Error& e) {
      e.add_context(absl::StrCat("while writing the result of ", plan_.describe(i), " into out"));
      throw;
    }
  }

 private:
  bool HasEveryLeaf(const TensorDict& result) const {
    for (const NestedKey& k : result.keys(KeysOptions().include_nested(true).leaves_only(true))) {
      if (!out_.contains(k)) return false;
    }
    return true;
  }

  const TensorDict& data_;
  TensorDict out_;  // a handle: writes go to the caller's TensorDict
  const ChunkPlan& plan_;
  std::shared_mutex mu_;
};

ProgressBarOptions BarOptions(const MapOptions& options) {
  ProgressBarOptions bar = options.pbar_options();
  if (bar.desc().empty()) bar.desc("map");
  return bar;
}

}  // namespace

TensorDict Map(const TensorDict& data, ChunkFn fn, const MapOptions& options) {
  const int workers = Workers(options);
  const ChunkPlan plan = PlanChunks(data, options, workers);
  if (options.out()) CheckOut(data, *options.out(), plan);
  const uint64_t base_seed = BaseSeed(options);
  std::optional<ProgressBar> bar;
  if (options.pbar()) bar.emplace(plan.rows, BarOptions(options));
  std::vector<std::optional<TensorDict>> results(options.out() ? 0 : plan.count);
  std::optional<OutWriter> writer;
  if (options.out()) writer.emplace(data, *options.out(), plan);
  parallel_for(plan.count, static_cast<int>(std::min<int64_t>(workers, plan.count)),
               [&](int64_t i) {
                 ChunkResult r = RunChunk(data, fn, plan, i, base_seed);
                 if (writer) {
                   writer->Write(i, r);
                 } else {
                   results[i] = std::move(r.td);
                 }
                 if (bar) bar->update(plan.range(i).second);
               });
  if (bar) bar->close();
  if (options.out()) return *options.out();
  std::vector<TensorDict> parts;
  parts.reserve(results.size());
  for (std::optional<TensorDict>& r : results) parts.push_back(std::move(*r));
  try {
    return plan.unbind ? stack(parts, plan.dim) : cat(parts, plan.dim);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("while ", plan.unbind ? "stacking" : "concatenating",
                               " the results of map along dim ", plan.dim, " (TensorDict i is the result of ",
                               plan.unbind ? "item" : "chunk", " i)"));
    throw;
  }
}

// See MapIter. Chunk i's result goes to ring[i % ring.size()]; chunk i + ring.size() is only
// submitted once chunk i was taken by next(), so a slot is never shared.
struct MapIterState {
  struct Slot {
    bool ready = false;
    std::optional<TensorDict> result;
    std::exception_ptr error;
  };

  MapIterState(const TensorDict& d, ChunkFn f, const MapOptions& options)
      : data(d), fn(std::move(f)) {
    if (options.out()) {
      TD_FAIL(ValueError, "map_iter: out is not accepted (it yields each result instead); use map");
    }
    const int workers = Workers(options);
    plan = PlanChunks(data, options, workers);
    if (options.prefetch() < 0) {
      TD_FAIL(ValueError, "map_iter: prefetch must be >= 0 (0 means 2 * num_workers), got ",
                       options.prefetch());
    }
    const int64_t ahead = options.prefetch() > 0 ? options.prefetch() : 2 * int64_t{workers};
    ring.resize(static_cast<size_t>(std::max<int64_t>(1, std::min(ahead, plan.count))));
    base_seed = BaseSeed(options);
    if (options.pbar()) bar.emplace(plan.rows, BarOptions(options));
    tasks = std::make_unique<BackgroundTasks>(workers);
    while (next_launch < plan.count && next_launch < static_cast<int64_t>(ring.size())) {
      Launch(next_launch++);
    }
  }

  void Launch(int64_t i) {
    tasks->submit([this, i] {
      Slot filled;
      if (!stopping.load()) {
        try {
          filled.result = RunChunk(data, fn, plan, i, base_seed).td;
          if (bar) bar->update(plan.range(i).second);
        } catch (...) {
          filled.error = std::current_exception();
        }
      }
      filled.ready = true;
      std::lock_guard<std::mutex> lock(mu);
      ring[static_cast<size_t>(i) % ring.size()] = std::move(filled);
      ready_cv.notify_all();
    });
  }

  std::optional<TensorDict> Next() {
    if (finished) return std::nullopt;
    if (next_yield == plan.count) {
      Finish();
      return std::nullopt;
    }
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu);
      Slot& s = ring[static_cast<size_t>(next_yield) % ring.size()];
      ready_cv.wait(lock, [&] { return s.ready; });
      slot = std::move(s);
      s = Slot();
    }
    ++next_yield;
    if (slot.error) {
      Finish();
      std::rethrow_exception(slot.error);
    }
    while (next_launch < plan.count && next_launch < next_yield + static_cast<int64_t>(ring.size())) {
      Launch(next_launch++);
    }
    return std::move(slot.result);
  }

  void Finish() {
    finished = true;
    stopping.store(true);
    tasks->wait();
    if (bar) bar->close();
  }

  TensorDict data;
  ChunkFn fn;
  ChunkPlan plan;
  uint64_t base_seed = 0;
  std::optional<ProgressBar> bar;
  std::mutex mu;
  std::condition_variable ready_cv;
  std::vector<Slot> ring;
  int64_t next_yield = 0;
  int64_t next_launch = 0;
  bool finished = false;
  std::atomic<bool> stopping{false};
  // Last, so that it is destroyed first: its destructor waits for the running tasks, which use
  // everything above.
  std::unique_ptr<BackgroundTasks> tasks;
};

}  // namespace internal

MapIter::MapIter(const TensorDict& data, internal::ChunkFn fn, const MapOptions& options)
    : state_(std::make_unique<internal::MapIterState>(data, std::move(fn), options)) {}

MapIter::MapIter(MapIter&&) noexcept = default;
MapIter& MapIter::operator=(MapIter&& other) noexcept {
  if (this != &other) {
    if (state_) state_->stopping.store(true);
    state_ = std::move(other.state_);
  }
  return *this;
}

MapIter::~MapIter() {
  if (state_) state_->stopping.store(true);
}

std::optional<TensorDict> MapIter::next() { return state_->Next(); }

int64_t MapIter::size() const { return state_->plan.count; }

}  // namespace parallel
}  // namespace td
