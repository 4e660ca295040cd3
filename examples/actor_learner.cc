// An actor-learner loop, written from README.md and docs/ alone: two actor processes roll out a
// TensorDictModule policy and send their rollouts, as a TensorClass, to the learner with
// td::distributed; the learner writes them into a memory-mapped replay buffer made with
// memmap_like, samples it with a BatchLoader and takes Adam steps on the policy, whose weights it
// broadcasts back to the actors.
//
// The task is a contextual bandit: for an observation o the best action is kBest o (unknown to
// the agent) and the reward is -|action - kBest o|^2. Actors explore with Gaussian noise around
// the policy's output; the learner regresses the policy onto the actions it was sent, weighted
// by the softmax of their rewards (reward-weighted regression). Run as is, the program forks its
// 3 ranks itself with td::distributed::spawn; started by a launcher that sets RANK /
// WORLD_SIZE / MASTER_ADDR / MASTER_PORT it joins that group instead. Exits non-zero unless the
// policy's error falls below a fifth of where it started.
//
// Bazel: //td/tensorclass:nn, :distributed and :data (each brings //td/tensorclass and the
// package it adapts), //td/distributed, //td/nn, //td/backends/memmap,
// @tensordict_libtorch//:libtorch.
#include <torch/torch.h>  // torch::nn::Linear, torch::optim::Adam

#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "td/distributed/spawn.h"         // td::distributed::spawn
#include "td/nn/common.h"                 // TensorDictModule
#include "td/nn/functional.h"             // from_module
#include "td/nn/sequence.h"               // TensorDictSequential
#include "td/tensorclass/data.h"          // td::data::ClassBatchLoader
#include "td/tensorclass/distributed.h"   // td::distributed calls on classes
#include "td/tensorclass/nn.h"            // td::nn::forward on classes

namespace dist = td::distributed;
using at::indexing::Slice;

class Next : public td::TensorClass<Next> {
 public:
  TD_TENSORCLASS(Next, (at::Tensor, obs), (at::Tensor, reward))
};
class Transition : public td::TensorClass<Transition> {
 public:
  TD_TENSORCLASS(Transition, (at::Tensor, obs), (at::Tensor, loc), (at::Tensor, action),
                 (Next, next))
};

constexpr int64_t kSteps = 64;  // transitions per rollout
constexpr int kRounds = 15;     // broadcast -> collect -> learn
constexpr int64_t kCapacity = 2 * kSteps * kRounds;

at::Tensor Best() {
  return at::tensor({1.0f, -1.0f, 0.5f, 0.0f, 0.0f, 2.0f, -0.5f, 1.0f}).view({2, 4});
}

// The policy's error: mean |policy(o) - kBest o|^2 over fixed observations.
double Error(td::nn::TensorDictModule& policy) {
  torch::NoGradGuard no_grad;
  at::Tensor obs = at::linspace(-2, 2, 256 * 4).view({256, 4}).sin();
  at::Tensor loc = policy->forward_tensors({obs})[0];
  return (loc - at::matmul(obs, Best().t())).pow(2).sum(-1).mean().item<double>();
}

int RunRank(const dist::ProcessGroupPtr& pg, const std::string& dir) {
  const int rank = pg->getRank();
  torch::manual_seed(rank);
  td::nn::TensorDictModule policy(torch::nn::Linear(4, 2), "obs", "loc");
  if (rank != 0) {  // an actor: explore around the policy's output, then step the environment
    td::nn::TensorDictModule explore(
        [](const at::Tensor& loc) { return loc + 0.5 * at::randn_like(loc); }, "loc", "action");
    td::nn::TensorDictModule env(
        [](const at::Tensor& obs, const at::Tensor& action) {
          at::Tensor reward = -(action - at::matmul(obs, Best().t())).pow(2).sum(-1);
          return std::make_tuple(at::randn_like(obs), reward);
        },
        {"obs", "action"}, {{"next", "obs"}, {"next", "reward"}});
    td::nn::TensorDictSequential step(policy, explore, env);
    for (int round = 0; round < kRounds; ++round) {
      dist::broadcast(pg, td::nn::from_module(*policy), 0);  // the learner's weights
      Transition rollout = Transition::unset({kSteps});
      rollout.set_obs(at::randn({kSteps, 4}));
      {
        torch::NoGradGuard no_grad;
        rollout = td::nn::forward(*step, rollout);  // fills loc, action, next.obs, next.reward
      }
      if (round == 0) {
        dist::init_remote(pg, rollout, 0);  // the structure once, then one message per send
      } else {
        dist::send(pg, rollout, 0);
      }
    }
    return 0;
  }
  // The learner.
  torch::optim::Adam adam(policy->parameters(), torch::optim::AdamOptions(0.02));
  const double first_error = Error(policy);
  std::vector<Transition> rollouts;
  std::optional<Transition> replay;
  int64_t filled = 0;
  for (int round = 0; round < kRounds; ++round) {
    dist::broadcast(pg, td::nn::from_module(*policy), 0);
    for (int actor = 1; actor <= 2; ++actor) {
      if (round == 0) {
        rollouts.push_back(dist::from_remote_init<Transition>(pg, actor));
      } else {
        dist::recv(pg, rollouts[actor - 1], actor);
      }
    }
    Transition both = td::stack(rollouts, 0).reshape({-1});  // [2 * kSteps]
    if (!replay) replay = both.index({0}).expand({kCapacity}).memmap_like(dir + "/replay");
    replay->index_put_({Slice(filled, filled + both.batch_size()[0])}, both);  // into the files
    filled += both.batch_size()[0];
    td::data::ClassBatchLoader loader(replay->index({Slice(0, filled)}),  // a view of the files
                                      td::data::BatchOptions(64).shuffle(true).seed(round));
    for (const Transition& batch : loader) {
      Transition out = td::nn::forward(*policy, batch);  // loc again, with gradients
      at::Tensor weight = at::softmax(batch.next().reward() / 0.5, 0);
      at::Tensor loss = (weight * (out.loc() - batch.action()).pow(2).sum(-1)).sum();
      adam.zero_grad();
      loss.backward();
      adam.step();
    }
    if (round % 5 == 0 || round == kRounds - 1) {
      std::cout << "round " << round << ": " << filled << " transitions in the replay buffer, "
                << "mean reward " << both.next().reward().mean().item<double>() << ", error "
                << Error(policy) << std::endl;
    }
  }
  const double error = Error(policy);
  std::cout << "policy error " << first_error << " -> " << error << std::endl;
  return error < 0.2 * first_error ? 0 : 1;
}

int main() {
  char dir[] = "/tmp/td_actor_learner_XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  if (std::getenv("RANK") != nullptr) {
    const int code = RunRank(dist::init_process_group(dist::options_from_env()), dir);
    std::filesystem::remove_all(dir);
    return code;
  }
  // Every rank's waits are bounded by the group's timeout; the whole run by the deadline.
  const auto exits = dist::spawn(
      dist::SpawnOptions().world_size(3).deadline(std::chrono::minutes(5)),
      [&dir](int, const dist::ProcessGroupPtr& pg) { return RunRank(pg, dir); });
  for (size_t r = 0; r < exits.size(); ++r) {
    if (!exits[r].ok()) std::cerr << "rank " << r << ": " << exits[r].to_string() << std::endl;
  }
  std::filesystem::remove_all(dir);
  return dist::all_ok(exits) ? 0 : 1;
}
