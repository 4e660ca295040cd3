#include "td/distributed/netns_testing.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>
#include <utility>

#include "td/core/errors.h"

extern char** environ;

namespace td {
namespace distributed {
namespace test {
namespace {

// ---- Cleanup that also works from a signal handler ---------------------------------------------
// The names of the namespaces this process made, in fixed storage, so that the handler of
// SIGTERM (what Bazel sends at a test's timeout) can delete them with only fork / execve /
// waitpid. Slots are written by the thread that creates networks, before the namespace exists.
constexpr int kMaxNamespaces = 128;
constexpr int kMaxName = 96;
char g_names[kMaxNamespaces][kMaxName];
std::atomic<bool> g_used[kMaxNamespaces];
char g_ip[64];
pid_t g_owner = 0;  // only the process that made the namespaces deletes them (not forked ranks)

void DeleteNamespaceFromHandler(const char* name) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    char* const argv[] = {const_cast<char*>("ip"), const_cast<char*>("netns"),
                          const_cast<char*>("del"), const_cast<char*>(name), nullptr};
    ::execve(g_ip, argv, environ);
    ::_exit(127);
  }
  if (pid > 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void DeleteAllRegistered() {
  if (g_owner != ::getpid()) return;
  for (int i = 0; i < kMaxNamespaces; ++i) {
    if (g_used[i].exchange(false)) DeleteNamespaceFromHandler(g_names[i]);
  }
}

void OnFatalSignal(int sig) {
  DeleteAllRegistered();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void AtExit() { DeleteAllRegistered(); }

void InstallCleanupOnce() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  g_owner = ::getpid();
  std::atexit(AtExit);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = OnFatalSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

int Register(const std::string& name) {
  for (int i = 0; i < kMaxNamespaces; ++i) {
    if (!g_used[i].load()) {
      std::snprintf(g_names[i], kMaxName, "%s", name.c_str());
      g_used[i].store(true);
      return i;
    }
  }
  TD_FAIL(c10::Error, "VirtualNetwork: more than ", kMaxNamespaces, " namespaces at once");
}

void Unregister(const std::string& name) {
  for (int i = 0; i < kMaxNamespaces; ++i) {
    if (g_used[i].load() && name == g_names[i]) g_used[i].store(false);
  }
}

// ---- Running iproute2 ---------------------------------------------------------------------------

std::string FindTool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = std::string(dir) + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

struct Result {
  int code = -1;  // exit code, or -1 when it did not exit normally
  std::string output;
};

// Runs `tool args...` (no shell), stdout and stderr captured.
Result Run(const std::string& tool, const std::vector<std::string>& args) {
  std::vector<std::string> all = {tool};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) TD_FAIL(c10::Error, "VirtualNetwork: pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, tool.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  Result r;
  if (rc != 0) {
    ::close(fds[0]);
    r.output = std::string("cannot run ") + tool + ": " + std::strerror(rc);
    return r;
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      r.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' ')) {
    r.output.pop_back();
  }
  return r;
}

std::string Describe(const std::vector<std::string>& args) {
  std::string s;
  for (const std::string& a : args) s += " " + a;
  return s;
}

void Must(const std::string& tool, const std::vector<std::string>& args) {
  Result r = Run(tool, args);
  if (r.code != 0) {
    TD_FAIL(c10::Error, "VirtualNetwork:", Describe(args), " failed (exit code ", r.code, "): ",
            r.output);
  }
}

const std::string& Ip() {
  static const std::string path = FindTool("ip");
  return path;
}

const std::string& Tc() {
  static const std::string path = FindTool("tc");
  return path;
}

// Deletes namespaces "tdmh<pid>-..." whose process no longer exists (a run killed with SIGKILL).
void DeleteStale() {
  DIR* dir = ::opendir("/run/netns");
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.rfind("tdmh", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + 4, nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : stale) Run(Ip(), {"netns", "del", name});
}

int64_t DevCounter(const std::string& ifname, int field) {
  std::ifstream in("/proc/thread-self/net/dev");
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != ifname) continue;
    std::istringstream fields(line.substr(colon + 1));
    int64_t v = 0;
    for (int i = 0; i <= field; ++i) fields >> v;
    return v;
  }
  TD_FAIL(c10::Error, "VirtualNetwork: no interface '", ifname,
          "' in this thread's network namespace");
}

std::atomic<int> g_serial{0};

// ---- The relay ----------------------------------------------------------------------------------
// Two AF_PACKET sockets, one on each of two interfaces of the switch namespace; what arrives on
// one leaves on the other `delay` later, unless dropped. PACKET_VNET_HDR on both: a frame is read
// and written with its virtio-net header, so offloaded frames (GSO super-frames, checksums left
// to the hardware, which a veth never computes) pass through as they came.

int PacketSocket(const std::string& ifname) {
  int fd = ::socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) return -1;
  int one = 1;
  if (::setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (addr.sll_ifindex == 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  packet_mreq promisc{};
  promisc.mr_ifindex = addr.sll_ifindex;
  promisc.mr_type = PACKET_MR_PROMISC;
  ::setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &promisc, sizeof(promisc));
  int buf = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  return fd;
}

struct Frame {
  std::chrono::steady_clock::time_point due;
  std::string bytes;
};

template <class Counters>
[[noreturn]] void RelayMain(const std::string& switch_ns, const std::string& a,
                            const std::string& b, std::chrono::milliseconds delay, double loss,
                            Counters* counters) {
  int ns = ::open(switch_ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(10);
  const int fds[2] = {PacketSocket(a), PacketSocket(b)};
  if (fds[0] < 0 || fds[1] < 0) ::_exit(11);
  std::deque<Frame> queue[2];  // queue[i]: read on fds[i], to be written on fds[1 - i]
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  const uint64_t drop_below = static_cast<uint64_t>(loss * 18446744073709551615.0);
  std::string buf(256 << 10, '\0');
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    for (int i = 0; i < 2; ++i) {
      while (!queue[i].empty() && queue[i].front().due <= now) {
        const std::string& f = queue[i].front().bytes;
        if (::send(fds[1 - i], f.data(), f.size(), 0) >= 0) counters->forwarded++;
        queue[i].pop_front();
      }
    }
    int wait_ms = 1000;
    for (const auto& q : queue) {
      if (q.empty()) continue;
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(q.front().due - now).count();
      wait_ms = std::min<int>(wait_ms, static_cast<int>(std::max<int64_t>(ms, 0)));
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(p, 2, wait_ms) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & POLLIN)) continue;
      for (;;) {
        sockaddr_ll from{};
        socklen_t len = sizeof(from);
        ssize_t n = ::recvfrom(fds[i], buf.data(), buf.size(), MSG_DONTWAIT,
                               reinterpret_cast<sockaddr*>(&from), &len);
        if (n <= 0) break;
        if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own writes
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        if (rng < drop_below) {
          counters->dropped++;
          continue;
        }
        queue[i].push_back({std::chrono::steady_clock::now() + delay,
                            std::string(buf.data(), static_cast<size_t>(n))});
      }
    }
  }
}

}  // namespace

