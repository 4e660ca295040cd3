#include "td/executor/executor.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/util/Exception.h>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

#include "td/compat/omp.h"

namespace td {
namespace parallel {
namespace {

std::atomic<int> g_num_threads{0};  // 0: default_num_threads()

// Depth of td parallel tasks on this thread (see in_parallel_task()).
thread_local int t_task_depth = 0;

struct TaskDepth {
  TaskDepth() { ++t_task_depth; }
  ~TaskDepth() { --t_task_depth; }
};

// One arena per concurrency, created on first use and kept for the life of the process (never
// destroyed, so no TBB teardown runs during static destruction). One slot is reserved for the
// thread that calls execute(), which works in the arena instead of waiting.
tbb::task_arena& ArenaFor(int threads) {
  static std::mutex* mu = new std::mutex;
  static auto* arenas = new std::map<int, std::unique_ptr<tbb::task_arena>>;
  std::lock_guard<std::mutex> lock(*mu);
  std::unique_ptr<tbb::task_arena>& arena = (*arenas)[threads];
  if (!arena) arena = std::make_unique<tbb::task_arena>(threads, /*reserved_for_masters=*/1);
  return *arena;
}


}  // namespace

int default_num_threads() {
  static const int n = std::max(1, tbb::info::default_concurrency());
  return n;
}

int num_threads() {
  const int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_num_threads();
}

void set_num_threads(int n) {
  TORCH_CHECK_VALUE(n >= 0, "td::parallel::set_num_threads: expected a number of threads >= 0 ",
                    "(0 restores the default of ", default_num_threads(), "), got ", n);
  g_num_threads.store(n, std::memory_order_relaxed);
}

bool in_parallel_task() { return t_task_depth > 0; }

IntraOpThreadsGuard::IntraOpThreadsGuard(int n) {
  const compat::OpenMpApi& omp = compat::OpenMp();
  if (!omp) return;
  // LibTorch sets OpenMP's nthreads on a thread the first time it runs an op there; do that now,
  // so that it cannot overwrite the cap later.
  at::get_num_threads();
  const int current = omp.get_max_threads();
  const int cap = std::max(1, n);
  if (cap < current) {
    omp.set_num_threads(cap);
    previous_ = current;
  }
}

IntraOpThreadsGuard::~IntraOpThreadsGuard() {
  if (previous_ > 0) compat::OpenMp().set_num_threads(previous_);
}

int intra_op_threads_per_task(int threads, int64_t tasks) {
  const int64_t per = std::max<int64_t>(1, threads) / std::max<int64_t>(1, tasks);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), per)));
}

void check_num_threads(int num_threads, const char* what) {
  TORCH_CHECK_VALUE(num_threads >= 0, what,
                    " must be >= 0 (0: the call decides, 1: the calling thread, n: at most n "
                    "threads), got ",
                    num_threads);
}

int plan_threads(int64_t n, int64_t total_cost, const ParallelOptions& options) {
  check_num_threads(options.num_threads(), "ParallelOptions::num_threads");
  const int budget = options.num_threads() > 0 ? options.num_threads() : num_threads();
  if (options.parallel().has_value() && !*options.parallel()) return 1;
  if (n < 2 || budget < 2) return 1;
  if (!options.parallel().has_value() && total_cost < options.min_cost()) return 1;
  return static_cast<int>(std::min<int64_t>(budget, n));
}

