// send / recv of CUDA TensorDicts between two processes over Gloo (docs/cuda.md, "Between
// processes"): rank 0 sends a TensorDict on cuda:0, rank 1 receives into one on cuda:0, and the
// values arrive; then the same through pinned host memory by hand. Skips where no CUDA device is
// present. The parent never touches CUDA before forking the ranks (a CUDA context does not
// survive fork): a probe child answers whether a device is there.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <unistd.h>

#include "td/core/tensordict.h"
#include "td/distributed/distributed.h"
#include "td/distributed/multiprocess_testing.h"

namespace {

using td::TensorDict;
namespace dist = td::distributed;

const at::Device kCuda("cuda:0");

bool CudaInAChild() {
  const pid_t pid = fork();
  if (pid == 0) _exit(torch::cuda::is_available() ? 0 : 1);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TensorDict Values(const at::Device& device, int64_t offset) {
  return TensorDict({{"a", at::arange(1 << 12, at::kFloat) + offset},
                     {"big", at::arange(1 << 19, at::kFloat) + offset},
                     {"n", {{"b", at::arange(8, at::kLong) + offset}}}},
                    {}, device);
}

TEST(CudaDistributedTest, SendRecvCudaTensorDicts) {
  if (!CudaInAChild()) {
    GTEST_SKIP() << "no CUDA device: send/recv of CUDA TensorDicts over Gloo not checked";
  }
  auto status = dist::test::RunRanks(
      dist::test::RunOptions().world_size(2), [](int rank, const dist::ProcessGroupPtr& pg) {
        if (rank == 0) {
          dist::send(pg, Values(kCuda, 7), 1);
          // Staged by hand: pinned host memory, then one non_blocking move on the receiver.
          dist::send(pg, Values(kCuda, 9).to(at::kCPU).pin_memory(), 1);
        } else {
          TensorDict into = Values(kCuda, 0);
          dist::recv(pg, into, 0);
          const TensorDict want = Values(at::Device("cpu"), 7);
          EXPECT_TRUE(into.get("a").is_cuda());
          EXPECT_TRUE(into.get("a").cpu().equal(want.get("a")));
          EXPECT_TRUE(into.get("big").cpu().equal(want.get("big")));
          EXPECT_TRUE(into.get({"n", "b"}).cpu().equal(want.get({"n", "b"})));
          TensorDict staged = Values(at::Device("cpu"), 0).pin_memory();
          dist::recv(pg, staged, 0);
          const TensorDict moved = staged.to(kCuda, /*non_blocking=*/true);
          EXPECT_TRUE(moved.get("big").cpu().equal(Values(at::Device("cpu"), 9).get("big")));
        }
      });
  dist::test::ExpectAllPassed(status);
}

}  // namespace