std::unique_ptr<VirtualNetwork> VirtualNetwork::Create(const NetworkOptions& options,
                                                       std::string* why_not) {
  if (options.hosts() < 1 || options.hosts() > 32 || options.nics() < 1 || options.nics() > 2) {
    TD_FAIL(c10::Error, "VirtualNetwork: 1..32 hosts and 1..2 NICs, got ", options.hosts(), " and ",
            options.nics());
  }
  if (::geteuid() != 0) {
    *why_not = "network namespaces need root (euid " + std::to_string(::geteuid()) + ")";
    return nullptr;
  }
  if (Ip().empty()) {
    *why_not = "iproute2's `ip` was not found in /usr/sbin, /sbin, /usr/bin or /bin";
    return nullptr;
  }
  if (Tc().empty()) {
    *why_not = "iproute2's `tc` was not found in /usr/sbin, /sbin, /usr/bin or /bin";
    return nullptr;
  }
  std::snprintf(g_ip, sizeof(g_ip), "%s", Ip().c_str());
  InstallCleanupOnce();
  DeleteStale();
  const int serial = g_serial++;
  const int pid = static_cast<int>(::getpid());
  std::string prefix = "tdmh" + std::to_string(pid) + "-" + std::to_string(serial) + "-";
  int subnet = (pid * 7 + serial) % 250 + 1;
  std::unique_ptr<VirtualNetwork> net(new VirtualNetwork(options, prefix, subnet));
  // The first namespace tells whether namespaces can be made here at all.
  const std::string sw = prefix + "sw";
  Register(sw);
  Result r = Run(Ip(), {"netns", "add", sw});
  if (r.code != 0) {
    Unregister(sw);
    *why_not = "cannot create network namespaces here: `ip netns add " + sw +
               "` failed (exit code " + std::to_string(r.code) + "): " + r.output;
    return nullptr;
  }
  net->made_.push_back(sw);
  net->Build();
  return net;
}

