// Test helper: td::distributed::spawn (td/distributed/spawn.h) for gtest, with a deadline so
// that a lost peer fails the test instead of hanging it.
//
//   auto status = td::distributed::test::RunRanks(
//       td::distributed::test::RunOptions().world_size(2),
//       [](int rank, const td::distributed::ProcessGroupPtr& pg) { ... EXPECT_...; });
//   td::distributed::test::ExpectAllPassed(status);
//
// Children die with the parent (PR_SET_PDEATHSIG), so a killed test leaves none behind.
// In the children gtest assertions work as usual; a failed one (or an exception) makes the
// child exit non-zero, which the parent reports. The parent itself must not have used LibTorch's
// thread pools before forking (keep LibTorch calls inside the rank function).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/group.h"
#include "td/distributed/spawn.h"

namespace td {
namespace distributed {
namespace test {

// The options of td::distributed::spawn (td/distributed/spawn.h). RunRanks bounds a run that
// sets no deadline by kDefaultDeadline.
using RunOptions = SpawnOptions;

// Shorter than the Bazel timeout of the tests that use RunRanks (their BUILD rules), so a hang
// fails by name. The group timeout (SpawnOptions::group_timeout, 60 s) is several times what a
// wait needs under ASan on a loaded 2-core machine; a test that wants a wait to end by its
// timeout gives that call a short timeout of its own (P2POptions::timeout,
// CollectiveOptions::timeout) rather than shortening the group's.
constexpr std::chrono::milliseconds kDefaultDeadline{180000};

// td::distributed::spawn with `fn` as every rank's function; a rank whose gtest assertion failed
// exits with code 2. Per rank: "ok", or what went wrong (RankExit::to_string: "exit code 1",
// "killed at the deadline", ...).
std::vector<std::string> RunRanks(const RunOptions& options,
                                  const std::function<void(int, const ProcessGroupPtr&)>& fn);

// EXPECTs every status to be "ok", naming the rank otherwise.
void ExpectAllPassed(const std::vector<std::string>& status);

// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir();

// True when every tensor leaf of `td` (non-tensor entries are skipped) equals `value`: what a
// receiver holds after a complete receive of a constant TensorDict, or still holds after a
// refused one.
bool AllEqual(const TensorDict& td, double value);

}  // namespace test
}  // namespace distributed
}  // namespace td
