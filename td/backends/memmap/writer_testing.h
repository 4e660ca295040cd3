// Helpers for the tests that kill memmap writers (memmap_crash_test, memmap_level_crash_test):
// a writer is caught inside a write by what it leaves on disk, not by how long it has run, so
// where a kill lands does not depend on the machine's load. Every wait has a timeout and says
// what it waited for.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace td {
namespace testing_util {

// True when a temporary of process `pid` (`.td-tmp-<pid>-...`, NOTE [ Crash-safe memmap writes ]
// and NOTE [ Crash-safe level writes ] in memmap_internal.h) is anywhere under `dir`. The tree
// may change while it is read (a writer is running): what vanishes is skipped.
inline bool HasTempOf(pid_t pid, const std::string& dir, int depth = 0) {
  if (depth > 64) return false;
  const std::string prefix = ".td-tmp-" + std::to_string(pid) + "-";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (!found) {
    const struct dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (name.rfind(prefix, 0) == 0) {
      found = true;
      break;
    }
    const std::string path = dir + "/" + name;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) found = HasTempOf(pid, path, depth + 1);
  }
  ::closedir(d);
  return found;
}

inline std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

// Stops the child `pid` (SIGSTOP) inside a memmap write: it waits until one of the child's
// temporaries exists under `root`, stops the child and looks again; a write that ended between
// the look and the stop is let go (SIGCONT) and the next one waited for. Returns "" once the child
// is stopped with its temporary on disk, so that a SIGKILL sent then lands inside that write.
// Otherwise returns what went wrong (the child ended first, or no write was caught within
// `timeout`), and the child is gone (killed if need be, and reaped).
inline std::string StopInsideWrite(pid_t pid, const std::string& root,
                                   std::chrono::seconds timeout = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int missed = 0;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return "the writer ended (" + DescribeWaitStatus(status) + ") before a write was caught";
    }
    if (HasTempOf(pid, root)) {
      if (::kill(pid, SIGSTOP) != 0) return std::string("kill(SIGSTOP): ") + std::strerror(errno);
      if (::waitpid(pid, &status, WUNTRACED) != pid) {
        return std::string("waitpid: ") + std::strerror(errno);
      }
      if (!WIFSTOPPED(status)) {
        return "the writer ended (" + DescribeWaitStatus(status) + ") before a write was caught";
      }
      if (HasTempOf(pid, root)) return "";
      ++missed;
      ::kill(pid, SIGCONT);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return "no write of the writer caught within " + std::to_string(timeout.count()) + " s (" +
         std::to_string(missed) + " stops landed between writes)";
}

}  // namespace testing_util
}  // namespace td
