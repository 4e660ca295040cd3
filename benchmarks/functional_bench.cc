// td::vmap over ensembles of N = 10 members, against the same work without it, in the same run:
//  * Mlp64: 3-layer MLPs 16 -> 64 -> 64 -> 4 on a batch of 32 (shared input): td::vmap with
//    to_module, vs the member loop (to_module per member, at::stack), vs hand-batched
//    baddbmm on the stacked weights (as stored, and transposed once beforehand).
//  * Mlp256: the same with hidden 256 and batch 256.
//  * GRUCell: GRUCell(16, 64) on a batch of 32: vmap (LibTorch runs gru_cell member by member
//    inside vmap, see docs/nn.md) vs the loop.
//  * Conv: Conv2d(3, 8, 3) -> ReLU -> Conv2d(8, 8, 3) on 8 images 16x16: vmap vs the loop vs
//    one grouped convolution per layer by hand.
//  * Overhead: vmap of a function that returns its input, with the MLP64 parameters as the
//    mapped argument (plan, push the layer, wrap 6 parameters in a TensorDict, unwrap): vs the
//    raw functorch calls by hand (push, wrap 7 tensors, unwrap one, pop).
#include <ATen/functorch/BatchedTensorImpl.h>
#include <ATen/functorch/DynamicLayer.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <vector>

#include "td/core/tensordict.h"
#include "td/functional/vmap.h"
#include "td/nn/ensemble.h"
#include "td/nn/functional.h"

namespace {

namespace nn = torch::nn;
constexpr int kMembers = 10;

nn::Sequential Mlp(int64_t hidden) {
  return nn::Sequential(nn::Linear(16, hidden), nn::ReLU(), nn::Linear(hidden, hidden),
                        nn::ReLU(), nn::Linear(hidden, 4));
}

struct MlpFixture {
  MlpFixture(int64_t hidden, int64_t batch) : x(torch::randn({batch, 16})) {
    std::vector<std::shared_ptr<nn::Module>> ptrs;
    for (int i = 0; i < kMembers; ++i) {
      models.push_back(Mlp(hidden));
      ptrs.push_back(models.back().ptr());
    }
    stacked = td::nn::from_modules(ptrs).detach();
    for (int layer : {0, 2, 4}) {
      const std::string k = std::to_string(layer);
      weights.push_back(stacked.get({k, "weight"}));
      weights_t.push_back(weights.back().transpose(1, 2).contiguous());
      biases.push_back(stacked.get({k, "bias"}).unsqueeze(1));
    }
  }
  at::Tensor vmapped() {
    nn::Sequential& model = models[0];
    return td::vmap(
        [&](const at::Tensor& in, const td::TensorDict& p) {
          auto guard = td::nn::to_module(p, *model);
          return model->forward(in);
        },
        {td::kNone, 0})(x, stacked);
  }
  at::Tensor loop() {
    return td::nn::ensemble_map(stacked, *models[0], [&] { return models[0]->forward(x); });
  }
  // By hand on the stacked weights as Linear stores them ([E, out, in]), or transposed once
  // into [E, in, out] (a layout choice vmap cannot make: it runs the module's own forward; on
  // this machine's BLAS the transposed operand costs up to 2x in bmm).
  at::Tensor hand(bool pretransposed) const {
    at::Tensor h = x.unsqueeze(0).expand({kMembers, x.size(0), x.size(1)});
    for (size_t l = 0; l < weights.size(); ++l) {
      h = at::baddbmm(biases[l], h,
                      pretransposed ? weights_t[l] : weights[l].transpose(1, 2));
      if (l + 1 < weights.size()) h = at::relu(h);
    }
    return h;
  }
  std::vector<nn::Sequential> models;
  td::TensorDict stacked;
  at::Tensor x;
  std::vector<at::Tensor> weights, weights_t, biases;
};

// Registered first: it runs before the large cases, whose freed buffers leave glibc's heap
// trimming on every small allocation (5 us measured alone, 47 us after Mlp256).
void BM_Overhead_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  auto identity = td::vmap([](const at::Tensor& in, const td::TensorDict&) { return in; },
                           {0, 0});
  const at::Tensor xs = torch::randn({kMembers, 4});
  for (auto _ : state) benchmark::DoNotOptimize(identity(xs, f.stacked));
}
BENCHMARK(BM_Overhead_Ours)->Name("Overhead/ours");
void BM_Overhead_Hand(benchmark::State& state) {
  namespace ft = at::functorch;
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  std::vector<at::Tensor> leaves;
  for (const td::NestedKey& k :
       f.stacked.keys(td::KeysOptions().include_nested(true).leaves_only(true))) {
    leaves.push_back(f.stacked.get(k));
  }
  const at::Tensor xs = torch::randn({kMembers, 4});
  std::vector<at::Tensor> wrapped(leaves.size());
  for (auto _ : state) {
    const int64_t level = ft::initAndPushDynamicLayer(ft::TransformType::Vmap, kMembers,
                                                      ft::RandomnessType::Error);
    at::Tensor in = ft::addBatchDim(xs, 0, level);
    for (size_t i = 0; i < leaves.size(); ++i) wrapped[i] = ft::addBatchDim(leaves[i], 0, level);
    const ft::BatchedTensorImpl* b = ft::maybeGetBatchedImpl(in);
    benchmark::DoNotOptimize(b->value().movedim(b->bdim(), 0));
    ft::popDynamicLayerAndDeleteMetadata();
  }
}
BENCHMARK(BM_Overhead_Hand)->Name("Overhead/hand");

