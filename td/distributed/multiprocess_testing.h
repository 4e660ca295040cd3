// Test helper: runs a function in `world_size` real processes (fork) that form a Gloo group
// over a FileStore in a fresh temp dir or a TCPStore on a free 127.0.0.1 port, with a deadline
// so that a lost peer fails the test instead of hanging it.
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

#include <torch/arg.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/group.h"

namespace td {
namespace distributed {
namespace test {

struct RunOptions {
  TORCH_ARG(int, world_size) = 2;
  // Group timeout: every wait inside the ranks (rendezvous included), well under the deadline.
  // Generous: several times what a wait needs under ASan on a loaded 2-core machine. A test that
  // wants a wait to end by its timeout gives that call a short timeout of its own
  // (P2POptions::timeout, CollectiveOptions::timeout) rather than shortening this one.
  TORCH_ARG(std::chrono::milliseconds, group_timeout) = std::chrono::milliseconds(60000);
  // The whole run; children still alive then are killed and reported as timed out. Shorter than
  // the Bazel timeout of the tests that use it (their BUILD rules), so a hang fails by name.
  TORCH_ARG(std::chrono::milliseconds, deadline) = std::chrono::milliseconds(180000);
  // Rendezvous through a TCPStore on a free 127.0.0.1 port instead of a FileStore.
  TORCH_ARG(bool, tcp) = false;
  // A barrier after the function, so no rank exits while a peer still talks to it.
  TORCH_ARG(bool, final_barrier) = true;
  // Called first in each child, right after fork (e.g. to enter the rank's network namespace,
  // VirtualNetwork::Enter in netns_testing.h).
  TORCH_ARG(std::function<void(int)>, in_child) = nullptr;
  // Adjusts a rank's group options (master address and port, device) before the group is made.
  TORCH_ARG(std::function<void(int, GroupOptions&)>, group_options) = nullptr;
};

// Per rank: "ok", or what went wrong ("exit code 1", "killed at the deadline", ...).
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
