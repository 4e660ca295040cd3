// Data-parallel training: every rank holds the same model and a different shard of the data;
// after backward(), the gradients — a TensorDict built from the model with from_module — are
// averaged across ranks with ONE all_reduce, whatever the number of parameters.
//
//   td::TensorDict grads = td::nn::from_module(*model).apply(
//       [](const at::Tensor& p) { return p.grad(); });            // the .grad tensors themselves
//   td::distributed::all_reduce(pg, grads, td::distributed::ReduceOp::kAvg);
//   optimizer.step();
//
// Run as is, the program forks 2 ranks with td::distributed::spawn; started by a
// launcher that sets RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT it joins that group instead.
// Exits non-zero unless the loss falls and both ranks end with identical parameters.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/distributed.h"
#include "td/distributed/spawn.h"
#include "td/nn/functional.h"

namespace dist = td::distributed;

int RunRank(const dist::ProcessGroupPtr& pg) {
  const int rank = pg->getRank(), world = pg->getSize();
  torch::manual_seed(0);  // same initial model everywhere
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 1));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  // This rank's shard of a regression problem.
  torch::manual_seed(100 + rank);
  at::Tensor x = torch::randn({256, 8});
  at::Tensor y = 0.3 * x.sum(1, true);  // a linear target the MLP fits quickly
  td::TensorDict params = td::nn::from_module(*model);
  double first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    optimizer.zero_grad();
    at::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    td::TensorDict grads = params.apply([](const at::Tensor& p) { return p.grad(); });
    dist::all_reduce(pg, grads, dist::ReduceOp::kAvg);
    optimizer.step();
    // The mean loss over the ranks, for the log.
    td::TensorDict l({{"loss", loss.detach().reshape({1})}}, {1});
    dist::all_reduce(pg, l, dist::ReduceOp::kAvg);
    last = l.get("loss").item<double>();
    if (step == 0) first = last;
    if (rank == 0 && step % 25 == 0) std::cout << "step " << step << ": loss " << last << "\n";
  }
  // Every rank must hold the same parameters.
  std::vector<td::TensorDict> all = dist::all_gather(pg, params.detach());
  bool same = true;
  for (int r = 1; r < world; ++r) same = same && td::allclose(all[r], all[0]);
  if (rank == 0) {
    std::cout << "final loss " << last << " (first " << first << "), parameters identical on "
              << world << " ranks: " << (same ? "yes" : "no") << std::endl;
  }
  return same && last < 0.5 * first ? 0 : 1;
}

int main() {
  if (std::getenv("RANK") != nullptr) {
    return RunRank(dist::init_process_group(dist::options_from_env()));
  }
  const auto exits = dist::spawn(dist::SpawnOptions().world_size(2),
                                 [](int, const dist::ProcessGroupPtr& pg) { return RunRank(pg); });
  for (size_t r = 0; r < exits.size(); ++r) {
    if (!exits[r].ok()) std::cerr << "rank " << r << ": " << exits[r].to_string() << std::endl;
  }
  return dist::all_ok(exits) ? 0 : 1;
}
