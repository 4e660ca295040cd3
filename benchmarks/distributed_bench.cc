// td::distributed between two processes (Gloo over 127.0.0.1, FileStore rendezvous) vs the same
// tensors moved one by one with c10d by hand (every send posted, then every wait), same run:
//  * SendRecv100x64: a TensorDict of 100 leaves of [64] floats;
//  * SendRecv10x64x8: 10 leaves of [64, 8] floats;
//  * SendRecvLarge: 10 leaves of [4096, 256] floats (40 MiB; bytes/s = both directions);
//  * AllReduce100x64 / AllReduceLarge: all_reduce of the same TensorDicts;
//  * ...PerLeaf: send with WireFormat::kPerLeaf (one message per leaf, no packing copy).
// Our point-to-point cases first agree on the structure with init_remote / from_remote_init, once
// per case and direction (NOTE [ Agreed structures ] in td/distributed/p2p.cc), as a program that
// sends the same TensorDict again and again does; SendRecv10x64x8/ours_without_init_remote skips
// that step (header and data then travel as two messages).
// Each iteration is a round trip: rank 0 sends and receives back (all_reduce: one all_reduce on
// both ranks). The benchmark process is rank 0; it forks rank 1, which serves the commands
// "run case C for N iterations" sent by rank 0 before each batch of iterations.
// TD_BENCH_NETNS=1 puts the two ranks on two hosts of a virtual network (a network namespace
// each, joined by veth links through a bridge: td/distributed/netns_testing.h; needs root and
// iproute2), so every byte crosses a link as between machines instead of loopback.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "td/distributed/distributed.h"
#include "td/distributed/netns_testing.h"

namespace {

namespace dist = td::distributed;

using WorkPtr = decltype(std::declval<dist::ProcessGroup&>().send(
    std::declval<std::vector<at::Tensor>&>(), 0, 0));

enum Case : int64_t {
  kSmallOurs, kSmallHand, kMidOurs, kMidHand, kLargeOurs, kLargeHand,
  kReduceSmallOurs, kReduceSmallHand, kReduceLargeOurs, kReduceLargeHand,
  kMidPerLeaf, kLargePerLeaf, kMidOneMessage, kLargeOneMessage, kMidNoInit, kNumCases
};
constexpr int kCommandTag = 1000;

td::TensorDict MakeTd(int64_t leaves, std::vector<int64_t> shape) {
  td::TensorDict t({}, {shape[0]});
  for (int64_t i = 0; i < leaves; ++i) t.set("leaf" + std::to_string(i), at::randn(shape));
  return t;
}

struct Data {
  td::TensorDict small = MakeTd(100, {64});
  td::TensorDict mid = MakeTd(10, {64, 8});
  td::TensorDict large = MakeTd(10, {4096, 256});
  // The same bytes as `mid` / `large` in one tensor: what one c10d message of that size costs.
  td::TensorDict mid_flat = MakeTd(1, {10 * 64 * 8});
  td::TensorDict large_flat = MakeTd(1, {10 * 4096 * 256});
  bool agreed[kNumCases] = {};
};

std::vector<at::Tensor> Leaves(const td::TensorDict& t) {
  std::vector<at::Tensor> out;
  for (const auto& v : t.values()) out.push_back(v.tensor());
  return out;
}

void HandSend(const dist::ProcessGroupPtr& pg, const td::TensorDict& t, int peer) {
  std::vector<std::vector<at::Tensor>> bufs;
  for (const at::Tensor& x : Leaves(t)) bufs.push_back({x});
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < bufs.size(); ++i) works.push_back(pg->send(bufs[i], peer, 0));
  for (auto& w : works) w->wait();
}

void HandRecv(const dist::ProcessGroupPtr& pg, td::TensorDict& t, int peer) {
  std::vector<std::vector<at::Tensor>> bufs;
  for (const at::Tensor& x : Leaves(t)) bufs.push_back({x});
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < bufs.size(); ++i) works.push_back(pg->recv(bufs[i], peer, 0));
  for (auto& w : works) w->wait();
}

