// td/executor: the one place tbb work goes through. How many threads td's parallel algorithms
// use, a parallel-for over N items on a oneTBB task_arena with a cost threshold, and the guard that
// keeps LibTorch's own intra-op threads from multiplying inside those tasks. It sits below
// td/core and knows nothing about TensorDict, so td/core (apply, clone, to), the backends (memmap
// IO) and td/parallel (map, map_iter) all use it. Namespace td::parallel (the user-facing knobs
// are td::parallel::set_num_threads / num_threads).
//
//   td::parallel::set_num_threads(4);                       // the budget for everything below
//   std::vector<at::Tensor> out(leaves.size());
//   td::parallel::parallel_for(leaves.size(), total_numel, {}, [&](int64_t i) {
//     out[i] = leaves[i].exp();                             // one task per item, in any order
//   });
//
// NOTE [ Thread policy ]
// td's parallel algorithms (apply/apply_/clone/to over leaves, td::parallel::map over chunks,
// threaded memmap IO) share one rule so that LibTorch ops inside TBB tasks never multiply threads:
//
//  1. One budget. `td::parallel::num_threads()` (default: oneTBB's default concurrency, i.e. the
//     CPUs this process may run on; `set_num_threads(n)` changes it, per-call options override it)
//     is the number of threads one parallel region may keep busy.
//  2. A task_arena limit. Each region runs inside a `tbb::task_arena` whose concurrency is the
//     number of threads the region plans to use (the calling thread takes one slot and helps), so
//     TBB itself never runs more tasks at once than that. A region started from inside one of our
//     tasks (apply inside a map fn) runs in the enclosing arena instead: nesting shares the same
//     threads, it does not add any. Asking for more threads than oneTBB would start by default
//     (e.g. map with 4 workers on 2 CPUs) raises TBB's worker limit for the duration of the call
//     with a `tbb::global_control` — which cannot override a smaller limit the program set itself.
//  3. Intra-op threads per task. While a task runs, LibTorch's intra-op parallelism on that
//     thread is capped at max(1, min(at::get_num_threads(), budget / tasks running at once)):
//     100 leaves on 8 threads run 8 single-threaded ops at a time, 2 huge leaves on 8 threads run
//     2 ops of 4 threads each. The cap only ever lowers LibTorch's setting, is restored when the
//     task ends, and is per thread (OpenMP's per-thread nthreads, which is what at::parallel_for
//     asks through at::get_num_threads()); it never calls the process-wide at::set_num_threads.
//     LibTorch builds with the native or TBB intra-op backend share one fixed pool among all
//     callers, so there is nothing to multiply and the cap is a no-op.
//  4. Small work stays serial. Below a cost threshold (kDefaultMinParallelCost elements summed
//     over the items) or with one item or one thread, the loop runs in order on the calling
//     thread with no TBB involvement at all, so small TensorDicts never pay for threads. Leaf
//     loops over tensors on an accelerator (CUDA, ...) also stay serial unless parallel(true) is
//     asked: the current stream is per thread, and the device queues the work anyway.
//  5. Results do not depend on the schedule. Each task runs under the caller's LibTorch
//     thread-local state (grad mode, inference mode, dispatch keys: at::ThreadLocalState), and
//     when items fail, the error rethrown is the one of the lowest failing index — the error a
//     serial loop would have stopped at; every lower index has run.
//
// NOTE [ num_threads ]
// Every options struct of the library whose call may use threads embeds one ParallelOptions
// value (WithParallelOptions: ApplyOptions, ConsolidateOptions, MemmapOptions,
// LoadMemmapOptions, SaveOptions, LoadOptions) instead of declaring the fields itself, so
// `parallel`, `num_threads` and `min_cost` mean the same everywhere and the call hands the value
// whole to plan_threads / parallel_for (or to the options of the call it makes: save to
// memmap). `num_threads`:
//   0 (the default)  the call decides from the size of its work: up to td::parallel::num_threads()
//                    threads when the work reaches `min_cost`, else the calling thread alone;
//   1                the calling thread alone;
//   n > 1            at most n threads, when the work reaches `min_cost` (or `parallel(true)`);
//                    fewer when there are fewer items, or more threads than CPUs would only add
//                    contention (file IO);
//   n < 0            c10::ValueError naming the option (check_num_threads, by the struct's name).
// td::parallel::set_num_threads(1) therefore makes every call that is left at 0 serial. Each
// struct says its cost unit and default `min_cost`: apply elements, consolidate bytes (both
// kDefaultMinParallelCost), memmap writes bytes (8 MiB), loads files mapped (none reaches the
// default: mapping is cheap, loads are serial unless asked; td/core/memmap_options.h). Memmap IO
// takes the whole value too rather than a bare num_threads: one rule for when a call goes
// parallel everywhere, with `parallel(true)` / `min_cost` to change it.
// MapOptions::num_workers (td/parallel/map.h) is another thing: the workers map always starts
// (upstream's num_workers), more than the CPUs if asked, with no cost threshold.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

