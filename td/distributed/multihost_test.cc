// td::distributed across hosts (docs/distributed.md, "Multi-host"): one rank per network
// namespace (netns_testing.h), every byte between ranks over veth links through a bridge, the
// rendezvous through a TCPStore on rank 0's host address, Gloo bound to each host's own address.
// World sizes 2 and 4: every call over a slow link (tc tbf) and over a delayed, lossy one (a
// relay, netns_testing.h), interface selection on hosts with two NICs, a peer SIGKILLed before /
// during / after a large transfer, a link cut mid-transfer; the survivors get a named error,
// keep their TensorDicts unchanged, and build a new group.
// Skipped (with the reason) where network namespaces cannot be made.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "td/core/testing.h"
#include "td/distributed/distributed.h"
#include "td/distributed/multiprocess_testing.h"
#include "td/distributed/netns_testing.h"

namespace td {
namespace distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test::AllEqual;
using test::ExpectAllPassed;
using test::NetworkOptions;
using test::RunOptions;
using test::RunRanks;
using test::VirtualNetwork;

// Fresh namespaces: every port is free. A new group after a failure uses a new port (the old
// store may still hold it, or have died with its rank).
constexpr int kPort = 29500;
constexpr int kRegroupPort = 29501;
// Every wait of the first group; a cut link is noticed only when it fires.
const milliseconds kGroupTimeout = seconds(8);
// The new group's rendezvous: survivors learn of a failure up to one group timeout apart (one
// from a closed connection at once, another from its own timeout), so this must outlast it.
const milliseconds kRegroupTimeout = seconds(45);
const milliseconds kDeadline = seconds(150);
// 16 Mbit/s: 2 MB/s, 4 MiB in about 2 s.
constexpr int64_t kSlowLink = 16000000;
constexpr int64_t kMiB = int64_t{1} << 20;

// {"obs": [4, floats / 4] float, "n": {"act": [4, 8] int64}}, every leaf `value`.
TensorDict Data(double value, int64_t floats = 1024) {
  return TensorDict(
      {{"obs", at::full({4, floats / 4}, value)},
       {"n", TensorDict({{"act", at::full({4, 8}, static_cast<int64_t>(value), at::kLong)}}, {4})}},
      {4});
}


// Runs `call`, which must throw a TransportError naming `who`. How long that took is logged, not
// checked (it depends on the machine's load): a call that never returns is caught by the run's
// deadline (kDeadline), its rank reported as killed there.
void ExpectTransportError(const std::function<void()>& call, const std::string& who) {
  const auto start = Clock::now();
  try {
    call();
    ADD_FAILURE() << "expected a TransportError from " << who;
  } catch (const TransportError& e) {
    const std::string msg = e.what();
    // For the log: which error, after how long.
    std::cerr << "[" << who << "] after "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - start).count()
              << " ms: " << msg.substr(0, msg.find('\n')) << std::endl;
    EXPECT_NE(msg.find(who), std::string::npos) << msg;
    EXPECT_NE(msg.find("transport failure"), std::string::npos) << msg;
  }
}

// A thread that waits until `counter()` has grown by `bytes` since it started, then runs `then`.
// (The counters of a veth: the thread is in the rank's network namespace.)
std::thread Watch(std::function<int64_t()> counter, int64_t bytes, std::function<void()> then) {
  const int64_t start = counter();
  return std::thread([counter, start, bytes, then] {
    const auto give_up = Clock::now() + kGroupTimeout;
    while (counter() - start < bytes && Clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(2));
    }
    then();
  });
}

class MultiHostTest : public ::testing::TestWithParam<int> {
 protected:
  virtual int Nics() const { return 1; }

  void SetUp() override {
    std::string why;
    net_ = VirtualNetwork::Create(NetworkOptions().hosts(GetParam()).nics(Nics()), &why);
    if (!net_) GTEST_SKIP() << "multi-host tests need network namespaces: " << why;
  }

  // One rank per host: Gloo on the host's own address, the TCPStore on host 0's.
  RunOptions OnHosts() const {
    const VirtualNetwork* net = net_.get();
    return RunOptions()
        .world_size(net->hosts())
        .tcp(true)
        .group_timeout(kGroupTimeout)
        .deadline(kDeadline)
        .in_child([net](int rank) { net->Enter(rank); })
        .group_options([net](int rank, GroupOptions& g) {
          g.master_addr(net->Address(0)).master_port(kPort).device_hostname(net->Address(rank));
        });
  }