VirtualNetwork::VirtualNetwork(const NetworkOptions& options, std::string prefix, int subnet)
    : options_(options), prefix_(std::move(prefix)), subnet_(subnet) {
  void* shared = ::mmap(nullptr, sizeof(Counters), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) TD_FAIL(c10::Error, "VirtualNetwork: mmap failed");
  counters_ = new (shared) Counters();
}

std::string VirtualNetwork::Namespace(int host) const {
  return prefix_ + "h" + std::to_string(host);
}

std::string VirtualNetwork::Port(int host, int nic) const {
  return "p" + std::to_string(nic) + "h" + std::to_string(host);
}

std::string VirtualNetwork::Address(int host, int nic) const {
  TORCH_CHECK(host >= 0 && host < options_.hosts() && nic >= 0 && nic < options_.nics(),
              "VirtualNetwork: no host ", host, " NIC ", nic);
  return "10.213." + std::to_string(subnet_) + "." + std::to_string(1 + 128 * nic + host);
}

std::vector<std::string> VirtualNetwork::Namespaces() const { return made_; }

void VirtualNetwork::Build() {
  const std::string sw = prefix_ + "sw";
  for (int h = 0; h < options_.hosts(); ++h) {
    Register(Namespace(h));
    Must(Ip(), {"netns", "add", Namespace(h)});
    made_.push_back(Namespace(h));
    Must(Ip(), {"-n", Namespace(h), "link", "set", "lo", "up"});
  }
  for (int nic = 0; nic < options_.nics(); ++nic) {
    const std::string br = "br" + std::to_string(nic);
    Must(Ip(), {"-n", sw, "link", "add", br, "type", "bridge"});
    Must(Ip(), {"-n", sw, "link", "set", br, "up"});
    for (int h = 0; h < options_.hosts(); ++h) {
      const std::string port = Port(h, nic), eth = Interface(nic);
      Must(Ip(), {"-n", sw, "link", "add", port, "type", "veth", "peer", "name", eth, "netns",
                  Namespace(h)});
      Must(Ip(), {"-n", sw, "link", "set", port, "master", br});
      Must(Ip(), {"-n", sw, "link", "set", port, "up"});
      Must(Ip(), {"-n", Namespace(h), "addr", "add", Address(h, nic) + "/25", "dev", eth});
      Must(Ip(), {"-n", Namespace(h), "link", "set", eth, "up"});
    }
  }
}

VirtualNetwork::~VirtualNetwork() {
  for (pid_t pid : relays_) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  counters_->~Counters();
  ::munmap(counters_, sizeof(Counters));
  // The switch first: deleting it destroys every veth pair and bridge at once.
  for (const std::string& name : made_) {
    Run(Ip(), {"netns", "del", name});
    Unregister(name);
  }
}

