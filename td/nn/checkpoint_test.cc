// The training-loop recipes of docs/memmap.md and docs/porting.md, run as written there:
// resuming training from a memmap checkpoint (the values copied into the model's own parameters,
// which stay trainable and keep their optimizer), and the soft target update under NoGradGuard
// (what lerp_ does to leaves that require grad without it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "td/backends/memmap/test_util.h"
#include "td/core/tensordict.h"
#include "td/nn/functional.h"

namespace td {
namespace {

using testing_util::FreshDir;

torch::nn::Sequential MakeModel() {
  return torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::Linear(4, 3));
}

int64_t CountTrainable(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const at::Tensor& p : model.parameters()) n += p.requires_grad() && p.is_leaf() ? 1 : 0;
  return n;
}

// A checkpoint of a trained model, and a fresh model (other initial values) to resume into.
struct Saved {
  std::string dir;
  TensorDict values;  // a copy of what the checkpoint holds
};

Saved SaveCheckpoint(const std::string& name) {
  torch::manual_seed(1);
  torch::nn::Sequential trained = MakeModel();
  Saved s{FreshDir(name) + "/ckpt", TensorDict()};
  TensorDict params = nn::from_module(*trained);
  params.memmap(s.dir);
  s.values = params.detach().clone();
  return s;
}

// docs/memmap.md, "Resuming training from a checkpoint": the recipe's code.
TEST(CheckpointTest, ResumeKeepsEveryParameterTrainable) {
  const Saved saved = SaveCheckpoint("resume");
  torch::manual_seed(2);
  torch::nn::Sequential model = MakeModel();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-2));
  const std::vector<at::Tensor> before_resume = model->parameters();

  // -- the recipe --
  td::TensorDict ckpt = td::TensorDict::load_memmap(saved.dir);
  td::nn::swap_into_module(ckpt, *model, td::nn::ToModuleOptions().inplace(true));
  // --

  // The checkpoint's values, in the module's own tensors (the optimizer's), all trainable.
  const std::vector<at::Tensor> params = model->parameters();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(CountTrainable(*model), 4);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(params[i].is_same(before_resume[i])) << "parameter " << i << " was replaced";
  }
  EXPECT_TRUE(allclose(nn::from_module(*model).detach(), saved.values));

  // One optimizer step changes every parameter, and not the checkpoint's files.
  const TensorDict resumed = nn::from_module(*model).detach().clone();
  at::Tensor loss = model->forward(torch::randn({8, 3})).pow(2).sum();
  adam.zero_grad();
  loss.backward();
  adam.step();
  const TensorDict stepped = nn::from_module(*model).detach();
  for (const NestedKey& k : resumed.keys(KeysOptions().include_nested(true).leaves_only(true))) {
    EXPECT_FALSE(at::allclose(stepped.get(k), resumed.get(k))) << k << " did not change";
  }
  EXPECT_TRUE(allclose(TensorDict::load_memmap(saved.dir), saved.values));
}

// The trap the recipe avoids: the default swap puts the checkpoint's own tensors (memory-mapped,
// not requiring grad) in the module; the values are right and nothing trains.
TEST(CheckpointTest, PlainSwapLeavesNothingTrainable) {
  const Saved saved = SaveCheckpoint("swap");
  torch::nn::Sequential model = MakeModel();
  nn::swap_into_module(TensorDict::load_memmap(saved.dir), *model);
  EXPECT_TRUE(allclose(nn::from_module(*model).detach(), saved.values));
  EXPECT_EQ(CountTrainable(*model), 0);
}

// docs/porting.md: the soft target update under NoGradGuard; without it lerp_ either throws
// (target leaves that require grad) or makes the target require grad (leaves that do not).
TEST(CheckpointTest, SoftUpdateUnderNoGradGuard) {
  torch::nn::Sequential online_net = MakeModel(), target_net = MakeModel();
  TensorDict online = nn::from_module(*online_net);
  TensorDict target = nn::from_module(*target_net);
  const TensorDict start = target.detach().clone();
  {
    torch::NoGradGuard no_grad;
    target.lerp_(online, 0.25);
  }
  EXPECT_TRUE(allclose(target.detach(), start.lerp(online.detach(), 0.25)));
  EXPECT_EQ(CountTrainable(*target_net), 4);

  // No guard, target parameters: LibTorch refuses the in-place write, nothing is written.
  EXPECT_THROW(target.lerp_(online, 0.25), c10::Error);
  EXPECT_TRUE(allclose(target.detach(), start.lerp(online.detach(), 0.25)));

  // No guard, a detached target: it silently starts requiring grad, through online's graph.
  TensorDict detached = target.detach().clone();
  ASSERT_FALSE(detached.requires_grad());
  detached.lerp_(online, 0.25);
  EXPECT_TRUE(detached.requires_grad());
}

}  // namespace
}  // namespace td
