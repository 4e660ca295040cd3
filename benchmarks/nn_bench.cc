// td::nn against the same work written by hand with plain LibTorch, in the same run:
//  * TDModuleForward: TensorDictModule around an MLP (8 -> 32 -> 4, batch 64) reading "x" and
//    writing "y", vs calling the MLP on the tensor (target: within 1.2x). Also for an MLP held in
//    a torch::nn::Sequential (type-erased calls).
//  * ToModule: to_module enter + exit on a 3-layer MLP (Python tensordict: 42 us), vs assigning
//    and restoring the six member handles by hand.
//  * FromModule: from_module of the same MLP (Python tensordict: 24 us), vs named_parameters().
//  * Ensemble8: 8 MLPs on one batch: the batched path, the member-by-member loop, and 8 separate
//    modules called by hand.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/nn/ensemble.h"
#include "td/nn/functional.h"

namespace {

namespace nn = torch::nn;

struct MlpImpl : nn::Module {
  MlpImpl()
      : l1(register_module("l1", nn::Linear(8, 32))), l2(register_module("l2", nn::Linear(32, 4))) {}
  at::Tensor forward(const at::Tensor& x) { return l2(torch::relu(l1(x))); }
  nn::Linear l1, l2;
};
TORCH_MODULE(Mlp);

void BM_Forward_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  Mlp mlp;
  td::nn::TensorDictModule module(mlp, {"x"}, {"y"});
  td::TensorDict data({{"x", torch::randn({64, 8})}}, {64});
  for (auto _ : state) {
    benchmark::DoNotOptimize(module(data));
  }
}
BENCHMARK(BM_Forward_Ours)->Name("TDModuleForward/ours");

void BM_Forward_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  Mlp mlp;
  const at::Tensor x = torch::randn({64, 8});
  for (auto _ : state) {
    benchmark::DoNotOptimize(mlp->forward(x));
  }
}
BENCHMARK(BM_Forward_Hand)->Name("TDModuleForward/hand");

nn::Sequential SeqMlp() { return nn::Sequential(nn::Linear(8, 32), nn::ReLU(), nn::Linear(32, 4)); }

void BM_ForwardSeq_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  nn::Sequential mlp = SeqMlp();
  td::nn::TensorDictModule module(mlp, {"x"}, {"y"});
  td::TensorDict data({{"x", torch::randn({64, 8})}}, {64});
  for (auto _ : state) {
    benchmark::DoNotOptimize(module(data));
  }
}
BENCHMARK(BM_ForwardSeq_Ours)->Name("TDModuleForwardSequential/ours");

void BM_ForwardSeq_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  nn::Sequential mlp = SeqMlp();
  const at::Tensor x = torch::randn({64, 8});
  for (auto _ : state) {
    benchmark::DoNotOptimize(mlp->forward(x));
  }
}
BENCHMARK(BM_ForwardSeq_Hand)->Name("TDModuleForwardSequential/hand");

nn::Sequential Mlp3() {
  return nn::Sequential(nn::Linear(8, 32), nn::ReLU(), nn::Linear(32, 32), nn::ReLU(),
                        nn::Linear(32, 4));
}

void BM_ToModule_Ours(benchmark::State& state) {
  nn::Sequential model = Mlp3();
  td::TensorDict params = td::nn::from_module(*model).apply(
      [](const at::Tensor& t) { return t.detach().clone(); });
  for (auto _ : state) {
    auto guard = td::nn::to_module(params, model);
    benchmark::DoNotOptimize(guard.size());
  }
}
BENCHMARK(BM_ToModule_Ours)->Name("ToModule/ours");

void BM_ToModule_Hand(benchmark::State& state) {
  nn::Sequential model = Mlp3();
  std::vector<nn::LinearImpl*> layers = {model[0]->as<nn::LinearImpl>(),
                                         model[2]->as<nn::LinearImpl>(),
                                         model[4]->as<nn::LinearImpl>()};
  std::vector<at::Tensor> fresh;
  for (auto& l : layers) {
    fresh.push_back(l->weight.detach().clone());
    fresh.push_back(l->bias.detach().clone());
  }
  std::vector<at::Tensor> saved(6);
  for (auto _ : state) {
    for (size_t i = 0; i < layers.size(); ++i) {
      saved[2 * i] = layers[i]->weight;
      saved[2 * i + 1] = layers[i]->bias;
      layers[i]->weight = fresh[2 * i];
      layers[i]->bias = fresh[2 * i + 1];
    }
    benchmark::ClobberMemory();
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i]->weight = saved[2 * i];
      layers[i]->bias = saved[2 * i + 1];
    }
  }
}
BENCHMARK(BM_ToModule_Hand)->Name("ToModule/hand");

void BM_FromModule_Ours(benchmark::State& state) {
  nn::Sequential model = Mlp3();
  for (auto _ : state) {
    benchmark::DoNotOptimize(td::nn::from_module(*model));
  }
}
BENCHMARK(BM_FromModule_Ours)->Name("FromModule/ours");

void BM_FromModule_Hand(benchmark::State& state) {
  nn::Sequential model = Mlp3();
  for (auto _ : state) {
    benchmark::DoNotOptimize(model->named_parameters());
  }
}
BENCHMARK(BM_FromModule_Hand)->Name("FromModule/hand");

struct EnsembleFixture {
  EnsembleFixture() {
    std::vector<std::shared_ptr<nn::Module>> ptrs;
    for (int i = 0; i < 8; ++i) {
      models.push_back(Mlp3());
      ptrs.push_back(models.back().ptr());
    }
    stacked = td::nn::from_modules(ptrs).apply([](const at::Tensor& t) { return t.detach(); });
  }
  std::vector<nn::Sequential> models;
  td::TensorDict stacked;
  at::Tensor x = torch::randn({64, 8});
};

void BM_Ensemble_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  EnsembleFixture f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(td::nn::ensemble_forward(f.models[0], f.stacked, f.x));
  }
}
BENCHMARK(BM_Ensemble_Ours)->Name("Ensemble8/ours");

void BM_Ensemble_Loop(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  EnsembleFixture f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(td::nn::ensemble_forward(f.models[0], f.stacked, f.x,
                                                      td::nn::EnsembleOptions().batched(false)));
  }
}
BENCHMARK(BM_Ensemble_Loop)->Name("Ensemble8/loop");

void BM_Ensemble_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  EnsembleFixture f;
  std::vector<at::Tensor> outs(8);
  for (auto _ : state) {
    for (int i = 0; i < 8; ++i) outs[i] = f.models[i]->forward(f.x);
    benchmark::DoNotOptimize(at::stack(outs, 0));
  }
}
BENCHMARK(BM_Ensemble_Hand)->Name("Ensemble8/hand");

}  // namespace
