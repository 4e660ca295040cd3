// torch.multiprocessing.spawn for a process group on this machine: runs a function in
// `world_size` forked processes that form a Gloo group, and reports how each process ended.
//
//   auto exits = td::distributed::spawn(
//       td::distributed::SpawnOptions().world_size(4).deadline(std::chrono::minutes(5)),
//       [](int rank, const td::distributed::ProcessGroupPtr& pg) {
//         td::distributed::all_reduce(pg, grads, td::distributed::ReduceOp::kAvg);
//         return 0;   // this process's exit code
//       });
//   return td::distributed::all_ok(exits) ? 0 : 1;
//
// The ranks meet through a FileStore in a fresh directory under TMPDIR (or /tmp), removed when
// spawn returns, or through a TCPStore on a free 127.0.0.1 port. A process whose function throws
// prints "[rank r] uncaught exception: ..." on stderr and exits with code 1. A rank may start its
// function before a slower peer has finished joining: one that exits at once can make that
// peer's join fail, so begin with pg->barrier() where a rank may end early. The children die
// with the caller (PR_SET_PDEATHSIG), so a killed program leaves none behind.
//
// fork copies only the calling thread: call spawn before this process has used LibTorch's thread
// pools (intra-op and inter-op parallel work), and keep LibTorch work inside the function.
#pragma once

#include <torch/arg.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "td/distributed/group.h"

namespace td {
namespace distributed {

struct SpawnOptions {
  // Processes, one per rank. >= 1.
  TORCH_ARG(int, world_size) = 2;
  // The group's timeout: the rendezvous and every wait inside the ranks (GroupOptions::timeout).
  TORCH_ARG(std::chrono::milliseconds, group_timeout) = std::chrono::milliseconds(60000);
  // The whole run, forking included, counted from the call; processes still alive then are
  // killed (RankExit::deadline), and when it passes while the ranks are being forked no further
  // rank is forked (those report RankExit::started false). nullopt: wait for them however long
  // they take (their waits are still bounded by group_timeout).
  TORCH_ARG(std::optional<std::chrono::milliseconds>, deadline) = std::nullopt;
  // The time source the deadline is measured with (nullptr: std::chrono::steady_clock::now);
  // tests give one to pass the deadline at a chosen point without depending on machine speed.
  TORCH_ARG(std::function<std::chrono::steady_clock::time_point()>, clock) = nullptr;
  // Rendezvous through a TCPStore on a free 127.0.0.1 port instead of a FileStore.
  TORCH_ARG(bool, tcp) = false;
  // A barrier after the function returns, so that no rank exits while a peer still talks to it.
  TORCH_ARG(bool, final_barrier) = true;
  // Called first in each process, right after fork (e.g. to enter the rank's network namespace:
  // VirtualNetwork::Enter in td/distributed/netns_testing.h).
  TORCH_ARG(std::function<void(int)>, in_child) = nullptr;
  // Adjusts a rank's group options (master address and port, device) before its group is made.
  TORCH_ARG(std::function<void(int, GroupOptions&)>, group_options) = nullptr;
};

// How one rank's process ended.
struct RankExit {
  // The exit code, when the process exited; -1 otherwise.
  int code = -1;
  // The signal that killed it, when one did; 0 otherwise.
  int signal = 0;
  // Killed by spawn at SpawnOptions::deadline, or never started because the deadline passed
  // while the ranks were being forked.
  bool deadline = false;
  // False when the process was never forked (the deadline passed before its turn).
  bool started = true;

  // Exited with code 0.
  bool ok() const { return code == 0; }
  // "ok", "exit code 1", "killed by signal 9", "killed at the deadline" or "not started: the
  // deadline passed while the ranks were being forked".
  std::string to_string() const;
};

// Forks options.world_size() processes; the r-th makes rank r's group and runs fn(r, group),
// whose result is its exit code. Returns one RankExit per rank, in rank order, once every
// process has ended (or at the deadline: the processes still alive are killed, and once it has
// passed no further rank is forked). Throws td::ValueError for an empty `fn`,
// world_size < 1 or a non-positive group_timeout or deadline; c10::Error when the store
// directory or a process cannot be made (processes already started are killed first).
std::vector<RankExit> spawn(const SpawnOptions& options,
                            const std::function<int(int, const ProcessGroupPtr&)>& fn);

// True when every rank exited with code 0.
bool all_ok(const std::vector<RankExit>& exits);

}  // namespace distributed
}  // namespace td
