// td::distributed::spawn: ranks in real processes, how each ended, its options and its errors.
// Every run that is not meant to end at its deadline sets none: a rank's waits are bounded by
// the group timeout, and the Bazel timeout bounds the rest.
#include "td/distributed/spawn.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "td/core/errors.h"
#include "td/distributed/multiprocess_testing.h"

namespace td {
namespace distributed {
namespace {

// Points TMPDIR at a fresh directory while it lives, so that a test sees what spawn leaves there.
class ScopedTmpdir {
 public:
  ScopedTmpdir() : path_(test::MakeTempDir()) {
    const char* old = std::getenv("TMPDIR");
    if (old != nullptr) old_ = old;
    ::setenv("TMPDIR", path_.c_str(), 1);
  }
  ~ScopedTmpdir() {
    if (old_.empty()) {
      ::unsetenv("TMPDIR");
    } else {
      ::setenv("TMPDIR", old_.c_str(), 1);
    }
  }
  bool empty() const { return std::filesystem::is_empty(path_); }

 private:
  std::string path_, old_;
};

// Exit code 0 when the group is the one rank r of `world` should hold.
int CheckGroup(int rank, const ProcessGroupPtr& pg, int world) {
  return pg->getRank() == rank && pg->getSize() == world ? 0 : 7;
}

TEST(Spawn, EveryRankHoldsItsGroupAndTheStoreDirectoryIsRemoved) {
  ScopedTmpdir tmp;
  const auto exits = spawn(SpawnOptions().world_size(3), [](int rank, const ProcessGroupPtr& pg) {
    return CheckGroup(rank, pg, 3);
  });
  ASSERT_EQ(exits.size(), 3u);
  for (size_t r = 0; r < exits.size(); ++r) {
    EXPECT_TRUE(exits[r].ok()) << "rank " << r << ": " << exits[r].to_string();
    EXPECT_EQ(exits[r].to_string(), "ok");
  }
  EXPECT_TRUE(all_ok(exits));
  EXPECT_TRUE(tmp.empty()) << "spawn left its store directory behind";
}

TEST(Spawn, TcpStoreOnLoopback) {
  const auto exits = spawn(SpawnOptions().world_size(2).tcp(true),
                           [](int rank, const ProcessGroupPtr& pg) {
                             return CheckGroup(rank, pg, 2);
                           });
  EXPECT_TRUE(all_ok(exits)) << exits[0].to_string() << ", " << exits[1].to_string();
}

TEST(Spawn, ReportsEachRanksExitCode) {
  const auto exits = spawn(SpawnOptions().world_size(3),
                           [](int rank, const ProcessGroupPtr&) { return rank == 1 ? 5 : 0; });
  EXPECT_TRUE(exits[0].ok());
  EXPECT_EQ(exits[1].code, 5);
  EXPECT_EQ(exits[1].to_string(), "exit code 5");
  EXPECT_FALSE(exits[1].deadline);
  EXPECT_TRUE(exits[2].ok());
  EXPECT_FALSE(all_ok(exits));
}

TEST(Spawn, AThrowingRankExitsWithOne) {
  // No final barrier: the rank that throws never reaches it. The barrier first: a rank that threw
  // at once could close its connection while its peer was still joining (Gloo connects each pair
  // from both ends), and the peer's join would fail under load.
  const auto exits = spawn(SpawnOptions().world_size(2).final_barrier(false),
                           [](int rank, const ProcessGroupPtr& pg) -> int {
                             pg->barrier()->wait(std::chrono::seconds(60));
                             if (rank == 1) throw std::runtime_error("rank 1 gives up");
                             return 0;
                           });
  EXPECT_TRUE(exits[0].ok()) << exits[0].to_string();
  EXPECT_EQ(exits[1].to_string(), "exit code 1");
}

TEST(Spawn, ReportsASignal) {
  const auto exits = spawn(SpawnOptions().world_size(1).in_child([](int) {
                             ::kill(::getpid(), SIGKILL);
                           }),
                           [](int, const ProcessGroupPtr&) { return 0; });
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(exits[0].code, -1);
  EXPECT_FALSE(exits[0].deadline);
  EXPECT_EQ(exits[0].to_string(), "killed by signal 9");
}

TEST(Spawn, KillsWhatStillRunsAtTheDeadline) {
  // The process never ends by itself, whatever the machine's load: only the deadline ends it.
  ScopedTmpdir tmp;
  const auto exits = spawn(SpawnOptions().world_size(1).deadline(std::chrono::milliseconds(300))
                               .in_child([](int) {
                                 for (;;) ::pause();
                               }),
                           [](int, const ProcessGroupPtr&) { return 0; });
  EXPECT_TRUE(exits[0].deadline);
  EXPECT_EQ(exits[0].to_string(), "killed at the deadline");
  EXPECT_FALSE(all_ok(exits));
  EXPECT_TRUE(tmp.empty());
}

// The deadline covers the forking too: a clock that advances one second per reading passes a
// 2.5 s deadline after ranks 0 and 1 are forked (readings: the start, before rank 0, before rank
// 1, before rank 2), so ranks 2 and 3 are never forked and 0 and 1 are killed. The injected
// clock makes the verdict independent of the machine's speed.
TEST(Spawn, TheDeadlineCoversForking) {
  ScopedTmpdir tmp;
  int readings = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto exits = spawn(
      SpawnOptions()
          .world_size(4)
          .deadline(std::chrono::milliseconds(2500))
          .clock([&readings, t0] { return t0 + std::chrono::seconds(readings++); })
          .in_child([](int) {
            for (;;) ::pause();
          }),
      [](int, const ProcessGroupPtr&) { return 0; });
  ASSERT_EQ(exits.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(exits[r].deadline);
    EXPECT_FALSE(exits[r].ok());
    EXPECT_EQ(exits[r].started, r < 2);
  }
  EXPECT_EQ(exits[0].to_string(), "killed at the deadline");
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_EQ(exits[3].to_string(),
            "not started: the deadline passed while the ranks were being forked");
  EXPECT_EQ(exits[3].signal, 0);
  EXPECT_FALSE(all_ok(exits));
  EXPECT_TRUE(tmp.empty());
}

TEST(Spawn, GroupOptionsHookSeesTheRankAndItsStore) {
  // The hook's changes reach the group: a larger timeout is harmless, a wrong world size is not.
  const auto exits = spawn(SpawnOptions().world_size(2).group_options([](int rank,
                                                                         GroupOptions& g) {
                             if (g.rank() != rank || g.world_size() != 2 ||
                                 g.file_store_path().empty()) {
                               std::_Exit(9);
                             }
                             g.timeout(std::chrono::minutes(2));
                           }),
                           [](int rank, const ProcessGroupPtr& pg) {
                             return CheckGroup(rank, pg, 2);
                           });
  EXPECT_TRUE(all_ok(exits)) << exits[0].to_string() << ", " << exits[1].to_string();
}

TEST(Spawn, RejectsBadOptionsBeforeForking) {
  const auto fn = [](int, const ProcessGroupPtr&) { return 0; };
  try {
    spawn(SpawnOptions().world_size(0), fn);
    ADD_FAILURE() << "world_size 0 was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("world_size must be >= 1, got 0"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  EXPECT_THROW(spawn(SpawnOptions().group_timeout(std::chrono::milliseconds(0)), fn), ValueError);
  EXPECT_THROW(spawn(SpawnOptions().deadline(std::chrono::milliseconds(-1)), fn), ValueError);
  EXPECT_THROW(spawn(SpawnOptions(), nullptr), ValueError);
}

}  // namespace
}  // namespace distributed
}  // namespace td