  void SlowLinks() const {
    for (int h = 0; h < net_->hosts(); ++h) net_->LimitRate(h, 0, kSlowLink);
  }

  // After a failure: the ranks in `members` (ascending, this rank among them) form a new group,
  // renumbered in that order, through a new TCPStore on the first member's address and a new port.
  ProcessGroupPtr Regroup(int rank, const std::vector<int>& members) const {
    int new_rank = 0;
    while (members[new_rank] != rank) ++new_rank;
    return init_process_group(GroupOptions()
                                  .rank(new_rank)
                                  .world_size(static_cast<int>(members.size()))
                                  .master_addr(net_->Address(members[0]))
                                  .master_port(kRegroupPort)
                                  .device_hostname(net_->Address(rank))
                                  .timeout(kRegroupTimeout));
  }

  // A peer SIGKILLed `when` (below).
  enum class When { kBefore, kDuring, kAfter };
  void PeerKilled(When when, int victim) const;
  // Host `cut`'s link cut mid-transfer (below).
  void LinkCut(int cut) const;

  std::unique_ptr<VirtualNetwork> net_;
};

// The new group works: an all_reduce, a 1 MiB send from its rank 0 to its last rank, a barrier.
void CarryOn(const ProcessGroupPtr& pg) {
  const int n = pg->getSize();
  TensorDict t = Data(1);
  all_reduce(pg, t);
  EXPECT_TRUE(AllEqual(t, n));
  if (n > 1) {
    TensorDict big = Data(pg->getRank() == 0 ? 6 : 0, kMiB / 4);
    if (pg->getRank() == 0) send(pg, big, n - 1);
    if (pg->getRank() == n - 1) {
      recv(pg, big, 0);
      EXPECT_TRUE(AllEqual(big, 6));
    }
  }
  pg->barrier()->wait(kRegroupTimeout);
}

std::vector<int> AllBut(int n, int excluded) {
  std::vector<int> out;
  for (int r = 0; r < n; ++r) {
    if (r != excluded) out.push_back(r);
  }
  return out;
}

// Returns on `victim` once every other rank has sent it a message (on `tag`), i.e. has finished
// making the group: a peer that dies while another rank is still connecting makes that rank's
// init_process_group fail instead (Gloo connects every pair).
void HeardFromAll(const ProcessGroupPtr& pg, int victim, int tag) {
  const int rank = pg->getRank();
  if (rank != victim) {
    send(pg, Data(1), victim, P2POptions().tag(tag));
    return;
  }
  for (int r : AllBut(pg->getSize(), victim)) {
    TensorDict ack = Data(0);
    recv(pg, ack, r, P2POptions().tag(tag));
  }
}

// ---- Rendezvous and every call over a slow, a delayed and a lossy link ------------------------

