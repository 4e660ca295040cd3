// The RL pattern the seeds come from, across processes: a learner (rank 0) keeps the policy's
// parameters in a TensorDict and broadcasts them; actors (ranks 1..3) collect rollouts as
// TensorDicts and send them to the learner, which stacks them and takes an optimizer step.
//
//   // actor                                       // learner
//   dist::broadcast(pg, params, 0);                dist::broadcast(pg, params, 0);
//   td::TensorDict rollout = collect(params);      for (int a = 1; a < world; ++a)
//   dist::send(pg, rollout, 0);                      dist::recv(pg, rollouts[a - 1], a);
//                                                  td::TensorDict batch = td::stack(rollouts);
//
// The first rollout of each actor goes with init_remote, so the learner needs no template. Run
// as is, the program forks its 4 ranks itself with td::distributed::spawn; started by
// a launcher that sets RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT it joins that group instead.
// Exits non-zero unless the learner's loss falls.
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/distributed/distributed.h"
#include "td/distributed/spawn.h"

namespace dist = td::distributed;

constexpr int kSteps = 16;   // transitions per rollout
constexpr int kRounds = 30;  // broadcast -> collect -> learn

// An environment whose reward is a fixed linear function of the observation; the "policy" is a
// linear value estimate trained to predict it.
td::TensorDict Collect(const td::TensorDict& params, int actor, int round) {
  at::manual_seed(1000 * actor + round);
  at::Tensor obs = at::randn({kSteps, 4});
  at::Tensor value = at::matmul(obs, params.get("w")) + params.get("b");
  at::Tensor reward = at::matmul(obs, at::tensor({1.0f, -2.0f, 0.5f, 3.0f}));
  td::TensorDict rollout({{"observation", obs},
                          {"value", value},
                          {"next", td::TensorDict({{"reward", reward}}, {kSteps})}},
                         {kSteps});
  rollout.set_non_tensor("env", "linear-reward");  // non-tensor data travel with init_remote
  return rollout;
}

int RunRank(const dist::ProcessGroupPtr& pg) {
  const int rank = pg->getRank(), world = pg->getSize();
  td::TensorDict params({{"w", at::zeros({4})}, {"b", at::zeros({})}}, {});
  if (rank != 0) {
    for (int round = 0; round < kRounds; ++round) {
      dist::broadcast(pg, params, 0);
      td::TensorDict rollout = Collect(params, rank, round);
      if (round == 0) {
        dist::init_remote(pg, rollout, 0);
      } else {
        dist::send(pg, rollout, 0);
      }
    }
    return 0;
  }
  std::vector<td::TensorDict> rollouts(world - 1);
  double first_loss = 0, loss_value = 0;
  for (int round = 0; round < kRounds; ++round) {
    dist::broadcast(pg, params, 0);
    for (int a = 1; a < world; ++a) {
      if (round == 0) {
        rollouts[a - 1] = dist::from_remote_init(pg, a);
      } else {
        dist::recv(pg, rollouts[a - 1], a);
      }
    }
    td::TensorDict batch = td::stack(rollouts, 0);  // [actors, steps]
    // One SGD step on the squared error of the value estimate.
    at::Tensor w = params.get("w").clone().requires_grad_(true);
    at::Tensor b = params.get("b").clone().requires_grad_(true);
    at::Tensor pred = at::matmul(batch.get("observation"), w) + b;
    at::Tensor loss = (pred - batch.get({"next", "reward"})).pow(2).mean();
    loss.backward();
    params.set_("w", w.detach() - 0.05 * w.grad());
    params.set_("b", b.detach() - 0.05 * b.grad());
    loss_value = loss.item<double>();
    if (round == 0) first_loss = loss_value;
    if (round % 10 == 0 || round == kRounds - 1) {
      std::cout << "round " << round << ": " << batch.batch_size() << " transitions from "
                << world - 1 << " actors, loss " << loss_value << std::endl;
    }
  }
  std::cout << "learned w = " << params.get("w") << std::endl;
  return loss_value < 0.1 * first_loss ? 0 : 1;
}

int main() {
  if (std::getenv("RANK") != nullptr) {
    return RunRank(dist::init_process_group(dist::options_from_env()));
  }
  const auto exits = dist::spawn(dist::SpawnOptions().world_size(4),
                                 [](int, const dist::ProcessGroupPtr& pg) { return RunRank(pg); });
  for (size_t r = 0; r < exits.size(); ++r) {
    if (!exits[r].ok()) std::cerr << "rank " << r << ": " << exits[r].to_string() << std::endl;
  }
  return dist::all_ok(exits) ? 0 : 1;
}
