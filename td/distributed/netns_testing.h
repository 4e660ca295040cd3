// Test helper: a virtual network of "hosts" on this machine, one Linux network namespace each,
// joined by veth pairs to one bridge per NIC in a "switch" namespace (root and iproute2 needed).
// Rank r of a multi-host test runs in host r's namespace (Enter, after fork), binds Gloo to its
// own address and finds the TCPStore at another host's address, so every byte between ranks
// crosses a veth link that the test can slow down (tc tbf), delay and make lossy (a relay
// process: this kernel has no netem) or cut (link down).
//
//   std::string why;
//   auto net = test::VirtualNetwork::Create(test::NetworkOptions().hosts(4), &why);
//   if (!net) GTEST_SKIP() << why;           // not root, no iproute2, no namespaces
//   net->LimitRate(2, 0, 16'000'000);         // host 2's link: 16 Mbit/s both ways
//   ... fork; in the child: net->Enter(rank); ... net->Address(0) ...
//
// Names are unique per run ("tdmh<pid>-<n>-h<i>", "...-sw"); every address is in one private /24
// chosen per run, 10.213.<k>.0/24 (NIC 0: .1 + host on a /25, NIC 1: .129 + host on the other
// /25), and exists only inside the namespaces: nothing is added to the machine's own network
// namespace. The namespaces are deleted by the destructor, at exit, and on SIGTERM / SIGINT /
// SIGHUP (Bazel's timeout); a later Create also deletes those left by runs whose process is gone.
#pragma once

#include <torch/arg.h>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace td {
namespace distributed {
namespace test {

struct NetworkOptions {
  // Host namespaces, 1..32.
  TORCH_ARG(int, hosts) = 2;
  // Interfaces per host, eth0 (and eth1), each on its own bridge: 1 or 2.
  TORCH_ARG(int, nics) = 1;
};

class VirtualNetwork {
 public:
  // The network, or nullptr with `*why_not` saying why namespaces cannot be made here (e.g.
  // "ip netns add failed (exit code 1): mount --make-shared /run/netns failed: Operation not
  // permitted"). Throws c10::Error when a later step fails (with the command and its output).
  static std::unique_ptr<VirtualNetwork> Create(const NetworkOptions& options,
                                                std::string* why_not);
  ~VirtualNetwork();
  VirtualNetwork(const VirtualNetwork&) = delete;
  VirtualNetwork& operator=(const VirtualNetwork&) = delete;

  int hosts() const { return options_.hosts(); }
  // Host `host`'s address on NIC `nic` ("10.213.57.2"), and that NIC's name inside it ("eth0").
  std::string Address(int host, int nic = 0) const;
  static std::string Interface(int nic) { return "eth" + std::to_string(nic); }
  std::string Namespace(int host) const;
  // The namespaces still present, by name (every host's and the switch's).
  std::vector<std::string> Namespaces() const;

  // Moves the calling process into host `host`'s network namespace (setns). Call it in a child
  // right after fork, before any thread is started; threads started later are in it too.
  void Enter(int host) const;
  // Shapes host `host`'s link on NIC `nic` to `bits_per_second` in both directions (tbf on both
  // ends of its veth).
  void LimitRate(int host, int nic, int64_t bits_per_second) const;
  // Cuts host `host`'s link on NIC `nic` (its switch port down: no packet passes, no FIN or RST
  // is sent; TCP connections across it just stop) / reconnects it. Callable from any process,
  // e.g. a thread of a rank.
  void Cut(int host, int nic = 0) const;
  void Restore(int host, int nic = 0) const;
  // Puts a relay process between host `host`'s NIC-0 link and its bridge (this kernel has no
  // netem): every frame, both ways, is held `delay` and then forwarded, or dropped with
  // probability `loss` (a fixed pseudo-random sequence). Frames travel whole, offloads included
  // (PACKET_VNET_HDR), so TCP sees a link with latency and loss, nothing else. Call it before
  // forking the ranks (it forks the relay); the destructor stops it.
  void Relay(int host, std::chrono::milliseconds delay, double loss);
  // Frames the relays have forwarded / dropped so far (any process may read them).
  int64_t RelayedFrames() const { return counters_->forwarded.load(); }
  int64_t DroppedFrames() const { return counters_->dropped.load(); }

  // Bytes received / sent so far by interface `ifname` of the calling thread's network namespace
  // (/proc/thread-self/net/dev); throws c10::Error when there is no such interface.
  static int64_t RxBytes(const std::string& ifname);
  static int64_t TxBytes(const std::string& ifname);

 private:
  VirtualNetwork(const NetworkOptions& options, std::string prefix, int subnet);
  void Build();
  std::string Port(int host, int nic) const;

  struct Counters {
    std::atomic<int64_t> forwarded{0};
    std::atomic<int64_t> dropped{0};
  };

  NetworkOptions options_;
  std::string prefix_;
  int subnet_;
  std::vector<std::string> made_;  // namespaces created, in order
  std::vector<pid_t> relays_;
  Counters* counters_;  // shared with the relay processes (MAP_SHARED)
};

}  // namespace test
}  // namespace distributed
}  // namespace td
