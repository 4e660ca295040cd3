// td::parallel::map and map_iter: run a function over chunks of a TensorDict's batch on TBB
// workers — Python's `data.map(process_data, num_workers=4, chunksize=0, pbar=True)`.
//
//   // fn returns a new TensorDict per chunk: the results come back concatenated in order.
//   td::TensorDict scores = td::parallel::map(
//       data, [](const td::TensorDict& chunk) {
//         return td::TensorDict({{"score", chunk.get("images").mean(-1)}}, chunk.batch_size());
//       },
//       td::parallel::MapOptions().num_workers(4).chunksize(1024).pbar(true));
//
//   // fn modifies its chunk in place (chunks are views of `data`); out(data) writes nothing more.
//   td::parallel::map(data, [](td::TensorDict chunk) {
//     chunk.set_("images", chunk.get("images").flip(-2));
//   }, td::parallel::MapOptions().num_workers(4).chunksize(0).out(data));
//
//   // One result at a time, in order, computed ahead by the workers.
//   for (const td::TensorDict& r : td::parallel::map_iter(data, fn, options)) consume(r);
//
// Chunks: the batch dim `dim` (rows) is split into `chunksize` rows per chunk, or `num_chunks`
// nearly equal chunks (sizes differ by at most one), by default one chunk per worker.
// `chunksize(0)` means one item at a time: fn gets `data[i]` along `dim` (that dim removed) and
// the results are stacked. A chunk is `data.index({..., Slice(start, end)})`: views of the
// source's leaves (nested TensorDicts and non-tensor data included; lazy backends give views
// that write through), so writing into it with set_ writes into the source — a memmap source
// included.
//
// fn takes `(TensorDict chunk)` or `(TensorDict chunk, const ChunkInfo& info)` and returns a
// TensorDict (the chunk's result), std::optional<TensorDict> (nullopt: the chunk itself), or
// nothing (the chunk itself, after fn modified it in place). fn runs on several threads at once,
// on different chunks. Randomness that must repeat from run to run comes from
// `info.generator()`: seeded per chunk from MapOptions::seed, it does not depend on which worker
// runs which chunk.
//
// Threads follow NOTE [ Thread policy ] (td/executor/executor.h): `num_workers` TBB workers in a
// task_arena, LibTorch intra-op threads capped inside each chunk.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "td/core/tensordict.h"
#include "td/parallel/progress.h"

namespace td {
namespace parallel {

struct MapOptions {
  // The batch dim to split (negative counts from the end of the batch dims).
  TORCH_ARG(int64_t, dim) = 0;
  // Worker threads; 0 means td::parallel::num_threads(). 1 runs every chunk on the calling
  // thread, in order.
  TORCH_ARG(int, num_workers) = 0;
  // Rows per chunk (the last one may be shorter); 0: one item at a time (see above).
  // At most one of chunksize and num_chunks may be set; neither means one chunk per worker.
  TORCH_ARG(std::optional<int64_t>, chunksize) = std::nullopt;
  // Number of nearly equal chunks (capped at the number of rows).
  TORCH_ARG(std::optional<int64_t>, num_chunks) = std::nullopt;
  // map only: write each chunk's result into the chunk's rows of this TensorDict (in place,
  // with out.index_put_: keys `out` lacks are created as zeros first — lazy preallocation —
  // and the other shapes must fit) instead of concatenating; map then returns `out`. A result
  // that is the chunk itself of a source that is `out` is not copied at all. `out`'s size along
  // `dim` must be the source's.
  TORCH_ARG(std::optional<TensorDict>, out) = std::nullopt;
  // Draw a progress bar on stderr (rows done, rate, time left); see progress.h.
  TORCH_ARG(bool, pbar) = false;
  // How the bar is drawn (desc defaults to "map"; stream/tty are for tests and logs).
  TORCH_ARG(ProgressBarOptions, pbar_options) = ProgressBarOptions();
  // Base seed of the per-chunk generators (chunk i: seed + i). nullopt: drawn from LibTorch's
  // default CPU generator, so at::manual_seed(s) before map makes runs repeat.
  TORCH_ARG(std::optional<uint64_t>, seed) = std::nullopt;
  // map_iter only: chunks computed ahead of the consumer; 0 means 2 * num_workers.
  TORCH_ARG(int64_t, prefetch) = 0;
};

// What the two-argument form of fn is told about its chunk.
class ChunkInfo {
 public:
  ChunkInfo(int64_t index, int64_t start, int64_t length, uint64_t seed)
      : index_(index), start_(start), length_(length), seed_(seed) {}
  // Position of the chunk (0, 1, ...), its first row along `dim`, and its number of rows (1 for
  // chunksize 0).
  int64_t index() const { return index_; }
  int64_t start() const { return start_; }
  int64_t length() const { return length_; }
  // The seed of this chunk's generator: MapOptions::seed + index().
  uint64_t seed() const { return seed_; }
  // A CPU generator seeded with seed(), created on first use; pass it to random ops:
  //   at::Tensor noise = at::randn(sizes, info.generator());
  at::Generator generator() const;