void HandAllReduce(const dist::ProcessGroupPtr& pg, td::TensorDict& t) {
  std::vector<std::vector<at::Tensor>> bufs;
  for (const at::Tensor& x : Leaves(t)) bufs.push_back({x});
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < bufs.size(); ++i) works.push_back(pg->allreduce(bufs[i]));
  for (auto& w : works) w->wait();
}

td::TensorDict& Pick(Data& d, int64_t c) {
  switch (c) {
    case kSmallOurs: case kSmallHand: case kReduceSmallOurs: case kReduceSmallHand:
      return d.small;
    case kMidOurs: case kMidHand: case kMidPerLeaf: case kMidNoInit:
      return d.mid;
    case kMidOneMessage:
      return d.mid_flat;
    case kLargeOneMessage:
      return d.large_flat;
    default:
      return d.large;
  }
}

// One iteration of case `c` on `rank`.
void Step(const dist::ProcessGroupPtr& pg, Data& d, int64_t c, int rank) {
  td::TensorDict& t = Pick(d, c);
  const int peer = 1 - rank;
  const bool per_leaf = c == kMidPerLeaf || c == kLargePerLeaf;
  const bool one_message = c == kMidOneMessage || c == kLargeOneMessage;
  const bool ours = (c % 2 == 0 || per_leaf || c == kMidNoInit) && !one_message;
  const auto options =
      dist::P2POptions()
          .tag(static_cast<int>(c) + 1)
          .wire_format(per_leaf ? dist::WireFormat::kPerLeaf : dist::WireFormat::kPacked);
  if (c >= kReduceSmallOurs && c <= kReduceLargeHand) {
    if (ours) {
      dist::all_reduce(pg, t, dist::ReduceOp::kSum, dist::CollectiveOptions().check_structure(false));
    } else {
      HandAllReduce(pg, t);
    }
    t.mul_(0.5);  // keep the values bounded
    return;
  }
  if (ours && c != kMidNoInit && !d.agreed[c]) {  // once per case, both directions
    if (rank == 0) {
      dist::init_remote(pg, t, peer, options);
      dist::from_remote_init(pg, peer, options);
    } else {
      dist::from_remote_init(pg, peer, options);
      dist::init_remote(pg, t, peer, options);
    }
    d.agreed[c] = true;
  }
  if (rank == 0) {
    if (ours) {
      dist::send(pg, t, peer, options);
      dist::recv(pg, t, peer, options);
    } else {
      HandSend(pg, t, peer);
      HandRecv(pg, t, peer);
    }
  } else {
    if (ours) {
      dist::recv(pg, t, peer, options);
      dist::send(pg, t, peer, options);
    } else {
      HandRecv(pg, t, peer);
      HandSend(pg, t, peer);
    }
  }
}

[[noreturn]] void Serve(const dist::ProcessGroupPtr& pg) {
  Data d;
  try {
    while (true) {
      std::vector<at::Tensor> cmd = {at::zeros({2}, at::kLong)};
      pg->recv(cmd, 0, kCommandTag)->wait();
      int64_t c = cmd[0].data_ptr<int64_t>()[0], n = cmd[0].data_ptr<int64_t>()[1];
      if (c < 0) break;
      for (int64_t i = 0; i < n; ++i) Step(pg, d, c, 1);
    }
  } catch (const std::exception&) {
  }
  std::_Exit(0);
}

