#include "td/distributed/spawn.h"

#include <arpa/inet.h>
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
#include <filesystem>
#include <iostream>
#include <system_error>
#include <thread>

#include "td/core/errors.h"

namespace td {
namespace distributed {
namespace {

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) TD_FAIL(c10::Error, "td::distributed::spawn: socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    TD_FAIL(c10::Error, "td::distributed::spawn: no free port on 127.0.0.1");
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

// A fresh directory for the FileStore, removed with this object.
class StoreDir {
 public:
  StoreDir() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (base / "td_spawn_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      TD_FAIL(c10::Error, "td::distributed::spawn: mkdtemp failed for ", tmpl);
    }
    path_ = tmpl;
  }
  ~StoreDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  std::string store() const { return path_ + "/store"; }

 private:
  std::string path_;
};

[[noreturn]] void ChildMain(int rank, const SpawnOptions& o, const std::string& store, int port,
                            const std::function<int(int, const ProcessGroupPtr&)>& fn) {
  int code = 1;
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
    code = fn(rank, pg);
    if (o.final_barrier()) pg->barrier()->wait(o.group_timeout());
  } catch (const std::exception& e) {
    std::cerr << "[rank " << rank << "] uncaught exception: " << e.what() << std::endl;
    code = 1;
  } catch (...) {
    std::cerr << "[rank " << rank << "] uncaught exception of unknown type" << std::endl;
    code = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

RankExit FromWaitStatus(int ws) {
  RankExit e;
  if (WIFEXITED(ws)) {
    e.code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    e.signal = WTERMSIG(ws);
  }
  return e;
}

}  // namespace

std::string RankExit::to_string() const {
  if (!started) return "not started: the deadline passed while the ranks were being forked";
  if (deadline) return "killed at the deadline";
  if (ok()) return "ok";
  if (code >= 0) return "exit code " + std::to_string(code);
  return "killed by signal " + std::to_string(signal);
}

bool all_ok(const std::vector<RankExit>& exits) {
  for (const RankExit& e : exits) {
    if (!e.ok()) return false;
  }
  return true;
}

std::vector<RankExit> spawn(const SpawnOptions& o,
                            const std::function<int(int, const ProcessGroupPtr&)>& fn) {
  if (!fn) TD_FAIL(ValueError, "td::distributed::spawn: the rank function is empty");
  if (o.world_size() < 1) {
    TD_FAIL(ValueError, "td::distributed::spawn: world_size must be >= 1, got ", o.world_size());
  }
  if (o.group_timeout().count() <= 0) {
    TD_FAIL(ValueError, "td::distributed::spawn: group_timeout must be positive, got ",
            o.group_timeout().count(), " ms");
  }
  if (o.deadline() && o.deadline()->count() <= 0) {
    TD_FAIL(ValueError, "td::distributed::spawn: deadline must be positive, got ",
            o.deadline()->count(), " ms");
  }
  // The deadline covers the whole run: it is counted from here, forking included.
  const auto now = [&o] { return o.clock() ? o.clock()() : std::chrono::steady_clock::now(); };
  const auto start = now();
  const auto past_deadline = [&] { return o.deadline() && now() - start > *o.deadline(); };
  std::optional<StoreDir> dir;
  if (!o.tcp()) dir.emplace();
  const std::string store = dir ? dir->store() : "";
  const int port = o.tcp() ? FreePort() : 0;
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  const pid_t parent = ::getpid();
  for (int r = 0; r < o.world_size(); ++r) {
    if (past_deadline()) break;  // the ranks forked so far are killed below
    pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
      TD_FAIL(c10::Error, "td::distributed::spawn: fork failed for rank ", r, " of ",
              o.world_size());
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(3);  // the caller is already gone
      ChildMain(r, o, store, port, fn);
    }
    pids.push_back(pid);
  }
  std::vector<RankExit> exits(static_cast<size_t>(o.world_size()));
  for (size_t r = pids.size(); r < exits.size(); ++r) {
    exits[r].started = false;
    exits[r].deadline = true;
  }
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int ws = 0;
      if (done[r] || ::waitpid(pids[r], &ws, WNOHANG) != pids[r]) continue;
      exits[r] = FromWaitStatus(ws);
      done[r] = true;
      --left;
    }
    if (left == 0) break;
    if (past_deadline()) {
      for (size_t r = 0; r < pids.size(); ++r) {
        if (done[r]) continue;
        ::kill(pids[r], SIGKILL);
        ::waitpid(pids[r], nullptr, 0);
        exits[r].signal = SIGKILL;
        exits[r].deadline = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exits;
}

}  // namespace distributed
}  // namespace td