// Every call, 256 KiB leaves: point to point in both wire formats, blocking and not, both
// directions, init_remote; every collective. Values checked on every rank.
void EveryCall(int rank, const ProcessGroupPtr& pg) {
  const int n = pg->getSize();
  const int64_t floats = 64 << 10;
  if (rank == 0) {
    for (int r = 1; r < n; ++r) {
      const auto on = P2POptions().tag(r);
      init_remote(pg, Data(1, floats), r, on);
      send(pg, Data(2, floats), r, on);
      send(pg, Data(3, floats), r, P2POptions(on).wire_format(WireFormat::kPerLeaf));
      isend(pg, Data(4, floats), r, on).wait();
    }
    for (int r = 1; r < n; ++r) {
      TensorDict back = Data(0, floats);
      recv(pg, back, r);
      EXPECT_TRUE(AllEqual(back, 10 + r)) << "from rank " << r;
    }
  } else {
    const auto on = P2POptions().tag(rank);
    TensorDict got = from_remote_init(pg, 0, on);
    EXPECT_TRUE(AllEqual(got, 1));
    recv(pg, got, 0, on);
    EXPECT_TRUE(AllEqual(got, 2));
    recv(pg, got, 0, on);
    EXPECT_TRUE(AllEqual(got, 3));
    irecv(pg, got, 0, on).wait();
    EXPECT_TRUE(AllEqual(got, 4));
    send(pg, Data(10 + rank, floats), 0);
  }
  TensorDict b = Data(rank == n - 1 ? 7 : 0, floats);
  broadcast(pg, b, n - 1);
  EXPECT_TRUE(AllEqual(b, 7));
  TensorDict s = Data(rank + 1, floats);
  all_reduce(pg, s);
  EXPECT_TRUE(AllEqual(s, n * (n + 1) / 2));
  TensorDict m = Data(rank, floats);
  reduce(pg, m, 1, ReduceOp::kMax);
  if (rank == 1) {
    EXPECT_TRUE(AllEqual(m, n - 1));
  }
  std::vector<TensorDict> all = all_gather(pg, Data(rank, floats));
  ASSERT_EQ(static_cast<int>(all.size()), n);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(AllEqual(all[r], r)) << "all_gather " << r;
  std::vector<TensorDict> at0 = gather(pg, Data(20 + rank, floats), 0);
  EXPECT_EQ(static_cast<int>(at0.size()), rank == 0 ? n : 0);
  for (int r = 0; r < static_cast<int>(at0.size()); ++r) EXPECT_TRUE(AllEqual(at0[r], 20 + r));
  std::vector<TensorDict> parts;
  if (rank == 0) {
    for (int r = 0; r < n; ++r) parts.push_back(Data(100 + r, floats));
  }
  EXPECT_TRUE(AllEqual(scatter(pg, parts, 0), 100 + rank));
}

TEST_P(MultiHostTest, EveryCallIsCorrectOverASlowLink) {
  SlowLinks();
  ExpectAllPassed(RunRanks(OnHosts(), [](int rank, const ProcessGroupPtr& pg) {
    // The link is slow: 2 MiB take about 1 s at 2 MB/s (never less than 0.5 s).
    pg->barrier()->wait(kGroupTimeout);
    if (rank == 0) send(pg, Data(1, 2 * kMiB / 4), 1);
    if (rank == 1) {
      TensorDict big = Data(0, 2 * kMiB / 4);
      const auto start = Clock::now();
      recv(pg, big, 0);
      EXPECT_GE(Clock::now() - start, milliseconds(500)) << "the link is not rate-limited";
      EXPECT_TRUE(AllEqual(big, 1));
    }
    EveryCall(rank, pg);
  }));
}

// Host 0's link (the store's and rank 0's) through a relay holding every frame 20 ms and dropping
// 1% of them: TCP retransmits, every call still delivers exactly what was sent.
TEST_P(MultiHostTest, EveryCallIsCorrectOverADelayedLossyLink) {
  net_->Relay(0, milliseconds(20), 0.01);
  ExpectAllPassed(RunRanks(OnHosts(), [](int rank, const ProcessGroupPtr& pg) {
    // The link is delayed: a round trip between ranks 0 and 1 crosses it twice (>= 40 ms).
    TensorDict ping = Data(rank);
    const auto start = Clock::now();
    for (int i = 0; i < 5; ++i) {
      if (rank == 0) {
        send(pg, ping, 1);
        recv(pg, ping, 1);
      } else if (rank == 1) {
        recv(pg, ping, 0);
        send(pg, ping, 0);
      }
    }
    if (rank <= 1) {
      EXPECT_GE(Clock::now() - start, milliseconds(200)) << "the link is not delayed";
      EXPECT_TRUE(AllEqual(ping, 0));
    }
    EveryCall(rank, pg);
  }));
  std::cerr << "relay: " << net_->RelayedFrames() << " frames forwarded, " << net_->DroppedFrames()
            << " dropped" << std::endl;
  EXPECT_GT(net_->RelayedFrames(), 0);
  EXPECT_GT(net_->DroppedFrames(), 0) << "no frame was lost: the loss was not exercised";
}

// ---- Interface selection on hosts with two NICs ------------------------------------------------

class MultiNicTest : public MultiHostTest {
 protected:
  int Nics() const override { return 2; }
};