dist::ProcessGroupPtr& Group() {
  static dist::ProcessGroupPtr* pg = [] {
    char tmpl[] = "/tmp/td_dist_bench_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    std::string store = std::string(tmpl) + "/store";
    auto options = dist::GroupOptions().world_size(2).file_store_path(store);
    static std::unique_ptr<dist::test::VirtualNetwork> net;  // kept for the process's life
    const char* netns = std::getenv("TD_BENCH_NETNS");
    if (netns != nullptr && std::string(netns) == "1") {
      std::string why;
      net = dist::test::VirtualNetwork::Create(dist::test::NetworkOptions().hosts(2), &why);
      if (!net) {
        std::fprintf(stderr, "TD_BENCH_NETNS=1: no virtual network here: %s\n", why.c_str());
        std::exit(1);
      }
    }
    pid_t pid = ::fork();  // before any LibTorch work in this process
    const int rank = pid == 0 ? 1 : 0;
    if (net) {
      net->Enter(rank);
      options.device_hostname(net->Address(rank));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      Serve(dist::init_process_group(options.rank(1)));
    }
    auto* p = new dist::ProcessGroupPtr(dist::init_process_group(options.rank(0)));
    std::atexit([] {
      std::vector<at::Tensor> stop = {at::full({2}, -1, at::kLong)};
      Group()->send(stop, 1, kCommandTag)->wait();
    });
    return p;
  }();
  return *pg;
}

Data& SharedData() {
  static Data* d = new Data;
  return *d;
}

void Run(benchmark::State& state, Case c) {
  dist::ProcessGroupPtr& pg = Group();
  Data& d = SharedData();
  std::vector<at::Tensor> cmd = {at::tensor({static_cast<int64_t>(c),
                                             static_cast<int64_t>(state.max_iterations)})};
  pg->send(cmd, 1, kCommandTag)->wait();
  for (auto _ : state) Step(pg, d, c, 0);
  if (c == kLargeOurs || c == kLargeHand || c == kReduceLargeOurs || c == kReduceLargeHand ||
      c == kLargePerLeaf || c == kLargeOneMessage) {
    state.SetBytesProcessed(state.iterations() * 2 * 10 * 4096 * 256 * 4);
  }
}

#define TD_DIST_BENCH(NAME, CASE, LABEL)                          \
  void BM_##NAME(benchmark::State& state) { Run(state, CASE); } \
  BENCHMARK(BM_##NAME)->Name(LABEL)->UseRealTime()

TD_DIST_BENCH(SmallOurs, kSmallOurs, "SendRecv100x64/ours");
TD_DIST_BENCH(SmallHand, kSmallHand, "SendRecv100x64/hand");
TD_DIST_BENCH(MidOurs, kMidOurs, "SendRecv10x64x8/ours");
TD_DIST_BENCH(MidHand, kMidHand, "SendRecv10x64x8/hand");
TD_DIST_BENCH(MidNoInit, kMidNoInit, "SendRecv10x64x8/ours_without_init_remote");
TD_DIST_BENCH(LargeOurs, kLargeOurs, "SendRecvLarge/ours");
TD_DIST_BENCH(LargeHand, kLargeHand, "SendRecvLarge/hand");
TD_DIST_BENCH(MidPerLeaf, kMidPerLeaf, "SendRecv10x64x8PerLeaf/ours");
TD_DIST_BENCH(MidPerLeafHand, kMidHand, "SendRecv10x64x8PerLeaf/hand");
TD_DIST_BENCH(LargePerLeaf, kLargePerLeaf, "SendRecvLargePerLeaf/ours");
TD_DIST_BENCH(LargePerLeafHand, kLargeHand, "SendRecvLargePerLeaf/hand");
TD_DIST_BENCH(MidOneMessage, kMidOneMessage, "SendRecv10x64x8/hand_one_message");
TD_DIST_BENCH(LargeOneMessage, kLargeOneMessage, "SendRecvLarge/hand_one_message");
TD_DIST_BENCH(ReduceSmallOurs, kReduceSmallOurs, "AllReduce100x64/ours");
TD_DIST_BENCH(ReduceSmallHand, kReduceSmallHand, "AllReduce100x64/hand");
TD_DIST_BENCH(ReduceLargeOurs, kReduceLargeOurs, "AllReduceLarge/ours");
TD_DIST_BENCH(ReduceLargeHand, kReduceLargeHand, "AllReduceLarge/hand");

}  // namespace
