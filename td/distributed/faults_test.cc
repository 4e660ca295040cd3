// td::distributed under faults (docs/distributed.md, "Faults"): messages a receiver refuses,
// leaves that cannot be written, TensorDicts changed after isend, invalid timeouts, hostile
// headers and structures. In every case the process survives, the error names the call, and the
// receiving TensorDict is unchanged. Two real processes over a FileStore (multiprocess_testing.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "td/core/testing.h"
#include "td/distributed/distributed.h"
#include "td/distributed/multiprocess_testing.h"

namespace td {
namespace distributed {
namespace {

using test::ExpectAllPassed;
using test::RunOptions;
using test::RunRanks;

// {"a": [4, 3], "n": {"b": [4], "c": [4, 2]}}, batch [4], every leaf `value`.
TensorDict Sample(double value) {
  return TensorDict({{"a", at::full({4, 3}, value)},
                     {"n", TensorDict({{"b", at::full({4}, value)}, {"c", at::full({4, 2}, value)}},
                                      {4})}},
                    {4});
}

// True when every leaf of `td` is `value`.
bool AllEqual(const TensorDict& td, double value) {
  for (const auto& [key, v] : td.items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!at::equal(v.tensor(), at::full_like(v.tensor(), value))) return false;
  }
  return true;
}

// A refused init_remote message still agrees on its structure on both sides: the sender's next
// send of that structure is one message sized for the agreement, and the receiver posts room for
// it (before, the receiver's Gloo thread aborted the process: "op.preamble.length <= op.nbytes").
TEST(FaultsTest, RecvRefusingInitRemoteKeepsTheAgreementInStep) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 0) {
      init_remote(pg, Sample(1), 1);
      send(pg, Sample(2), 1);
      send(pg, Sample(3), 1, P2POptions().wire_format(WireFormat::kPerLeaf));
    } else {
      TensorDict u = Sample(0);
      TD_EXPECT_THROW_MSG(recv(pg, u, 0), ValueError,
                          {"td::distributed::recv (source rank 0)",
                           "rank 0 sent an init_remote message; receive it with from_remote_init",
                           "nothing was written"});
      EXPECT_TRUE(AllEqual(u, 0));
      recv(pg, u, 0);
      EXPECT_TRUE(AllEqual(u, 2));
      recv(pg, u, 0);
      EXPECT_TRUE(AllEqual(u, 3));
    }
  }));
}

TEST(FaultsTest, RecvRefusingASecondLargerInitRemoteKeepsTheAgreementInStep) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    TensorDict bigger = Sample(5);
    bigger.set("big", at::full({4, 100}, 5.0));
    if (rank == 0) {
      init_remote(pg, Sample(1), 1);
      init_remote(pg, bigger, 1);
      send(pg, bigger.apply([](const at::Tensor& x) { return x + 1; }), 1);
    } else {
      TensorDict u = from_remote_init(pg, 0);
      EXPECT_TRUE(AllEqual(u, 1));
      TD_EXPECT_THROW_MSG(recv(pg, u, 0), ValueError, {"sent an init_remote message"});
      EXPECT_TRUE(AllEqual(u, 1));
      TensorDict v = bigger.clone().zero_();
      recv(pg, v, 0);
      EXPECT_TRUE(AllEqual(v, 6));
    }
  }));
}

}  // namespace
}  // namespace distributed
}  // namespace td
