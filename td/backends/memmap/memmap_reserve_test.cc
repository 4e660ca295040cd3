// MemmapLikeReserved: memmap_like whose files have their blocks allocated up front, and a named
// error (not a later SIGBUS) when there is no room. "No room" is made with a file size limit
// (RLIMIT_FSIZE) in a forked child, so the test needs no small file system.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

constexpr int64_t kBytes = int64_t{8} << 20;

TensorDict Spec() {
  return TensorDict({{"x", at::zeros({1, 1}, at::kByte).expand({1024, kBytes / 1024})},
                     {"n", TensorDict({{"y", at::zeros({1024, 4}, at::kFloat)}}, {1024})}},
                    {1024});
}

int64_t AllocatedBytes(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

TEST(MemmapReserveTest, ReservedFilesHaveTheirBlocksSparseOnesDoNot) {
  const std::string root = testing_util::FreshDir("reserve");
  TensorDict reserved = MemmapLikeReserved(Spec(), root + "/reserved");
  TensorDict sparse = Spec().memmap_like(root + "/sparse");
  EXPECT_GE(AllocatedBytes(root + "/reserved/x.memmap"), kBytes);
  EXPECT_LT(AllocatedBytes(root + "/sparse/x.memmap"), kBytes / 2);
  EXPECT_GE(AllocatedBytes(root + "/reserved/n/y.memmap"), 1024 * 4 * 4);
  // Same result otherwise: zero-filled, same structure, locked, memory-mapped.
  EXPECT_TRUE(reserved.get("x").equal(sparse.get("x")));
  EXPECT_EQ(reserved.get("x").sum().item<int64_t>(), 0);
  EXPECT_TRUE(reserved.is_locked());
  EXPECT_TRUE(reserved.is_memmap());
  reserved.get("x").index_put_({5}, 7);
  EXPECT_EQ(TensorDict::load_memmap(root + "/reserved").get("x").index({5, 0}).item<int>(), 7);
}

TEST(MemmapReserveTest, NoRoomIsANamedErrorAndLeavesNothing) {
  const std::string root = testing_util::FreshDir("reserve-full");
  const std::string dir = root + "/ds";
  const TensorDict spec = Spec();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Files may not grow past 1 MiB in this process (EFBIG instead of SIGXFSZ).
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    try {
      MemmapLikeReserved(spec, dir);
      ::_exit(11);  // no error
    } catch (const MemmapError& e) {
      const std::string msg = e.what_without_backtrace();
      const bool named = msg.find("no room") != std::string::npos &&
                         msg.find("x.memmap") != std::string::npos &&
                         msg.find("'x'") != std::string::npos;
      if (!named) std::fprintf(stderr, "unexpected message: %s\n", msg.c_str());
      ::_exit(named ? 0 : 12);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unexpected error: %s\n", e.what());
      ::_exit(13);
    }
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the child did not finish in 60 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The failed write left nothing: no directory under the name, no temporary.
  EXPECT_TRUE(testing_util::ListNames(root).empty());
}

}  // namespace
}  // namespace td