void run_in_arena(int threads, const std::function<void()>& fn) {
  TORCH_CHECK_VALUE(threads >= 1, "td::parallel::run_in_arena: expected threads >= 1, got ",
                    threads);
  if (in_parallel_task()) {
    fn();  // nested: share the enclosing arena's threads (NOTE [ Thread policy ], point 2)
    return;
  }
  // TBB starts default_concurrency - 1 workers unless told otherwise; the arena's other slots
  // would stay empty.
  std::optional<tbb::global_control> more_workers;
  if (threads > default_num_threads()) {
    more_workers.emplace(tbb::global_control::max_allowed_parallelism, threads);
  }
  ArenaFor(threads).execute([&] {
    TaskDepth depth;
    fn();
  });
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& body) {
  if (n <= 0) return;
  if (threads <= 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  const int intra = intra_op_threads_per_task(threads, threads);
  const at::ThreadLocalState tls;
  // Lowest index that failed so far (n: none). Indices above it are skipped; indices below it
  // always run, so the error kept is the one a serial loop would have stopped at.
  std::atomic<int64_t> first_failed{n};
  std::mutex error_mu;
  std::exception_ptr error;
  auto run_range = [&](const tbb::blocked_range<int64_t>& range) {
    at::ThreadLocalStateGuard tls_guard(tls);
    IntraOpThreadsGuard intra_guard(intra);
    TaskDepth depth;
    for (int64_t i = range.begin(); i < range.end(); ++i) {
      if (i > first_failed.load(std::memory_order_acquire)) return;
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (i < first_failed.load(std::memory_order_relaxed)) {
          first_failed.store(i, std::memory_order_release);
          error = std::current_exception();
        }
      }
    }
  };
  run_in_arena(threads, [&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1), run_range);
  });
  if (error) std::rethrow_exception(error);
}

struct BackgroundTasks::Impl {
  explicit Impl(int n)
      : threads(n),
        intra(intra_op_threads_per_task(n, n)),
        // Every slot is for TBB's workers: the submitting thread never runs a task.
        arena(n, /*reserved_for_masters=*/0) {
    // TBB keeps default_num_threads() - 1 workers unless told otherwise.
    if (n > default_num_threads() - 1) {
      more_workers.emplace(tbb::global_control::max_allowed_parallelism, n + 1);
    }
  }

  const int threads;
  const int intra;
  std::optional<tbb::global_control> more_workers;
  tbb::task_arena arena;
  std::mutex mu;
  std::condition_variable idle;
  int64_t pending = 0;
  std::exception_ptr error;
};

// One submitted task as TBB runs it (TBB calls it as const; `task` is moved out when it runs).
struct BackgroundTasks::Job {
  Impl* impl;
  at::ThreadLocalState tls;
  mutable std::function<void()> task;

  void operator()() const {
    std::exception_ptr error;
    {
      at::ThreadLocalStateGuard tls_guard(tls);
      IntraOpThreadsGuard intra_guard(impl->intra);
      TaskDepth depth;
      // Whatever the task holds is released before its owner can see it finished.
      std::function<void()> run = std::move(task);
      try {
        run();
      } catch (...) {
        error = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(impl->mu);
    if (error && !impl->error) impl->error = error;
    if (--impl->pending == 0) impl->idle.notify_all();
  }
};

BackgroundTasks::BackgroundTasks(int threads) {
  TORCH_CHECK_VALUE(threads >= 1, "td::parallel::BackgroundTasks: expected threads >= 1, got ",
                    threads);
  impl_ = std::make_unique<Impl>(threads);
}

BackgroundTasks::~BackgroundTasks() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle.wait(lock, [&] { return impl_->pending == 0; });
}

int BackgroundTasks::threads() const { return impl_->threads; }

void BackgroundTasks::submit(std::function<void()> task) {
  Impl* impl = impl_.get();
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    ++impl->pending;
  }
  impl->arena.enqueue(Job{impl, at::ThreadLocalState(), std::move(task)});
}

void BackgroundTasks::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->idle.wait(lock, [&] { return impl_->pending == 0; });
  if (impl_->error) {
    std::exception_ptr error = impl_->error;
    impl_->error = nullptr;
    std::rethrow_exception(error);
  }
}

void parallel_for(int64_t n, int64_t total_cost, const ParallelOptions& options,
                  const std::function<void(int64_t)>& body) {
  parallel_for(n, plan_threads(n, total_cost, options), body);
}

}  // namespace parallel
}  // namespace td
