#include "td/executor/executor.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "td/core/testing.h"

namespace td {
namespace parallel {
namespace {

// Tracks how many bodies run at once.
struct Concurrency {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  void enter() {
    const int n = ++now;
    int p = peak.load();
    while (n > p && !peak.compare_exchange_weak(p, n)) {
    }
  }
  void leave() { --now; }
};

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(ExecutorTest, NumThreadsDefaultsAndCanBeSet) {
  EXPECT_EQ(num_threads(), default_num_threads());
  EXPECT_GE(default_num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), default_num_threads());
  TD_EXPECT_THROW_MSG(set_num_threads(-2), c10::ValueError, {">= 0", "got -2"});
}

TEST(ExecutorTest, PlanThreadsFollowsCostAndOptions) {
  const ParallelOptions two = ParallelOptions().num_threads(2);
  EXPECT_EQ(plan_threads(100, int64_t{1} << 30, two), 2);
  EXPECT_EQ(plan_threads(100, 640, two), 1);                     // below the threshold
  EXPECT_EQ(plan_threads(1, int64_t{1} << 30, two), 1);          // one item
  EXPECT_EQ(plan_threads(100, 640, ParallelOptions(two).parallel(true)), 2);
  EXPECT_EQ(plan_threads(100, int64_t{1} << 30, ParallelOptions(two).parallel(false)), 1);
  EXPECT_EQ(plan_threads(3, int64_t{1} << 30, ParallelOptions().num_threads(8)), 3);
  EXPECT_EQ(plan_threads(100, 1000, ParallelOptions(two).min_cost(1000)), 2);
  EXPECT_EQ(plan_threads(100, 999, ParallelOptions(two).min_cost(1000)), 1);
  EXPECT_EQ(plan_threads(100, int64_t{1} << 30, ParallelOptions().num_threads(1)), 1);
  TD_EXPECT_THROW_MSG(plan_threads(4, 4, ParallelOptions().num_threads(-1)), c10::ValueError,
                      {"num_threads", "got -1"});
  set_num_threads(1);
  EXPECT_EQ(plan_threads(100, int64_t{1} << 30, {}), 1);
  set_num_threads(0);
}

// An options struct as the library's are (NOTE [ num_threads ]): one embedded ParallelOptions.
struct SomeOptions : WithParallelOptions<SomeOptions> {
  TORCH_ARG(int, other) = 0;
};
// One with its own default threshold.
struct BytesOptions : WithParallelOptions<BytesOptions> {
  BytesOptions() : WithParallelOptions<BytesOptions>(ParallelOptions().min_cost(1 << 23)) {}
};

TEST(ExecutorTest, WithParallelOptionsChainsAndHandsDownTheWholeValue) {
  const SomeOptions defaults{};
  EXPECT_EQ(defaults.parallel(), std::nullopt);
  EXPECT_EQ(defaults.num_threads(), 0);
  EXPECT_EQ(defaults.min_cost(), kDefaultMinParallelCost);
  // Each setter returns the struct itself, so the struct's own setters chain after it.
  const SomeOptions o = SomeOptions().parallel(true).num_threads(3).min_cost(77).other(5);
  EXPECT_EQ(o.other(), 5);
  const ParallelOptions& p = o.parallel_options();
  EXPECT_EQ(p.parallel(), std::optional<bool>(true));
  EXPECT_EQ(p.num_threads(), 3);
  EXPECT_EQ(p.min_cost(), 77);
  // The whole value goes into another struct at once.
  const SomeOptions copy = SomeOptions().parallel_options(p).other(1);
  EXPECT_EQ(copy.parallel(), std::optional<bool>(true));
  EXPECT_EQ(copy.num_threads(), 3);
  EXPECT_EQ(copy.min_cost(), 77);
  EXPECT_EQ(plan_threads(100, 0, SomeOptions().num_threads(2).parallel(true).parallel_options()),
            2);
  EXPECT_EQ(plan_threads(100, 76, SomeOptions().num_threads(2).min_cost(77).parallel_options()),
            1);
  EXPECT_EQ(plan_threads(100, 77, SomeOptions().num_threads(2).min_cost(77).parallel_options()),
            2);
  EXPECT_EQ(BytesOptions().min_cost(), 1 << 23);
  EXPECT_EQ(BytesOptions().num_threads(4).min_cost(), 1 << 23);
}

TEST(ExecutorTest, EveryIndexRunsOnceAndResultsMatchSerial) {
  for (int threads : {1, 2, 3}) {
    const int64_t n = 1000;
    std::vector<std::atomic<int>> runs(n);
    std::vector<int64_t> out(n, -1);
    parallel_for(n, threads, [&](int64_t i) {
      ++runs[i];
      out[i] = i * i;
    });
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(runs[i].load(), 1) << "index " << i << " threads " << threads;
      ASSERT_EQ(out[i], i * i);
    }
  }
  parallel_for(0, 2, [](int64_t) { FAIL() << "no items"; });
}

TEST(ExecutorTest, SerialPlanRunsInOrderOnTheCallingThread) {
  std::vector<int64_t> order;
  const auto caller = std::this_thread::get_id();
  parallel_for(5, 640, ParallelOptions().num_threads(2), [&](int64_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_FALSE(in_parallel_task());
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(ExecutorTest, UsesTheThreadsItIsGivenAndNoMore) {
  for (int threads : {2, 3}) {
    Concurrency c;
    std::mutex mu;
    std::set<std::thread::id> ids;
    std::atomic<bool> gave_up{false};
    parallel_for(24, threads, [&](int64_t) {
      c.enter();
      EXPECT_TRUE(in_parallel_task());
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      // A barrier: the first bodies wait until `threads` of them run at once, so the check below
      // does not depend on how busy the machine is. Bounded (60 s, far more than a loaded
      // machine needs to start the threads): it fails by name instead of hanging.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (c.peak.load() < threads && !gave_up) {
        if (std::chrono::steady_clock::now() > deadline) gave_up = true;
        Sleep(1);
      }
      c.leave();
    });
    EXPECT_FALSE(gave_up) << "fewer than " << threads << " bodies ran at once within 60 s";
    EXPECT_LE(c.peak.load(), threads);
    // More threads than CPUs too: the worker limit is raised for the call.
    EXPECT_EQ(c.peak.load(), threads) << "threads " << threads;
    EXPECT_GE(static_cast<int>(ids.size()), threads);
  }
}

TEST(ExecutorTest, NestedLoopsShareTheEnclosingThreads) {
  Concurrency c;
  parallel_for(4, 2, [&](int64_t) {
    parallel_for(4, 2, [&](int64_t) {
      c.enter();
      Sleep(5);
      c.leave();
    });
  });
  EXPECT_LE(c.peak.load(), 2);
}

TEST(ExecutorTest, LowestFailingIndexIsRethrownWithItsType) {
  for (int threads : {1, 2}) {
    std::vector<std::atomic<int>> runs(64);
    try {
      parallel_for(64, threads, [&](int64_t i) {
        ++runs[i];
        if (i == 40) throw std::runtime_error("forty");
        if (i == 17) TORCH_CHECK_INDEX(false, "seventeen failed");
      });
      ADD_FAILURE() << "expected an exception";
    } catch (const c10::IndexError& e) {
      EXPECT_NE(std::string(e.what()).find("seventeen failed"), std::string::npos);
    }
    for (int i = 0; i <= 17; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i;
    for (int i = 18; i < 64; ++i) EXPECT_LE(runs[i].load(), 1) << "index " << i;
  }
}

TEST(ExecutorTest, TasksRunUnderTheCallersGradMode) {
  c10::AutoGradMode no_grad(false);
  std::atomic<int> enabled{0};
  parallel_for(16, 2, [&](int64_t) {
    if (c10::GradMode::is_enabled()) ++enabled;
    Sleep(1);
  });
  EXPECT_EQ(enabled.load(), 0);
}

TEST(ExecutorTest, IntraOpThreadsAreCappedInsideTasksAndRestoredAfter) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::atomic<int> above_one{0};
  parallel_for(8, 2, [&](int64_t) {
    if (at::get_num_threads() > 1) ++above_one;
    Sleep(2);
  });
  EXPECT_EQ(above_one.load(), 0);
  EXPECT_EQ(at::get_num_threads(), 2);
  {
    IntraOpThreadsGuard one(1);
    EXPECT_EQ(at::get_num_threads(), 1);
    IntraOpThreadsGuard never_raises(4);
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(intra_op_threads_per_task(8, 8), 1);
  EXPECT_EQ(intra_op_threads_per_task(8, 2), 2);  // min with LibTorch's own 2
  EXPECT_EQ(intra_op_threads_per_task(1, 4), 1);
  at::set_num_threads(before);
}

TEST(ExecutorTest, RunInArenaPropagatesExceptionsAndChecksThreads) {
  bool ran = false;
  run_in_arena(2, [&] {
    EXPECT_TRUE(in_parallel_task());
    ran = true;
  });
  EXPECT_TRUE(ran);
  EXPECT_FALSE(in_parallel_task());
  EXPECT_THROW(run_in_arena(2, [] { throw std::runtime_error("boom"); }), std::runtime_error);
  TD_EXPECT_THROW_MSG(run_in_arena(0, [] {}), c10::ValueError, {"threads >= 1", "got 0"});
}

}  // namespace
}  // namespace parallel
}  // namespace td
