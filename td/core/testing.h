// Test helpers shared by the suites: assert that a call throws a given error type whose message
// contains every expected fragment, run a call that used to crash in a child process, and the
// sample TensorDict the op suites start from.
//
//   TD_EXPECT_THROW_MSG(td.get("zz"), td::KeyError, {"'zz'", "['a', 'b']"});
//   EXPECT_EQ(td::test::ErrorInChild<td::MemmapError>([&] { load(path); }).kind, "error");
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "td/core/tensordict.h"

#define TD_EXPECT_THROW_MSG(stmt, error_type, ...)                                      \
  do {                                                                                  \
    try {                                                                               \
      (void)(stmt);                                                                     \
      ADD_FAILURE() << "expected " #error_type " from: " #stmt;                         \
    } catch (const error_type& td_e_) {                                                 \
      const std::string td_msg_ = td_e_.what();                                         \
      for (const std::string& td_frag_ : std::vector<std::string> __VA_ARGS__) {        \
        EXPECT_NE(td_msg_.find(td_frag_), std::string::npos)                            \
            << "message of " #stmt " lacks \"" << td_frag_ << "\":\n" << td_msg_;       \
      }                                                                                 \
    }                                                                                   \
  } while (0)

namespace td {
namespace test {

// Batch [3, 4], seeded: "a" float32 (3, 4, 5), "b" int64 arange (3, 4), "n" a nested
// TensorDict with an extra batch dim [3, 4, 2] holding "x" float32 (3, 4, 2, 6), and "s" a
// non-tensor string.
inline TensorDict SampleTensorDict() {
  at::manual_seed(0);
  TensorDict n({{"x", at::randn({3, 4, 2, 6})}}, {3, 4, 2});
  return TensorDict({{"a", at::randn({3, 4, 5})},
                     {"b", at::arange(12).view({3, 4})},
                     {"n", n},
                     {"s", "a string!"}},
                    {3, 4});
}

// How a call run by ErrorInChild ended: kind is "error" (it threw the expected type; message is
// its what_without_backtrace()), "no error" (it returned), "other error" (it threw something
// else; message says what), "signal" (the child died of a signal; message names it) or
// "timeout" (still running after the bound; the child is killed).
struct ChildOutcome {
  std::string kind;
  std::string message;
};

inline std::ostream& operator<<(std::ostream& os, const ChildOutcome& o) {
  return os << o.kind << ": " << o.message;
}

// Runs `fn` in a fork()ed child, so that a crash (SIGSEGV from a deep recursion, SIGBUS from a
// truncated mapping) fails the test instead of ending the test binary, and waits for it at most
// `timeout`. The child reports through a pipe and leaves with _exit. Call it before the test
// starts threads of its own; `fn` should stay on the calling thread (no LibTorch thread pool
// work after fork()).
template <class E>
ChildOutcome ErrorInChild(const std::function<void()>& fn,
                          std::chrono::seconds timeout = std::chrono::seconds(120)) {
  int fds[2];
  if (::pipe(fds) != 0) return {"other error", std::string("pipe: ") + std::strerror(errno)};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return {"other error", std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ::close(fds[0]);
    std::string report;
    try {
      fn();
      report = "no error\n";
    } catch (const E& e) {
      report = std::string("error\n") + e.what_without_backtrace();
    } catch (const std::exception& e) {
      report = std::string("other error\n") + e.what();
    }
    report.resize(std::min<size_t>(report.size(), 16384));  // below the pipe's buffer
    const char* p = report.data();
    size_t left = report.size();
    while (left > 0) {
      const ssize_t w = ::write(fds[1], p, left);
      if (w <= 0) break;
      p += w;
      left -= static_cast<size_t>(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(fds[0]);
      return {"timeout", "the child ran longer than " + std::to_string(timeout.count()) + " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) {
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return {"signal", std::to_string(sig) + " (" + ::strsignal(sig) + ")"};
  }
  const size_t nl = out.find('\n');
  if (nl == std::string::npos) return {"other error", "the child exited without a report"};
  return {out.substr(0, nl), out.substr(nl + 1)};
}

// Every leaf, nested ones included.
inline const KeysOptions kLeaves = KeysOptions().include_nested(true).leaves_only(true);

}  // namespace test
}  // namespace td
