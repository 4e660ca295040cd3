// NOTE [ SIGBUS guard ] (td/core/mapped_copy.h): reads past the end of a truncated mapped file
// inside GuardedCopy return false; outside it the signal goes where it went before. Every case
// that faults runs in a fork()ed child with a bounded wait.
#include "td/core/mapped_copy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = 1 << 16;

// A file of kBytes mapped shared, then truncated to `keep` bytes (what another process
// truncating it does to this mapping).
const char* MapThenTruncate(size_t keep) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir ? dir : "/tmp") + "/mapped_copy." + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::ftruncate(fd, kBytes) != 0) return nullptr;
  void* p = ::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED || ::ftruncate(fd, static_cast<off_t>(keep)) != 0) return nullptr;
  ::close(fd);
  ::unlink(path.c_str());
  return static_cast<const char*>(p);
}

// Runs `body` in a child and returns its exit code, 128 + the signal that ended it, or -1 when
// it ran longer than 60 s (then killed).
int InChild(void (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(MappedCopy, CopiesAndReturnsTrue) {
  std::vector<char> a(100, 'x'), b(100, 0);
  EXPECT_TRUE(td::internal::GuardedCopy([&] { std::memcpy(b.data(), a.data(), a.size()); }));
  EXPECT_EQ(b, a);
}

TEST(MappedCopy, ReadPastTheTruncatedEndReturnsFalse) {
  EXPECT_EQ(InChild([] {
              const char* m = MapThenTruncate(4096);
              if (m == nullptr) ::_exit(2);
              std::vector<char> out(kBytes);
              // The page still inside the file reads; the ones past its end fault.
              if (!td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, 4096); })) {
                ::_exit(3);
              }
              if (td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, kBytes); })) {
                ::_exit(4);
              }
              // Again, and from a nested guard: each returns to its own caller.
              bool inner = true;
              const bool outer = td::internal::GuardedCopy([&] {
                inner = td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, kBytes); });
              });
              ::_exit(outer && !inner ? 0 : 5);
            }),
            0);
}

TEST(MappedCopy, OtherThreadsAreGuardedOnTheirOwn) {
  EXPECT_EQ(InChild([] {
              const char* m = MapThenTruncate(0);
              if (m == nullptr) ::_exit(2);
              bool results[2] = {true, true};
              std::vector<std::thread> threads;
              for (bool& r : results) {
                threads.emplace_back([&r, m] {
                  std::vector<char> out(kBytes);
                  r = td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, kBytes); });
                });
              }
              for (std::thread& t : threads) t.join();
              ::_exit(!results[0] && !results[1] ? 0 : 3);
            }),
            0);
}

// AddressSanitizer installs its own SIGBUS handler (the one ours chains to): it reports the
// signal and exits with status 1.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDiedOfSigbus = 1;
#else
constexpr int kDiedOfSigbus = 128 + SIGBUS;
#endif

// Outside a guarded copy the default action still ends the process with SIGBUS.
TEST(MappedCopy, OutsideAGuardTheProcessStillDiesOfSigbus) {
  EXPECT_EQ(InChild([] {
              const char* m = MapThenTruncate(0);
              if (m == nullptr) ::_exit(2);
              std::vector<char> out(16);
              td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, 16); });  // installs
              volatile char c = m[100];
              (void)c;
              ::_exit(3);
            }),
            kDiedOfSigbus);
}

// A handler installed before the guard's still receives the SIGBUS raised outside a guard.
TEST(MappedCopy, ChainsToThePreviousHandler) {
  EXPECT_EQ(InChild([] {
              struct sigaction sa = {};
              sa.sa_handler = [](int) { ::_exit(42); };
              sigemptyset(&sa.sa_mask);
              ::sigaction(SIGBUS, &sa, nullptr);
              const char* m = MapThenTruncate(0);
              if (m == nullptr) ::_exit(2);
              std::vector<char> out(16);
              if (td::internal::GuardedCopy([&] { std::memcpy(out.data(), m, 16); })) ::_exit(3);
              volatile char c = m[100];
              (void)c;
              ::_exit(4);
            }),
            42);
}

}  // namespace