namespace td {
namespace parallel {

// Elements (summed over all items) below which parallel_for runs serially unless asked
// otherwise: ~100 µs of elementwise work, well above the cost of waking TBB's workers.
inline constexpr int64_t kDefaultMinParallelCost = int64_t{1} << 17;

// The thread budget of one parallel region (see NOTE [ Thread policy ]): the last value given to
// set_num_threads(), else oneTBB's default concurrency (the CPUs this process may use).
//   int n = td::parallel::num_threads();   // 2 on a 2-CPU machine
int num_threads();

// Sets the thread budget for every later parallel region; 0 goes back to the default. Per-call
// options (ApplyOptions::num_threads, MapOptions::num_workers) override it.
// Throws c10::ValueError when n < 0.
//   td::parallel::set_num_threads(1);   // everything in td runs serially
void set_num_threads(int n);

// The oneTBB default concurrency (CPUs this process may run on).
int default_num_threads();

// Throws c10::ValueError "<what> must be >= 0 ..." when a num_threads option is negative
// (NOTE [ num_threads ]).
//   td::parallel::check_num_threads(options.num_threads(), "MemmapOptions::num_threads");
void check_num_threads(int num_threads, const char* what);

// When and how widely parallel_for spreads items over threads.
struct ParallelOptions {
  // nullopt: parallel when the total cost reaches `min_cost`; true: parallel whenever there are
  // two items and two threads; false: always serial.
  TORCH_ARG(std::optional<bool>, parallel) = std::nullopt;
  // Threads of this call (NOTE [ num_threads ]); 0: num_threads() when the cost reaches
  // `min_cost`.
  TORCH_ARG(int, num_threads) = 0;
  // Total cost (elements, bytes, ... — the caller's unit) from which to go parallel.
  TORCH_ARG(int64_t, min_cost) = kDefaultMinParallelCost;
};

// Gives an options struct one embedded ParallelOptions and its chainable setters (NOTE
// [ num_threads ]); a struct whose cost unit needs another default threshold passes its defaults
// to the constructor.
//   struct ApplyOptions : td::parallel::WithParallelOptions<ApplyOptions> { ... };
//   td.apply(fn, td::ApplyOptions().num_threads(4).min_cost(1 << 20));
//   td::parallel::plan_threads(n, cost, options.parallel_options());
template <class Derived>
class WithParallelOptions {
 public:
  // ParallelOptions::parallel, num_threads and min_cost of the embedded value.
  Derived& parallel(std::optional<bool> parallel) {
    options_.parallel(parallel);
    return self();
  }
  const std::optional<bool>& parallel() const noexcept { return options_.parallel(); }
  Derived& num_threads(int num_threads) {
    options_.num_threads(num_threads);
    return self();
  }
  int num_threads() const noexcept { return options_.num_threads(); }
  Derived& min_cost(int64_t min_cost) {
    options_.min_cost(min_cost);
    return self();
  }
  int64_t min_cost() const noexcept { return options_.min_cost(); }
  // The whole value, to hand down.
  Derived& parallel_options(const ParallelOptions& options) {
    options_ = options;
    return self();
  }
  const ParallelOptions& parallel_options() const noexcept { return options_; }