 private:
  int64_t index_, start_, length_;
  uint64_t seed_;
  mutable std::optional<at::Generator> generator_;
};

namespace internal {

using ChunkFn = std::function<std::optional<TensorDict>(TensorDict&, const ChunkInfo&)>;

template <class R>
constexpr bool kValidResult = std::is_void_v<R> || std::is_convertible_v<R, std::optional<TensorDict>>;

// Adapts the accepted forms of fn to ChunkFn.
template <class Fn>
ChunkFn WrapChunkFn(Fn fn) {
  if constexpr (std::is_invocable_v<Fn&, TensorDict&, const ChunkInfo&>) {
    using R = std::invoke_result_t<Fn&, TensorDict&, const ChunkInfo&>;
    static_assert(kValidResult<R>, "map: fn must return TensorDict, std::optional<TensorDict> or void");
    return [fn = std::move(fn)](TensorDict& chunk, const ChunkInfo& info) mutable
           -> std::optional<TensorDict> {
      if constexpr (std::is_void_v<R>) {
        fn(chunk, info);
        return std::nullopt;
      } else {
        return fn(chunk, info);
      }
    };
  } else {
    static_assert(std::is_invocable_v<Fn&, TensorDict&>,
                  "map: fn must take (TensorDict) or (TensorDict, const ChunkInfo&)");
    using R = std::invoke_result_t<Fn&, TensorDict&>;
    static_assert(kValidResult<R>, "map: fn must return TensorDict, std::optional<TensorDict> or void");
    return [fn = std::move(fn)](TensorDict& chunk, const ChunkInfo&) mutable
           -> std::optional<TensorDict> {
      if constexpr (std::is_void_v<R>) {
        fn(chunk);
        return std::nullopt;
      } else {
        return fn(chunk);
      }
    };
  }
}

TensorDict Map(const TensorDict& data, ChunkFn fn, const MapOptions& options);
struct MapIterState;

}  // namespace internal

// Runs fn over the chunks of `data` on `num_workers` threads and returns the results
// concatenated along `dim` in chunk order (stacked for chunksize 0), or `out` when given.
// Throws: ValueError for both chunksize and num_chunks, a negative chunksize or num_workers,
// num_chunks < 1; IndexError when `dim` is not a batch dim; BatchSizeError when `out`'s size
// along `dim` differs from `data`'s; an exception from fn is rethrown with the chunk it happened
// on (the first failing chunk in order; chunks after it may not have run). With `out`, rows of
// chunks that finished before the failure are written.
//   auto r = td::parallel::map(data, fn, td::parallel::MapOptions().num_workers(2));
template <class Fn>
TensorDict map(const TensorDict& data, Fn&& fn, const MapOptions& options = {}) {
  return internal::Map(data, internal::WrapChunkFn(std::forward<Fn>(fn)), options);
}

// The results of fn over the chunks of `data`, one by one in chunk order, while `num_workers`
// workers compute up to `prefetch` chunks ahead. Created by map_iter(); move-only. Destroying it
// early skips the chunks not started and waits for those running.
class MapIter {
 public:
  MapIter(const TensorDict& data, internal::ChunkFn fn, const MapOptions& options);
  MapIter(MapIter&&) noexcept;
  MapIter& operator=(MapIter&&) noexcept;
  ~MapIter();

  // The next chunk's result, or nullopt after the last. Throws the chunk's error (with its
  // context) if fn failed on it; the iteration is then over.
  std::optional<TensorDict> next();
  // Number of chunks.
  int64_t size() const;

  // Input iterator for range-for; `*it` is the current result.
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = TensorDict;
    using difference_type = std::ptrdiff_t;
    using pointer = const TensorDict*;
    using reference = const TensorDict&;
    iterator() = default;
    const TensorDict& operator*() const { return *current_; }
    const TensorDict* operator->() const { return &*current_; }
    iterator& operator++() {
      current_ = owner_->next();
      return *this;
    }
    bool operator==(const iterator& o) const { return current_.has_value() == o.current_.has_value(); }
    bool operator!=(const iterator& o) const { return !(*this == o); }

   private:
    friend class MapIter;
    explicit iterator(MapIter* owner) : owner_(owner), current_(owner->next()) {}
    MapIter* owner_ = nullptr;
    std::optional<TensorDict> current_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  std::unique_ptr<internal::MapIterState> state_;
};

// map's lazy form (MapOptions::out is not accepted: ValueError). The same checks as map, made
// when called.
//   for (const td::TensorDict& r : td::parallel::map_iter(data, fn, opts)) writer.write(r);
template <class Fn>
MapIter map_iter(const TensorDict& data, Fn&& fn, const MapOptions& options = {}) {
  return MapIter(data, internal::WrapChunkFn(std::forward<Fn>(fn)), options);
}

}  // namespace parallel
}  // namespace td