// The store on eth0's network, Gloo on eth1's: by address (device_hostname) on even ranks, by
// interface name from GLOO_SOCKET_IFNAME (options_from_env -> device_interface) on odd ones. The
// data crosses eth1 only.
TEST_P(MultiNicTest, GlooUsesTheChosenInterface) {
  const VirtualNetwork* net = net_.get();
  RunOptions o = OnHosts().group_options([net](int rank, GroupOptions& g) {
    g.master_addr(net->Address(0, 0)).master_port(kPort);
    if (rank % 2 == 0) {
      g.device_hostname(net->Address(rank, 1));
    } else {
      ::setenv("GLOO_SOCKET_IFNAME", "eth1", 1);
      g = options_from_env(g);
      EXPECT_EQ(g.device_interface(), "eth1");
    }
  });
  ExpectAllPassed(RunRanks(o, [](int rank, const ProcessGroupPtr& pg) {
    const int64_t rx0 = VirtualNetwork::RxBytes("eth0"), rx1 = VirtualNetwork::RxBytes("eth1");
    const int64_t tx0 = VirtualNetwork::TxBytes("eth0"), tx1 = VirtualNetwork::TxBytes("eth1");
    TensorDict t = Data(rank == 0 ? 5 : 0, kMiB / 4);
    broadcast(pg, t, 0);  // at least 1 MiB into every rank but 0, out of 0
    EXPECT_TRUE(AllEqual(t, 5));
    const int64_t in0 = VirtualNetwork::RxBytes("eth0") - rx0;
    const int64_t in1 = VirtualNetwork::RxBytes("eth1") - rx1;
    const int64_t out0 = VirtualNetwork::TxBytes("eth0") - tx0;
    const int64_t out1 = VirtualNetwork::TxBytes("eth1") - tx1;
    if (rank == 0) {
      EXPECT_GE(out1, kMiB) << "rank 0 sent " << out1 << " bytes on eth1";
    } else {
      EXPECT_GE(in1, kMiB) << "rank " << rank << " received " << in1 << " bytes on eth1";
    }
    EXPECT_LT(in0 + out0, 256 << 10) << "rank " << rank << ": eth0 carried data";
  }));
}

// ---- A peer SIGKILLed before, during and after a large transfer -------------------------------

// The victim sends 4 MiB (world 2: send to the survivor; world 4: broadcast) over slow links.
// The survivors get a TransportError naming the call, their TensorDicts are unchanged (during:
// part of the bytes had arrived), and they build a new group without the victim.
void MultiHostTest::PeerKilled(When when, int victim) const {
  SlowLinks();
  std::vector<std::string> status = RunRanks(
      OnHosts().final_barrier(false), [&](int rank, const ProcessGroupPtr& pg) {
        const int n = pg->getSize();
        const int64_t floats = 4 * kMiB / 4;
        const std::string peer = std::to_string(victim);
        const std::string who =
            n == 2 ? "td::distributed::recv (source rank " + peer + ")"
                   : "td::distributed::broadcast (source rank " + peer + "; rank " +
                         std::to_string(rank) + " of " + std::to_string(n) + ")";
        auto transfer = [&](TensorDict& t) {
          if (n == 2) {
            if (rank == victim) {
              send(pg, t, 1 - victim);
            } else {
              recv(pg, t, victim);
            }
          } else {
            broadcast(pg, t, victim, CollectiveOptions().check_structure(false));
          }
        };
        HeardFromAll(pg, victim, 4);
        if (rank == victim) {
          if (when == When::kBefore) ::raise(SIGKILL);
          TensorDict t = Data(5, floats);
          std::thread killer;
          if (when == When::kDuring) {
            killer = Watch([] { return VirtualNetwork::TxBytes("eth0"); }, kMiB,
                         [] { ::raise(SIGKILL); });
          }
          transfer(t);
          if (killer.joinable()) killer.join();  // kDuring never gets here
          // kAfter: die once every survivor has said it holds the data (dying right after the
          // send could reset connections whose last bytes are still in flight).
          HeardFromAll(pg, victim, 3);
          ::raise(SIGKILL);
        }
        TensorDict t = Data(0, floats);
        const int64_t rx = VirtualNetwork::RxBytes("eth0");
        if (when == When::kAfter) {
          transfer(t);
          EXPECT_TRUE(AllEqual(t, 5));
          HeardFromAll(pg, victim, 3);
          TensorDict next = Data(0);
          if (n == 2) {
            ExpectTransportError([&] { recv(pg, next, victim); }, who);
          } else {
            ExpectTransportError([&] { all_reduce(pg, next); },
                                 "td::distributed::all_reduce (rank " + std::to_string(rank) +
                                     " of " + std::to_string(n) + ")");
          }
          EXPECT_TRUE(AllEqual(next, 0));
          EXPECT_TRUE(AllEqual(t, 5));
        } else {
          ExpectTransportError([&] { transfer(t); }, who);
          EXPECT_TRUE(AllEqual(t, 0));
          if (when == When::kDuring && n == 2) {
            const int64_t got = VirtualNetwork::RxBytes("eth0") - rx;
            EXPECT_GE(got, kMiB / 2) << "the victim died before sending";
            EXPECT_LT(got, 4 * kMiB) << "the victim died after sending";
          }
        }
        CarryOn(Regroup(rank, AllBut(n, victim)));
      });
  for (int r = 0; r < static_cast<int>(status.size()); ++r) {
    EXPECT_EQ(status[r], r == victim ? "killed by signal 9" : "ok") << "rank " << r;
  }
}

