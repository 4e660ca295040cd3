// NOTE [ Crash-safe memmap writes ] (memmap_internal.h), tested by killing writers: a fork()ed
// child rewrites a checkpoint in a loop and is SIGKILLed at varying moments, half of them while
// it is stopped inside a write (writer_testing.h: found by its temporary on disk, not by timing);
// the checkpoint must then load, complete, with every leaf from the same write.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/test_util.h"
#include "td/backends/memmap/writer_testing.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

constexpr int kLeaves = 48;

// 48 leaves of 1 MiB (plus a nested level and non-tensor data), every element equal to `v`.
TensorDict Version(float v) {
  std::vector<TensorDict::Item> items;
  for (int i = 0; i < kLeaves; ++i) {
    items.emplace_back("leaf" + std::to_string(i), at::full({256, 1024}, v));
  }
  items.emplace_back("nested", Value({{"x", at::full({256, 8}, v)}}));
  items.emplace_back("version", NonTensorData(nlohmann::json(v)));
  return TensorDict(items, {256});
}

// The value every leaf of the checkpoint at `dir` holds; fails the test when the checkpoint does
// not load, is incomplete, or mixes writes.
float CheckUniform(const std::string& dir) {
  TensorDict loaded;
  try {
    loaded = TensorDict::load_memmap(dir);
  } catch (const c10::Error& e) {
    ADD_FAILURE() << "checkpoint does not load: " << e.what_without_backtrace();
    return -1;
  }
  EXPECT_EQ(loaded.num_keys(), static_cast<size_t>(kLeaves + 2));
  const float v = loaded.get_non_tensor("version").get<float>();
  for (const Value& leaf : loaded.values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!leaf.is_tensor()) continue;
    EXPECT_TRUE(leaf.tensor().eq(v).all().item<bool>()) << "a leaf is not from write " << v;
  }
  return v;
}

int CountTemps(const std::string& root) {
  int n = 0;
  for (const std::string& name : testing_util::ListNames(root)) {
    if (name.rfind(".td-tmp-", 0) == 0) ++n;
  }
  return n;
}

TEST(MemmapCrashTest, KilledWriterLeavesACompleteCheckpoint) {
  const std::string root = testing_util::FreshDir("crash");
  const std::string dir = root + "/ckpt";
  // Built before fork(): the child only writes files (no ATen thread pools after fork).
  const TensorDict first = Version(1);
  const TensorDict versions[2] = {Version(2), Version(3)};
  first.memmap(dir);
  int killed_mid_write = 0;
  int stopped_in_write = 0;
  const int kRounds = 12;
  std::vector<pid_t> writers;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid > 0) writers.push_back(pid);
    if (pid == 0) {
      for (int i = 0;; ++i) versions[i % 2].memmap(dir);
    }
    const bool stop_in_write = round % 2 == 1;
    if (stop_in_write) {
      // Inside a write, whatever the machine's load.
      ASSERT_EQ(testing_util::StopInsideWrite(pid, root), "");
      ++stopped_in_write;
    } else {
      // At moments spread over a few writes (each takes tens of milliseconds when unloaded).
      std::this_thread::sleep_for(std::chrono::milliseconds(7 + 23 * round));
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));
    if (CountTemps(root) > 0) ++killed_mid_write;
    if (stop_in_write) {
      EXPECT_TRUE(testing_util::HasTempOf(pid, root)) << "stopped inside a write, yet no temporary";
    }
    const float v = CheckUniform(dir);
    EXPECT_TRUE(v == 1 || v == 2 || v == 3) << v;
    // Only the checkpoint and dead writers' temporaries are there: this writer's, and an earlier
    // one's when this writer was killed before it removed them (slow runs, e.g. under ASan).
    for (const std::string& name : testing_util::ListNames(root)) {
      bool ok = name == "ckpt";
      for (pid_t w : writers) ok = ok || name.rfind(".td-tmp-" + std::to_string(w) + "-", 0) == 0;
      EXPECT_TRUE(ok) << name;
    }
  }
  EXPECT_GE(killed_mid_write, stopped_in_write);
  // The next write removes what the dead writers left.
  first.memmap(dir);
  EXPECT_EQ(testing_util::ListNames(root), std::vector<std::string>{"ckpt"});
  EXPECT_EQ(CheckUniform(dir), 1);
}

// Killed inside its first write (stopped there, writer_testing.h): the temporary exists, so the
// commit (one rename onto the name) has not happened, and nothing exists under the name.
TEST(MemmapCrashTest, KilledFirstWriteLeavesNothingUnderTheName) {
  const std::string root = testing_util::FreshDir("crash");
  const std::string dir = root + "/fresh";
  const TensorDict data = Version(5);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    data.memmap(dir, MemmapOptions().fsync(true));
    ::_exit(0);
  }
  ASSERT_EQ(testing_util::StopInsideWrite(pid, root), "");
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(testing_util::HasTempOf(pid, root));
  EXPECT_FALSE(testing_util::Exists(dir));
  EXPECT_THROW(TensorDict::load_memmap(dir), MemmapError);
  // The next write to the name removes the dead writer's temporary.
  data.memmap(dir);
  EXPECT_EQ(testing_util::ListNames(root), std::vector<std::string>{"fresh"});
  EXPECT_EQ(CheckUniform(dir), 5);
}

}  // namespace
}  // namespace td
