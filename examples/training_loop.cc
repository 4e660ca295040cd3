// The README's training loop, in C++: the model and the loss read and write one TensorDict, so
// the loop does not know what is inside it.
//
//   for (td::TensorDict data : dataset.split(64)) {
//     data = model(data);          // writes ("outputs", "logits")
//     loss_module(data);           // writes "loss" (one value per sample)
//     data.get("loss").mean().backward();
//     optimizer.step();
//     optimizer.zero_grad();
//   }
//
// A two-class problem (is x0 * x1 > 0?) learned by an MLP; exits non-zero unless the loss falls
// and the accuracy is high.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>

#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/nn/sequence.h"

namespace nn = torch::nn;
using td::nn::TensorDictModule;
using td::nn::TensorDictSequential;

int main() {
  torch::manual_seed(0);
  // The dataset: one TensorDict with batch size [1024].
  const at::Tensor x = torch::rand({1024, 2}) * 2 - 1;
  const at::Tensor label = (x.select(1, 0) * x.select(1, 1) > 0).to(torch::kLong);
  td::TensorDict dataset({{"input", x}, {"target", label}}, {1024});

  // The model reads "input" and writes ("outputs", "logits") then ("outputs", "probabilities").
  TensorDictSequential model(
      TensorDictModule(nn::Sequential(nn::Linear(2, 32), nn::ReLU(), nn::Linear(32, 32),
                                      nn::ReLU(), nn::Linear(32, 2)),
                       {"input"}, {{"outputs", "logits"}}),
      TensorDictModule([](at::Tensor logits) { return torch::softmax(logits, -1); },
                       {{"outputs", "logits"}}, {{"outputs", "probabilities"}}));
  // The loss reads what the model wrote and the target, and writes the per-sample loss (a
  // 0-dim mean would not fit the batch size [64]).
  TensorDictModule loss_module(
      [](at::Tensor logits, at::Tensor target) {
        return torch::nn::functional::cross_entropy(
            logits, target,
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      },
      {{"outputs", "logits"}, "target"}, {"loss"});
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));

  double first_epoch = 0, last_epoch = 0;
  for (int epoch = 0; epoch < 30; ++epoch) {
    double total = 0;
    int batches = 0;
    const td::TensorDict shuffled = dataset.index({torch::randperm(1024)});
    for (td::TensorDict data : shuffled.split(64)) {
      // the model reads and writes tensordicts
      data = model(data);
      loss_module(data);
      const at::Tensor loss = data.get("loss").mean();
      loss.backward();
      optimizer.step();
      optimizer.zero_grad();
      total += loss.item<double>();
      ++batches;
    }
    if (epoch == 0) first_epoch = total / batches;
    last_epoch = total / batches;
    if (epoch % 10 == 0 || epoch == 29) {
      std::cout << "epoch " << epoch << ": mean loss " << total / batches << "\n";
    }
  }
  torch::NoGradGuard no_grad;
  td::TensorDict all = model(dataset.copy());
  const double accuracy =
      (all.get({"outputs", "probabilities"}).argmax(-1) == dataset.get("target"))
          .to(torch::kFloat)
          .mean()
          .item<double>();
  std::cout << "loss " << first_epoch << " -> " << last_epoch << ", accuracy " << accuracy
            << "\n";
  std::cout << all << "\n";
  if (!(last_epoch < 0.5 * first_epoch) || accuracy < 0.9) {
    std::cerr << "the model did not learn\n";
    return EXIT_FAILURE;
  }
  std::cout << "training loop example: OK\n";
  return EXIT_SUCCESS;
}
