// The contract for concurrent use of one memmap prefix (docs/memmap.md, "Concurrent writers and
// readers"): N threads or processes calling memmap() on the same prefix all succeed, the last
// commit wins, and every concurrent load_memmap sees one complete version, never a mix and never
// a missing file (NOTE [ Readers and removers of memmap directories ] in fs.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

constexpr int kLeaves = 8;

// Small enough (< 8 MiB) that memmap writes stay on the calling thread (safe after fork()).
TensorDict Version(float v) {
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < kLeaves; ++i) {
    items.emplace_back("leaf" + std::to_string(i), at::full({64, 256}, v));
  }
  items.emplace_back("nested", Value(TensorDict({{"x", at::full({64, 8}, v)}}, {64})));
  items.emplace_back("version", NonTensorData(nlohmann::json(v)));
  return TensorDict(items, {64});
}

// Loads `dir` and returns its version, or an error message when it does not load or mixes
// versions.
std::string CheckOne(const std::string& dir, float* version) {
  try {
    TensorDict t = TensorDict::load_memmap(dir);
    if (t.num_keys() != static_cast<size_t>(kLeaves + 2)) return "incomplete: " + t.repr();
    const float v = t.get_non_tensor("version").get<float>();
    for (const Value& leaf : t.values(KeysOptions().include_nested(true).leaves_only(true))) {
      if (leaf.is_tensor() && !leaf.tensor().eq(v).all().item<bool>()) {
        return "a leaf is not from version " + std::to_string(v);
      }
    }
    *version = v;
    return "";
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
}

// Waits for `pid` at most until `deadline`; kills it and returns -1 past it.
int WaitFor(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST(MemmapConcurrencyTest, ProcessesWritingAndLoadingOnePrefix) {
  const std::string root = testing_util::FreshDir("conc-proc");
  const std::string dir = root + "/ckpt";
  const TensorDict versions[3] = {Version(1), Version(2), Version(3)};
  versions[0].memmap(dir);
  // Each child runs for 1.5 s and at least kMinOps operations, however slow the machine, so
  // that writers and readers overlap; the deadline below only catches a hang.
  const auto run_for = std::chrono::milliseconds(1500);
  constexpr int kMinOps = 3;
  std::vector<pid_t> children;
  for (int w = 0; w < 3; ++w) {  // three writers, each its own version
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto end = std::chrono::steady_clock::now() + run_for;
      int writes = 0;
      while (writes < kMinOps || std::chrono::steady_clock::now() < end) {
        try {
          TensorDict out = versions[w].memmap(dir);
          if (out.get_non_tensor("version").get<float>() != w + 1) ::_exit(3);
          ++writes;
        } catch (const c10::Error& e) {
          std::fprintf(stderr, "writer %d: %s\n", w, e.what_without_backtrace());
          ::_exit(1);
        }
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (int r = 0; r < 2; ++r) {  // two readers
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const auto end = std::chrono::steady_clock::now() + run_for;
      int loads = 0;
      while (loads < kMinOps || std::chrono::steady_clock::now() < end) {
        float v = 0;
        const std::string err = CheckOne(dir, &v);
        if (!err.empty()) {
          std::fprintf(stderr, "reader %d: %s\n", r, err.c_str());
          ::_exit(1);
        }
        ++loads;
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (pid_t pid : children) {
    EXPECT_EQ(WaitFor(pid, deadline), 0) << "child " << pid << " (-1: still running after 120 s)";
  }
  float v = 0;
  EXPECT_EQ(CheckOne(dir, &v), "");
  EXPECT_TRUE(v == 1 || v == 2 || v == 3) << v;
  // Nothing but the checkpoint is left: every writer removed what it swapped out.
  EXPECT_EQ(testing_util::ListNames(root), std::vector<std::string>{"ckpt"});
}

TEST(MemmapConcurrencyTest, ThreadsWritingAndLoadingOnePrefix) {
  const std::string root = testing_util::FreshDir("conc-threads");
  const std::string dir = root + "/ckpt";
  std::vector<TensorDict> versions;
  for (int w = 0; w < 4; ++w) versions.push_back(Version(10 + w));
  versions[0].memmap(dir);
  std::atomic<int> failures{0}, writes{0}, loads{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 15; ++i) {
        try {
          TensorDict out = versions[w].memmap(dir);
          // The TensorDict returned is the version this call wrote, even when another thread
          // replaced it on disk right after.
          if (out.get_non_tensor("version").get<float>() != 10 + w) ++failures;
          ++writes;
        } catch (const c10::Error& e) {
          ADD_FAILURE() << "writer " << w << ": " << e.what_without_backtrace();
          ++failures;
        }
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      do {  // at least one load per reader, however the threads are scheduled
        float v = 0;
        const std::string err = CheckOne(dir, &v);
        if (!err.empty()) {
          ADD_FAILURE() << "reader " << r << ": " << err;
          ++failures;
        }
        ++loads;
      } while (!stop);
    });
  }
  for (int w = 0; w < 4; ++w) threads[w].join();
  stop = true;
  for (size_t i = 4; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(writes, 60);
  EXPECT_GE(loads, 2);
  float v = 0;
  EXPECT_EQ(CheckOne(dir, &v), "");
  EXPECT_EQ(testing_util::ListNames(root), std::vector<std::string>{"ckpt"});
}

}  // namespace
}  // namespace td