TEST_P(MultiHostTest, PeerKilledBeforeALargeTransfer) { PeerKilled(When::kBefore, GetParam() - 1); }

// The victim is rank 0, which also serves the TCPStore: the survivors' new store is elsewhere.
TEST_P(MultiHostTest, PeerKilledDuringALargeTransfer) { PeerKilled(When::kDuring, 0); }

TEST_P(MultiHostTest, PeerKilledAfterALargeTransfer) { PeerKilled(When::kAfter, GetParam() - 1); }

// ---- A link cut mid-transfer -------------------------------------------------------------------

// Host `cut` sends 4 MiB (world 2: to rank 0; world 4: broadcast) over slow links; once 1 MiB has
// left it, its link is cut: no FIN, no RST, the bytes just stop. The receivers' waits fire their
// timeout: a TransportError naming the call, TensorDicts unchanged. World 2: rank 0 then
// reconnects the link and both ranks build a new group; world 4: the three others build one
// without the cut host.
void MultiHostTest::LinkCut(int cut) const {
  SlowLinks();
  const VirtualNetwork* net = net_.get();
  ExpectAllPassed(RunRanks(
      OnHosts().final_barrier(false), [net, cut, this](int rank, const ProcessGroupPtr& pg) {
        const int n = pg->getSize();
        const int64_t floats = 4 * kMiB / 4;
        HeardFromAll(pg, cut, 4);
        auto transfer = [&](TensorDict& t) {
          if (n == 2) {
            if (rank == cut) {
              send(pg, t, 1 - cut);
            } else {
              recv(pg, t, cut);
            }
          } else {
            broadcast(pg, t, cut, CollectiveOptions().check_structure(false));
          }
        };
        if (rank == cut) {
          TensorDict t = Data(5, floats);
          std::thread cutter = Watch([] { return VirtualNetwork::TxBytes("eth0"); }, kMiB,
                                     [net, cut] { net->Cut(cut); });
          // The sender may see its timeout fire or not: what was written before the cut may sit
          // in its socket buffers, which is all a send waits for.
          try {
            transfer(t);
          } catch (const TransportError&) {
          }
          cutter.join();
          EXPECT_TRUE(AllEqual(t, 5));
          if (n == 2) CarryOn(Regroup(rank, {0, 1}));
          return;
        }
        TensorDict t = Data(0, floats);
        const std::string who =
            n == 2 ? "td::distributed::recv (source rank " + std::to_string(cut) + ")"
                   : "td::distributed::broadcast (source rank " + std::to_string(cut) + "; rank " +
                         std::to_string(rank) + " of " + std::to_string(n) + ")";
        ExpectTransportError([&] { transfer(t); }, who);
        EXPECT_TRUE(AllEqual(t, 0));
        if (n == 2) {
          net->Restore(cut);
          CarryOn(Regroup(rank, {0, 1}));
        } else {
          CarryOn(Regroup(rank, AllBut(n, cut)));
        }
      }));
}

TEST_P(MultiHostTest, LinkCutMidTransfer) { LinkCut(GetParam() - 1); }

std::string WorldName(const ::testing::TestParamInfo<int>& info) {
  return "world" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(Worlds, MultiHostTest, ::testing::Values(2, 4), WorldName);
INSTANTIATE_TEST_SUITE_P(Worlds, MultiNicTest, ::testing::Values(2, 4), WorldName);

}  // namespace
}  // namespace distributed
}  // namespace td