void VirtualNetwork::Enter(int host) const {
  const std::string path = "/run/netns/" + Namespace(host);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TD_FAIL(c10::Error, "VirtualNetwork: cannot open ", path, ": ", std::strerror(errno));
  int rc = ::setns(fd, CLONE_NEWNET);
  int err = errno;
  ::close(fd);
  if (rc != 0) {
    TD_FAIL(c10::Error, "VirtualNetwork: setns(", path, ") failed: ", std::strerror(err));
  }
}

void VirtualNetwork::LimitRate(int host, int nic, int64_t bits_per_second) const {
  const std::string rate = std::to_string(bits_per_second) + "bit";
  const std::vector<std::string> shape = {"root", "tbf", "rate", rate, "burst", "32kb",
                                          "latency", "500ms"};
  std::vector<std::string> at_switch = {"-n", prefix_ + "sw", "qdisc", "replace", "dev",
                                        Port(host, nic)};
  std::vector<std::string> at_host = {"-n", Namespace(host), "qdisc", "replace", "dev",
                                      Interface(nic)};
  at_switch.insert(at_switch.end(), shape.begin(), shape.end());
  at_host.insert(at_host.end(), shape.begin(), shape.end());
  Must(Tc(), at_switch);
  Must(Tc(), at_host);
}

void VirtualNetwork::Cut(int host, int nic) const {
  Must(Ip(), {"-n", prefix_ + "sw", "link", "set", Port(host, nic), "down"});
}

void VirtualNetwork::Restore(int host, int nic) const {
  Must(Ip(), {"-n", prefix_ + "sw", "link", "set", Port(host, nic), "up"});
}

void VirtualNetwork::Relay(int host, std::chrono::milliseconds delay, double loss) {
  TORCH_CHECK(host >= 0 && host < options_.hosts(), "VirtualNetwork: no host ", host);
  TORCH_CHECK(loss >= 0 && loss < 1, "VirtualNetwork: loss ", loss, " is outside [0, 1)");
  const std::string sw = prefix_ + "sw", port = Port(host, 0);
  const std::string q = "q" + std::to_string(host), qb = "qb" + std::to_string(host);
  // host --veth-- port ==relay== q --veth-- qb on br0
  Must(Ip(), {"-n", sw, "link", "set", port, "nomaster"});
  Must(Ip(), {"-n", sw, "link", "add", q, "type", "veth", "peer", "name", qb});
  Must(Ip(), {"-n", sw, "link", "set", qb, "master", "br0"});
  Must(Ip(), {"-n", sw, "link", "set", qb, "up"});
  Must(Ip(), {"-n", sw, "link", "set", q, "up"});
  const std::string ns_path = "/run/netns/" + sw;
  const pid_t parent = ::getpid();
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) TD_FAIL(c10::Error, "VirtualNetwork: fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(12);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::signal(sig, SIG_DFL);
    RelayMain(ns_path, port, q, delay, loss, counters_);
  }
  relays_.push_back(pid);
  // The relay is up once it forwards; ARP and IPv6 chatter cross it within a second or so, but
  // nothing needs to: a frame sent before it listens is simply lost, as on a lossy link.
  int ws = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (::waitpid(pid, &ws, WNOHANG) == pid) {
    relays_.pop_back();
    TD_FAIL(c10::Error, "VirtualNetwork: the relay of host ", host, " exited with ",
            WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, " (10: setns, 11: packet sockets)");
  }
}

int64_t VirtualNetwork::RxBytes(const std::string& ifname) { return DevCounter(ifname, 0); }
int64_t VirtualNetwork::TxBytes(const std::string& ifname) { return DevCounter(ifname, 8); }

}  // namespace test
}  // namespace distributed
}  // namespace td
