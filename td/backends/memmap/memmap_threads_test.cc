// memmap IO goes through the executor (NOTE [ Thread policy ] in td/executor/executor.h):
// td::parallel::set_num_threads(1) makes memmap writes serial, per-call num_threads overrides the
// budget, and large writes use the budget by default.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"
#include "td/executor/executor.h"

namespace td {
namespace {

// Restores the default thread budget when a test ends.
struct BudgetGuard {
  ~BudgetGuard() { parallel::set_num_threads(0); }
};

TEST(MemmapThreadsTest, WriteThreadsFollowTheBudget) {
  BudgetGuard guard;
  using internal::memmap::WriteThreads;
  constexpr int64_t kBig = int64_t{1} << 30;
  const parallel::ParallelOptions none = MemmapOptions().parallel_options();
  parallel::set_num_threads(1);
  EXPECT_EQ(WriteThreads(none, kBig, 64), 1);
  EXPECT_EQ(WriteThreads(none, 1024, 64), 1);
  parallel::set_num_threads(2);
  const int cpus = std::min(2, parallel::default_num_threads());
  EXPECT_EQ(WriteThreads(none, kBig, 64), cpus);
  EXPECT_EQ(WriteThreads(none, 1024, 64), 1);  // too small to be worth threads
  EXPECT_EQ(WriteThreads(none, kMemmapMinParallelBytes - 1, 64), 1);
  EXPECT_EQ(WriteThreads(none, kMemmapMinParallelBytes, 64), cpus);
  EXPECT_EQ(WriteThreads(none, kBig, 1), 1);  // one leaf
  EXPECT_EQ(WriteThreads(MemmapOptions().num_threads(1).parallel_options(), kBig, 64), 1);
  // An explicit num_threads is a budget: below min_cost the write stays serial, as apply does.
  EXPECT_EQ(WriteThreads(MemmapOptions().num_threads(2).parallel_options(), 1024, 64), 1);
  // The rest of the embedded value (NOTE [ num_threads ]): parallel and min_cost.
  EXPECT_EQ(WriteThreads(MemmapOptions().parallel(true).parallel_options(), 1024, 64), cpus);
  EXPECT_EQ(WriteThreads(MemmapOptions().min_cost(1024).parallel_options(), 1024, 64), cpus);
  EXPECT_EQ(WriteThreads(MemmapOptions().parallel(false).parallel_options(), kBig, 64), 1);
  // A per-call budget above the CPUs is capped at the CPUs (file IO).
  EXPECT_EQ(WriteThreads(MemmapOptions().num_threads(64).parallel_options(), kBig, 64),
            parallel::default_num_threads());
  parallel::set_num_threads(0);
  EXPECT_EQ(WriteThreads(none, kBig, 64),
            std::min(parallel::num_threads(), parallel::default_num_threads()));
}

// NOTE [ num_threads ]: one meaning everywhere, and a negative count is refused by name.
TEST(MemmapThreadsTest, NegativeNumThreadsIsAValueError) {
  const std::string dir = testing_util::FreshDir("threads");
  TensorDict td({{"a", at::zeros({2})}, {"b", at::ones({2})}}, {2});
  TD_EXPECT_THROW_MSG(td.memmap(dir + "/x", MemmapOptions().num_threads(-1)), c10::ValueError,
                      {"MemmapOptions::num_threads", "-1"});
  td.memmap(dir + "/y", MemmapOptions().num_threads(2));
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir + "/y", LoadMemmapOptions().num_threads(-2)),
                      c10::ValueError, {"LoadMemmapOptions::num_threads", "-2"});
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/y", LoadMemmapOptions().num_threads(2))
                  .get("b")
                  .equal(at::ones({2})));
  TD_EXPECT_THROW_MSG(td.apply([](const at::Tensor& t) { return t; },
                               ApplyOptions().num_threads(-1)),
                      c10::ValueError, {"ApplyOptions::num_threads"});
}

// Loads count files against LoadMemmapOptions' min_cost; parallel(true) or a lower threshold maps
// them on several threads, with the same result.
TEST(MemmapThreadsTest, LoadsTakeTheWholeParallelOptions) {
  EXPECT_EQ(LoadMemmapOptions().min_cost(), kLoadMemmapMinParallelFiles);
  EXPECT_EQ(MemmapOptions().min_cost(), kMemmapMinParallelBytes);
  const std::string dir = testing_util::FreshDir("threads");
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < 8; ++i) items.emplace_back("k" + std::to_string(i), at::full({3}, i));
  TensorDict td(items, {3});
  td.memmap(dir + "/d", MemmapOptions().parallel(true).num_threads(2));
  for (const LoadMemmapOptions& o :
       {LoadMemmapOptions(), LoadMemmapOptions().parallel(true).num_threads(2),
        LoadMemmapOptions().min_cost(2), LoadMemmapOptions().parallel(false)}) {
    TensorDict back = TensorDict::load_memmap(dir + "/d", o);
    for (int i = 0; i < 8; ++i) {
      EXPECT_TRUE(back.get("k" + std::to_string(i)).equal(at::full({3}, i))) << i;
    }
  }
}

TEST(MemmapThreadsTest, RunParallelReturnsTheLowestError) {
  std::vector<int> ran(16, 0);
  absl::Status s = internal::memmap::RunParallel(16, 2, [&](size_t i) {
    ran[i] = 1;
    return i == 5 || i == 9 ? absl::DataLossError("bad " + std::to_string(i)) : absl::OkStatus();
  });
  EXPECT_EQ(s.message(), "bad 5");
  for (size_t i = 0; i <= 5; ++i) EXPECT_EQ(ran[i], 1) << i;
}

std::mutex g_mu;
std::set<std::thread::id> g_threads;  // threads on which an at:: op ran

std::unique_ptr<at::ObserverContext> RecordThread(const at::RecordFunction&) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_threads.insert(std::this_thread::get_id());
  return nullptr;
}

// The ops that copy strided leaves into the files (narrow, contiguous) run on the threads that
// write; with a budget of one they all run on the calling thread.
TEST(MemmapThreadsTest, SetNumThreadsOneMakesMemmapWritesSerial) {
  BudgetGuard guard;
  at::CallbackHandle handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&RecordThread).scopes({at::RecordScope::FUNCTION}));
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < 16; ++i) {
    // 1 MiB each, transposed: written through an at:: copy, 16 MiB in all (above the 8 MiB from
    // which writes go parallel by default).
    items.emplace_back("leaf" + std::to_string(i), at::full({512, 512}, float(i)).t());
  }
  TensorDict td(items, {});
  const std::string dir = testing_util::FreshDir("threads");
  parallel::set_num_threads(1);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_threads.clear();
  }
  TensorDict out = td.memmap(dir + "/serial");
  {
    std::lock_guard<std::mutex> lock(g_mu);
    EXPECT_FALSE(g_threads.empty());  // the callback saw the copies
    EXPECT_EQ(g_threads, std::set<std::thread::id>{std::this_thread::get_id()});
  }
  at::removeCallback(handle);
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(out.get("leaf" + std::to_string(i)).equal(td.get("leaf" + std::to_string(i))));
  }
}

}  // namespace
}  // namespace td