 protected:
  WithParallelOptions() = default;
  explicit WithParallelOptions(const ParallelOptions& defaults) : options_(defaults) {}

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  ParallelOptions options_;
};

// How many threads a loop over `n` items of total cost `total_cost` runs on under `options`:
// 1 means serial on the calling thread. Throws c10::ValueError for a negative num_threads.
//   plan_threads(100, 100'000'000, {}) == 2   // on 2 CPUs
//   plan_threads(10, 640, {}) == 1            // too small: serial
int plan_threads(int64_t n, int64_t total_cost, const ParallelOptions& options);

// Runs body(i) for every i in [0, n) on `threads` threads (a task_arena of that concurrency that
// the calling thread joins; see NOTE [ Thread policy ]), or in order on the calling thread when
// threads <= 1 or n <= 1. body must be safe to call concurrently for different i.
// Throws: when body throws for some indices, the exception of the lowest of them is rethrown (as
// is) after every running task has finished; all indices below it have run, indices above it may
// or may not have (those not started yet are skipped).
//   std::vector<at::Tensor> out(n);
//   td::parallel::parallel_for(n, 2, [&](int64_t i) { out[i] = in[i].exp(); });
void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& body);

// plan_threads + parallel_for: parallel only when the work is worth it.
//   td::parallel::parallel_for(leaves.size(), total_numel, {}, [&](int64_t i) { ... });
void parallel_for(int64_t n, int64_t total_cost, const ParallelOptions& options,
                  const std::function<void(int64_t)>& body);

// Runs fn on the calling thread inside the task_arena of `threads` threads (or inside the
// enclosing one when already in one of td's tasks), with TBB's worker limit raised to `threads`
// if needed: TBB algorithms that fn starts (tbb::parallel_for, task_group) stay within the
// budget. For code that drives TBB itself, such as threaded memmap IO. Exceptions from fn
// propagate. Throws c10::ValueError when threads < 1.
//   td::parallel::run_in_arena(4, [&] { tbb::parallel_for(0, n, write_file); });
void run_in_arena(int threads, const std::function<void()>& fn);

// True while the calling thread runs a task of parallel_for / run_in_arena / td::parallel::map.
bool in_parallel_task();

// `threads` TBB worker threads that run submitted tasks in the background, in submission order
// as far as threads allow, while the submitting thread goes on with its own work (it never runs
// them itself). Each task runs under the thread policy (NOTE [ Thread policy ]): a task_arena of
// `threads` slots, the submitter's LibTorch thread-local state, capped intra-op threads, and
// in_parallel_task() true. For pipelines such as td::parallel::map_iter.
// Throws c10::ValueError when threads < 1.
//   td::parallel::BackgroundTasks tasks(2);
//   for (int i = 0; i < 8; ++i) tasks.submit([&, i] { results[i] = work(i); });
//   tasks.wait();   // the destructor waits too
class BackgroundTasks {
 public:
  explicit BackgroundTasks(int threads);
  // Waits for every submitted task (exceptions left in tasks are dropped).
  ~BackgroundTasks();
  BackgroundTasks(const BackgroundTasks&) = delete;
  BackgroundTasks& operator=(const BackgroundTasks&) = delete;

  // Queues `task`. Tasks should handle their own errors; if one throws anyway, the first such
  // exception is rethrown by the next wait().
  void submit(std::function<void()> task);
  // Blocks until every task submitted so far has finished; rethrows the first exception a task
  // let escape since the last wait().
  void wait();
  int threads() const;

 private:
  struct Impl;
  struct Job;
  std::unique_ptr<Impl> impl_;
};

// Caps LibTorch's intra-op threads on the calling thread at `n` (>= 1) until destroyed; never
// raises them (see NOTE [ Thread policy ], point 3). A no-op on LibTorch builds whose intra-op
// backend is not OpenMP.
//   { td::parallel::IntraOpThreadsGuard one(1); a.matmul(b); }   // single-threaded matmul
class IntraOpThreadsGuard {
 public:
  explicit IntraOpThreadsGuard(int n);
  ~IntraOpThreadsGuard();
  IntraOpThreadsGuard(const IntraOpThreadsGuard&) = delete;
  IntraOpThreadsGuard& operator=(const IntraOpThreadsGuard&) = delete;

 private:
  int previous_ = 0;  // the value to restore, 0 when nothing was changed
};

// The intra-op thread count each of `tasks` concurrent tasks gets out of a budget of `threads`:
// max(1, min(at::get_num_threads(), threads / tasks)).
int intra_op_threads_per_task(int threads, int64_t tasks);

}  // namespace parallel
}  // namespace td
