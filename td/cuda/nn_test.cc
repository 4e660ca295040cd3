// td::nn on GPU parameters (docs/cuda.md): TensorDictModule, TensorDictSequential, a
// probabilistic chain, from_module / to_module, and a td::vmap ensemble of stacked CUDA
// parameters, each checked against the same module on the CPU. Every case skips where no CUDA
// device is present, naming what it does not check.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/cuda/cuda_testing.h"
#include "td/functional/vmap.h"
#include "td/nn/common.h"
#include "td/nn/distributions.h"
#include "td/nn/functional.h"
#include "td/nn/probabilistic.h"
#include "td/nn/sequence.h"

namespace {

using td::TensorDict;

const at::Device kCuda("cuda:0");

TensorDict Batch() { return TensorDict({{"obs", at::randn({16, 4})}}, {16}); }

void ExpectClose(const at::Tensor& gpu, const at::Tensor& cpu, const char* what) {
  EXPECT_TRUE(gpu.is_cuda()) << what;
  EXPECT_TRUE(at::allclose(gpu.cpu(), cpu, 1e-4, 1e-5)) << what;
}

TEST(CudaNnTest, TensorDictModuleAndSequential) {
  TD_REQUIRE_CUDA("TensorDictModule / TensorDictSequential on GPU parameters");
  td::nn::TensorDictSequential seq(
      td::nn::TensorDictModule(torch::nn::Linear(4, 8), {"obs"}, {"hidden"}),
      td::nn::TensorDictModule(torch::nn::Linear(8, 2), {"hidden"}, {"action"}));
  const TensorDict batch = Batch();
  const TensorDict on_cpu = seq(batch.clone());
  seq->to(kCuda);
  const TensorDict on_gpu = seq(batch.to(kCuda));
  ExpectClose(on_gpu.get("hidden"), on_cpu.get("hidden"), "hidden");
  ExpectClose(on_gpu.get("action"), on_cpu.get("action"), "action");
  // A module on the GPU given a CPU TensorDict: LibTorch's device error, not silent data.
  EXPECT_THROW(seq(batch.clone()), c10::Error);
}

TEST(CudaNnTest, ProbabilisticChain) {
  TD_REQUIRE_CUDA("a probabilistic module on GPU parameters");
  td::nn::ProbabilisticTensorDictSequential policy(
      td::nn::TensorDictModule(torch::nn::Linear(4, 8), {"obs"}, {"params"}),
      td::nn::TensorDictModule(td::nn::NormalParamExtractor(), {"params"}, {"loc", "scale"}),
      td::nn::ProbabilisticTensorDictModule(
          {"loc", "scale"}, {"action"}, td::nn::Normal::factory(),
          td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true)));
  const TensorDict batch = Batch();
  const TensorDict on_cpu = policy(batch.clone());
  policy->to(kCuda);
  const TensorDict on_gpu = policy(batch.to(kCuda));
  for (const char* key : {"loc", "scale", "action", "action_log_prob"}) {
    ExpectClose(on_gpu.get(key), on_cpu.get(key), key);
  }
}

// from_module gives the CUDA parameters themselves; to_module swaps CUDA tensors in and back.
TEST(CudaNnTest, FromModuleToModule) {
  TD_REQUIRE_CUDA("from_module / to_module with CUDA parameters");
  torch::nn::Linear lin(4, 2);
  lin->to(kCuda);
  const TensorDict params = td::nn::from_module(*lin);
  EXPECT_TRUE(params.get("weight").is_cuda());
  EXPECT_TRUE(params.get("weight").is_same(lin->weight));
  const TensorDict zeros = params.detach().clone().zero_();
  const at::Tensor x = at::randn({3, 4}, kCuda);
  {
    auto guard = td::nn::to_module(zeros, *lin);
    EXPECT_TRUE(lin->forward(x).eq(0).all().item<bool>());
  }
  EXPECT_TRUE(lin->weight.is_same(params.get("weight")));
}

// td::vmap over 8 stacked MLPs' CUDA parameters equals running each member on its own.
TEST(CudaNnTest, VmapEnsemble) {
  TD_REQUIRE_CUDA("a td::vmap ensemble of CUDA parameters");
  torch::nn::Sequential mlp(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
  mlp->to(kCuda);
  std::vector<TensorDict> members;
  for (int i = 0; i < 8; ++i) {
    torch::nn::Sequential m(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
    m->to(kCuda);
    members.push_back(td::nn::from_module(*m).detach().clone());
  }
  const TensorDict stacked = td::stack(members, 0);
  EXPECT_TRUE(stacked.get({"0", "weight"}).is_cuda());
  const at::Tensor x = at::randn({5, 4}, kCuda);
  auto fn = [&](const at::Tensor& input, const TensorDict& p) {
    auto guard = td::nn::to_module(p, *mlp);
    return mlp->forward(input);
  };
  const at::Tensor y = td::vmap(fn, {td::kNone, 0})(x, stacked);
  ASSERT_EQ(y.sizes(), at::IntArrayRef({8, 5, 2}));
  EXPECT_TRUE(y.is_cuda());
  for (int i = 0; i < 8; ++i) {
    EXPECT_TRUE(at::allclose(y[i], fn(x, members[i]), 1e-4, 1e-5)) << "member " << i;
  }
}

}  // namespace