void BM_Mlp64_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  for (auto _ : state) benchmark::DoNotOptimize(f.vmapped());
}
BENCHMARK(BM_Mlp64_Ours)->Name("Mlp64/ours");
void BM_Mlp64_Loop(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  for (auto _ : state) benchmark::DoNotOptimize(f.loop());
}
BENCHMARK(BM_Mlp64_Loop)->Name("Mlp64/loop");
void BM_Mlp64_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  for (auto _ : state) benchmark::DoNotOptimize(f.hand(false));
}
BENCHMARK(BM_Mlp64_Hand)->Name("Mlp64/hand");
void BM_Mlp64_HandTransposed(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(64, 32);
  for (auto _ : state) benchmark::DoNotOptimize(f.hand(true));
}
BENCHMARK(BM_Mlp64_HandTransposed)->Name("Mlp64/hand_pretransposed");

void BM_Mlp256_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(256, 256);
  for (auto _ : state) benchmark::DoNotOptimize(f.vmapped());
}
BENCHMARK(BM_Mlp256_Ours)->Name("Mlp256/ours");
void BM_Mlp256_Loop(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(256, 256);
  for (auto _ : state) benchmark::DoNotOptimize(f.loop());
}
BENCHMARK(BM_Mlp256_Loop)->Name("Mlp256/loop");
void BM_Mlp256_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(256, 256);
  for (auto _ : state) benchmark::DoNotOptimize(f.hand(false));
}
BENCHMARK(BM_Mlp256_Hand)->Name("Mlp256/hand");
void BM_Mlp256_HandTransposed(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  MlpFixture f(256, 256);
  for (auto _ : state) benchmark::DoNotOptimize(f.hand(true));
}
BENCHMARK(BM_Mlp256_HandTransposed)->Name("Mlp256/hand_pretransposed");

struct GruFixture {
  GruFixture() : x(torch::randn({32, 16})) {
    std::vector<std::shared_ptr<nn::Module>> ptrs;
    for (int i = 0; i < kMembers; ++i) {
      cells.emplace_back(16, 64);
      ptrs.push_back(cells.back().ptr());
    }
    stacked = td::nn::from_modules(ptrs).detach();
  }
  std::vector<nn::GRUCell> cells;
  td::TensorDict stacked;
  at::Tensor x;
};

void BM_Gru_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  GruFixture f;
  const bool warn = td::vmap_fallback_warning();
  td::set_vmap_fallback_warning(false);
  for (auto _ : state) {
    benchmark::DoNotOptimize(td::vmap(
        [&](const at::Tensor& in, const td::TensorDict& p) {
          auto guard = td::nn::to_module(p, *f.cells[0]);
          return f.cells[0]->forward(in);
        },
        {td::kNone, 0})(f.x, f.stacked));
  }
  td::set_vmap_fallback_warning(warn);
}
BENCHMARK(BM_Gru_Ours)->Name("GRUCell/ours");
void BM_Gru_Loop(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  GruFixture f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        td::nn::ensemble_map(f.stacked, *f.cells[0], [&] { return f.cells[0]->forward(f.x); }));
  }
}
BENCHMARK(BM_Gru_Loop)->Name("GRUCell/loop");

struct ConvFixture {
  ConvFixture() : x(torch::randn({8, 3, 16, 16})) {
    std::vector<std::shared_ptr<nn::Module>> ptrs;
    for (int i = 0; i < kMembers; ++i) {
      nets.emplace_back(nn::Conv2d(3, 8, 3), nn::ReLU(), nn::Conv2d(8, 8, 3));
      ptrs.push_back(nets.back().ptr());
    }
    stacked = td::nn::from_modules(ptrs).detach();
    // grouped form: members' filters side by side
    w0 = stacked.get({"0", "weight"}).reshape({kMembers * 8, 3, 3, 3});
    b0 = stacked.get({"0", "bias"}).reshape({kMembers * 8});
    w2 = stacked.get({"2", "weight"}).reshape({kMembers * 8, 8, 3, 3});
    b2 = stacked.get({"2", "bias"}).reshape({kMembers * 8});
  }
  std::vector<nn::Sequential> nets;
  td::TensorDict stacked;
  at::Tensor x, w0, b0, w2, b2;
};

void BM_Conv_Ours(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ConvFixture f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(td::vmap(
        [&](const at::Tensor& in, const td::TensorDict& p) {
          auto guard = td::nn::to_module(p, *f.nets[0]);
          return f.nets[0]->forward(in);
        },
        {td::kNone, 0})(f.x, f.stacked));
  }
}
BENCHMARK(BM_Conv_Ours)->Name("Conv/ours");
void BM_Conv_Loop(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ConvFixture f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        td::nn::ensemble_map(f.stacked, *f.nets[0], [&] { return f.nets[0]->forward(f.x); }));
  }
}
BENCHMARK(BM_Conv_Loop)->Name("Conv/loop");
void BM_Conv_Hand(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  ConvFixture f;
  for (auto _ : state) {
    // Stride, padding and dilation as int lists: a bare 0 for padding also converts to the
    // string_view ("same"/"valid") overload.
    const std::vector<int64_t> one{1}, zero{0};
    at::Tensor h =
        at::conv2d(f.x.repeat({1, kMembers, 1, 1}), f.w0, f.b0, one, zero, one, kMembers);
    h = at::conv2d(at::relu(h), f.w2, f.b2, one, zero, one, kMembers);
    benchmark::DoNotOptimize(h.view({8, kMembers, 8, 12, 12}).transpose(0, 1));
  }
}
BENCHMARK(BM_Conv_Hand)->Name("Conv/hand");

}  // namespace
