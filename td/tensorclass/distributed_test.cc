// td::distributed on TensorClasses (td/tensorclass/distributed.h) across real processes (fork;
// Gloo over a FileStore in a temp dir). Every wait inside the ranks is bounded by the group's
// timeout, the run by the helper's deadline.
#include "td/tensorclass/distributed.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "td/core/testing.h"
#include "td/distributed/multiprocess_testing.h"

namespace td {
namespace {

namespace dist = td::distributed;
using dist::ProcessGroupPtr;
using dist::test::ExpectAllPassed;
using dist::test::RunOptions;
using dist::test::RunRanks;

class Next : public TensorClass<Next> {
 public:
  TD_TENSORCLASS(Next, (at::Tensor, obs), (at::Tensor, reward))
};
class Rollout : public TensorClass<Rollout> {
 public:
  TD_TENSORCLASS(Rollout, (at::Tensor, obs), (at::Tensor, action), (Next, next),
                 (std::string, env), (std::optional<at::Tensor>, value))
};

// Batch [6]; same seed => same tensors. `env` names the rank that made it.
Rollout Make(int64_t seed, const std::string& env) {
  at::manual_seed(seed);
  return Rollout(at::randn({6, 4}), at::randn({6, 2}),
                 Next(at::randn({6, 4}), at::randn({6, 1}), {6}), env, std::nullopt, {6});
}

bool Same(const Rollout& a, const Rollout& b) {
  return at::equal(a.obs(), b.obs()) && at::equal(a.action(), b.action()) &&
         at::equal(a.next().obs(), b.next().obs()) &&
         at::equal(a.next().reward(), b.next().reward());
}

// init_remote ships the whole class (the text field too), send / recv / isend / irecv then move
// its tensor fields into the receiver's class in place; the receiver keeps its own text field.
TEST(TensorClassDistributed, PointToPoint) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    if (rank == 1) {
      dist::init_remote(pg, Make(1, "actor"), 0);
      dist::send(pg, Make(2, "actor"), 0);
      dist::Work w = dist::isend(pg, Make(3, "actor"), 0, dist::P2POptions().tag(4));
      w.wait();
      dist::send(pg, Make(4, "actor"), 0);
      return;
    }
    Rollout got = dist::from_remote_init<Rollout>(pg, 1);
    EXPECT_TRUE(Same(got, Make(1, "")));
    EXPECT_EQ(got.env(), "actor");
    EXPECT_FALSE(got.value());
    at::Tensor obs = got.obs();
    dist::recv(pg, got, 1);
    EXPECT_TRUE(Same(got, Make(2, "")));
    EXPECT_TRUE(at::equal(obs, got.obs()));  // written in place
    Rollout other = td::zeros_like(got);
    other.set_env("learner");
    dist::irecv(pg, other, 1, dist::P2POptions().tag(4)).wait();
    EXPECT_TRUE(Same(other, Make(3, "")));
    EXPECT_EQ(other.env(), "learner");  // text fields do not travel with send
    // A temporary class writes through to the tensors it holds.
    Rollout view = td::zeros_like(got);
    dist::recv(pg, Rollout::wrap(view.tensordict()), 1);
    EXPECT_TRUE(Same(view, Make(4, "")));
  }));
}

// A receiver with another set of fields (an optional field set on one side only) gets the
// ValueError naming the field, and its class is left as it was.
TEST(TensorClassDistributed, DifferentFieldsAreNamed) {
  ExpectAllPassed(RunRanks(RunOptions(), [](int rank, const ProcessGroupPtr& pg) {
    Rollout sent = Make(5, "actor");
    sent.set_value(at::ones({6, 1}));
    if (rank == 1) {
      dist::send(pg, sent, 0);
      return;
    }
    Rollout got = td::zeros_like(Make(5, "learner"));
    TD_EXPECT_THROW_MSG(dist::recv(pg, got, 1), ValueError,
                        {"key 'value'", "present on the sender side"});
    EXPECT_EQ(got.obs().abs().sum().item<float>(), 0.f);
  }));
}

// Collectives over classes: broadcast, all_reduce, reduce, all_gather, gather, scatter.
TEST(TensorClassDistributed, Collectives) {
  ExpectAllPassed(RunRanks(RunOptions().world_size(3), [](int rank, const ProcessGroupPtr& pg) {
    const std::string me = "rank" + std::to_string(rank);
    Rollout mine = Make(10 + rank, me);
    Rollout b = rank == 0 ? Make(10, me) : td::zeros_like(mine);
    dist::broadcast(pg, b, 0);
    EXPECT_TRUE(Same(b, Make(10, "")));
    EXPECT_EQ(b.env(), me);

    Rollout sum = mine.clone();
    dist::all_reduce(pg, sum, dist::ReduceOp::kSum);
    at::Tensor want = Make(10, "").obs() + Make(11, "").obs() + Make(12, "").obs();
    EXPECT_TRUE(at::allclose(sum.obs(), want));
    EXPECT_TRUE(at::allclose(sum.next().reward(), Make(10, "").next().reward() +
                                                      Make(11, "").next().reward() +
                                                      Make(12, "").next().reward()));
    Rollout red = mine.clone();
    dist::reduce(pg, red, 2, dist::ReduceOp::kMax);
    if (rank == 2) {
      at::Tensor mx = at::max(at::max(Make(10, "").obs(), Make(11, "").obs()), Make(12, "").obs());
      EXPECT_TRUE(at::equal(red.obs(), mx));
    }

    std::vector<Rollout> all = dist::all_gather(pg, mine);
    ASSERT_EQ(all.size(), 3u);
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(Same(all[r], Make(10 + r, ""))) << r;
      EXPECT_EQ(all[r].env(), me) << r;  // non-tensor fields are this rank's
    }
    std::vector<Rollout> at1 = dist::gather(pg, mine, 1);
    EXPECT_EQ(at1.size(), rank == 1 ? 3u : 0u);
    if (rank == 1) {
      EXPECT_TRUE(Same(at1[2], Make(12, "")));
    }

    std::vector<Rollout> parts;
    if (rank == 0) {
      for (int r = 0; r < 3; ++r) parts.push_back(Make(20 + r, "for" + std::to_string(r)));
    }
    Rollout part = dist::scatter(pg, parts, 0);
    EXPECT_TRUE(Same(part, Make(20 + rank, "")));
    EXPECT_EQ(part.env(), "for0");  // the structure (text fields included) is the source's
  }));
}

}  // namespace
}  // namespace td
