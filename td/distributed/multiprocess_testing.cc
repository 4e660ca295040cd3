#include "td/distributed/multiprocess_testing.h"

#include <ATen/ATen.h>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <thread>

#include "td/core/errors.h"

namespace td {
namespace distributed {
namespace test {
namespace {

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) TD_FAIL(c10::Error, "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    TD_FAIL(c10::Error, "could not find a free port");
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

[[noreturn]] void ChildMain(int rank, const RunOptions& o, const std::string& store, int port,
                            const std::function<void(int, const ProcessGroupPtr&)>& fn) {
  int code = 0;
  try {
    if (o.in_child()) o.in_child()(rank);
    GroupOptions g;
    g.rank(rank).world_size(o.world_size()).timeout(o.group_timeout());
    if (o.tcp()) {
      g.master_addr("127.0.0.1").master_port(port);
    } else {
      g.file_store_path(store);
    }
    if (o.group_options()) o.group_options()(rank, g);
    ProcessGroupPtr pg = init_process_group(g);
    fn(rank, pg);
    if (::testing::Test::HasFailure()) code = 2;
    if (o.final_barrier()) pg->barrier()->wait(o.group_timeout());
  } catch (const std::exception& e) {
    std::cerr << "[rank " << rank << "] uncaught exception: " << e.what() << std::endl;
    code = code ? code : 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

}  // namespace

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/td_distributed_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) TD_FAIL(c10::Error, "mkdtemp failed for ", tmpl);
  return tmpl;
}

std::vector<std::string> RunRanks(const RunOptions& o,
                                  const std::function<void(int, const ProcessGroupPtr&)>& fn) {
  std::string store = MakeTempDir() + "/store";
  int port = o.tcp() ? FreePort() : 0;
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  const pid_t parent = ::getpid();
  for (int r = 0; r < o.world_size(); ++r) {
    pid_t pid = ::fork();
    if (pid < 0) TD_FAIL(c10::Error, "fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(3);  // the parent is already gone
      ChildMain(r, o, store, port, fn);
    }
    pids.push_back(pid);
  }
  std::vector<std::string> status(pids.size());
  auto deadline = std::chrono::steady_clock::now() + o.deadline();
  size_t left = pids.size();
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (!status[r].empty()) continue;
      int ws = 0;
      pid_t got = ::waitpid(pids[r], &ws, WNOHANG);
      if (got == pids[r]) {
        --left;
        if (WIFEXITED(ws)) {
          status[r] = WEXITSTATUS(ws) == 0 ? "ok" : "exit code " + std::to_string(WEXITSTATUS(ws));
        } else {
          status[r] = "killed by signal " + std::to_string(WTERMSIG(ws));
        }
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (!status[r].empty()) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        status[r] = "killed at the deadline";
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

void ExpectAllPassed(const std::vector<std::string>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_EQ(status[r], "ok") << "rank " << r;
  }
}

bool AllEqual(const TensorDict& td, double value) {
  for (const auto& [key, v] : td.items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!at::equal(v.tensor(), at::full_like(v.tensor(), value))) return false;
  }
  return true;
}

}  // namespace test
}  // namespace distributed
}  // namespace td
