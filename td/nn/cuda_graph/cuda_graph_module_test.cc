// td::nn::CudaGraphModule (NOTE [ What a CUDA graph replays ] in cuda_graph_module.h). The GPU
// cases skip, naming what they do not check, where no CUDA device is present; the others run on
// any CUDA LibTorch.
#include "td/nn/cuda_graph/cuda_graph_module.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "td/core/testing.h"
#include "td/nn/common.h"
#include "td/nn/sequence.h"

namespace {

using td::TensorDict;
using td::nn::CudaGraphModule;
using td::nn::CudaGraphOptions;
using td::nn::TensorDictModule;

#define TD_REQUIRE_CUDA(what)                                                             \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << what << " not checked"

TensorDictModule Policy() {
  torch::nn::Sequential mlp(torch::nn::Linear(4, 32), torch::nn::Tanh(), torch::nn::Linear(32, 2));
  TensorDictModule policy(mlp, {"obs"}, {"action"});
  policy->to(at::Device("cuda:0"));
  return policy;
}

TensorDict Batch(int64_t n = 8) {
  return TensorDict({{"obs", at::randn({n, 4}, at::Device("cuda:0"))}}, {n});
}

// Arguments are checked on any build.
TEST(CudaGraphModuleTest, RefusesBadOptions) {
  TensorDictModule id([](at::Tensor x) { return x; }, {"x"}, {"y"});
  TD_EXPECT_THROW_MSG(CudaGraphModule(id, CudaGraphOptions().warmup(0)), c10::ValueError,
                      {"warmup must be an integer greater than 0, got 0"});
  TD_EXPECT_THROW_MSG(CudaGraphModule(id, CudaGraphOptions().device(at::Device("cpu"))),
                      c10::ValueError, {"device must be a CUDA device, got cpu"});
  TD_EXPECT_THROW_MSG(CudaGraphModule(std::shared_ptr<td::nn::TensorDictModuleBase>()),
                      c10::ValueError, {"the module is null"});
}

// A CUDA LibTorch on a machine without a GPU: every call is the module's, eagerly (upstream).
TEST(CudaGraphModuleTest, WithoutADeviceEveryCallIsEager) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present: checked below";
  TensorDictModule twice([](at::Tensor x) { return x * 2; }, {"x"}, {"y"});
  CudaGraphModule graphed(twice);
  EXPECT_FALSE(graphed.has_cuda());
  for (int i = 0; i < 4; ++i) {
    TensorDict td({{"x", at::full({3}, i)}}, {3});
    EXPECT_TRUE(graphed(td).get("y").equal(at::full({3}, 2 * i)));
  }
  EXPECT_FALSE(graphed.captured());
}

// Call 1 warms up, call 2 captures (and returns the eager result), later calls replay: each
// equals the eager module's output for its own input, and a result is not overwritten by the
// next replay.
TEST(CudaGraphModuleTest, CapturesAfterWarmupAndReplays) {
  TD_REQUIRE_CUDA("capture and replay");
  TensorDictModule policy = Policy();
  CudaGraphModule graphed(policy);
  EXPECT_TRUE(graphed.has_cuda());
  std::vector<TensorDict> results;
  std::vector<at::Tensor> expected;
  for (int i = 0; i < 5; ++i) {
    TensorDict batch = Batch();
    {
      at::NoGradGuard no_grad;
      expected.push_back(policy(batch.clone()).get("action"));
      results.push_back(graphed(batch));
    }
    EXPECT_EQ(graphed.captured(), i >= 1) << "call " << i;
    EXPECT_TRUE(results.back().is_same(batch)) << "the module writes into its input";
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(at::allclose(results[i].get("action"), expected[i], 1e-5, 1e-6)) << "call " << i;
  }
  EXPECT_EQ(graphed.static_input().batch_size(), at::IntArrayRef({8}));
  // The parameters are read in place: an in-place update reaches the next replay.
  {
    at::NoGradGuard no_grad;
    for (at::Tensor p : policy->parameters()) p.add_(0.5);
    TensorDict batch = Batch();
    const at::Tensor want = policy(batch.clone()).get("action");
    EXPECT_TRUE(at::allclose(graphed(batch).get("action"), want, 1e-5, 1e-6));
  }
}

// After the capture, what the graph cannot replay is refused by name, before anything is copied.
TEST(CudaGraphModuleTest, RefusesWhatCannotBeReplayed) {
  TD_REQUIRE_CUDA("the replay checks (new key, changed shape, CPU leaf, dtype, grad)");
  TensorDictModule policy = Policy();
  CudaGraphModule graphed(policy);
  at::NoGradGuard no_grad;
  graphed(Batch());
  graphed(Batch());
  ASSERT_TRUE(graphed.captured());
  // The module's own out key, written by an earlier call, is no new key.
  TensorDict again = graphed(Batch());
  graphed(again);
  TensorDict extra = Batch();
  extra.set("other", at::zeros({8}, at::Device("cuda:0")));
  TD_EXPECT_THROW_MSG(graphed(extra), c10::ValueError, {"key 'other' is new"});
  TD_EXPECT_THROW_MSG(graphed(Batch(16)), c10::ValueError,
                      {"batch size torch.Size([16]) is not the captured torch.Size([8])"});
  TensorDict wide({{"obs", at::randn({8, 5}, at::Device("cuda:0"))}}, {8});
  TD_EXPECT_THROW_MSG(graphed(wide), c10::ValueError,
                      {"key 'obs' has shape torch.Size([8, 5]), captured with "
                       "torch.Size([8, 4])"});
  TD_EXPECT_THROW_MSG(graphed(Batch().cpu()), c10::ValueError,
                      {"key 'obs' is on cpu", "captured on cuda:0"});
  TD_EXPECT_THROW_MSG(graphed(Batch().to(at::kDouble)), c10::TypeError,
                      {"key 'obs' has dtype torch.float64, captured with torch.float32"});
  TD_EXPECT_THROW_MSG(graphed(TensorDict({}, {8})), td::KeyError,
                      {"key 'obs' was in the captured input and is missing"});
  // reset() captures anew, at the new batch size.
  graphed.reset();
  EXPECT_FALSE(graphed.captured());
  graphed(Batch(16));
  graphed(Batch(16));
  EXPECT_TRUE(graphed.captured());
  EXPECT_EQ(graphed(Batch(16)).get("action").sizes(), at::IntArrayRef({16, 2}));
}

// A CPU leaf is refused at the warm-up and capture calls too, and so is a leaf requiring grad.
TEST(CudaGraphModuleTest, RefusesCpuLeavesAndGradBeforeTheCapture) {
  TD_REQUIRE_CUDA("the warm-up checks");
  CudaGraphModule graphed(Policy());
  TD_EXPECT_THROW_MSG(graphed(Batch().cpu()), c10::ValueError,
                      {"(warm-up call): key 'obs' is on cpu"});
  TensorDict grad = Batch();
  grad.get("obs").requires_grad_();
  TD_EXPECT_THROW_MSG(graphed(grad), c10::Error, {"cannot be part of a graph", "key 'obs'"});
  EXPECT_FALSE(graphed.captured());
}

// A TensorDictSequential, and a module writing into a new TensorDict (OutputMode::kEmpty): the
// result is then a copy of the static output, not the input.
TEST(CudaGraphModuleTest, SequentialAndNewOutputs) {
  TD_REQUIRE_CUDA("TensorDictSequential under a CUDA graph");
  td::nn::TensorDictSequential seq(
      TensorDictModule(torch::nn::Linear(4, 8), {"obs"}, {"hidden"}),
      TensorDictModule(torch::nn::Linear(8, 2), {"hidden"}, {"action"}));
  seq->to(at::Device("cuda:0"));
  CudaGraphModule graphed(seq, CudaGraphOptions().warmup(3));
  at::NoGradGuard no_grad;
  for (int i = 0; i < 5; ++i) {
    TensorDict batch = Batch();
    const TensorDict want = seq(batch.clone());
    const TensorDict got = graphed(batch);
    EXPECT_EQ(graphed.captured(), i >= 2);
    EXPECT_TRUE(at::allclose(got.get("action"), want.get("action"), 1e-5, 1e-6)) << i;
    EXPECT_TRUE(at::allclose(got.get("hidden"), want.get("hidden"), 1e-5, 1e-6)) << i;
  }
  TensorDictModule fresh([](at::Tensor x) { return x.sum(-1); }, {"obs"}, {"s"},
                         td::nn::TensorDictModuleOptions().output(td::nn::OutputMode::kEmpty));
  CudaGraphModule g2(fresh);
  for (int i = 0; i < 4; ++i) {
    TensorDict batch = Batch();
    const TensorDict got = g2(batch);
    EXPECT_FALSE(got.is_same(batch)) << i;
    EXPECT_FALSE(got.contains("obs")) << i;
    EXPECT_TRUE(at::allclose(got.get("s"), batch.get("obs").sum(-1))) << i;
  }
}

// Host synchronisation cannot be captured: the capture is an error naming the module. Last in
// the file: a failed capture leaves the device usable, which the final eager call checks.
TEST(CudaGraphModuleTest, ZzCaptureFailureIsNamed) {
  TD_REQUIRE_CUDA("the capture error");
  TensorDictModule syncing([](at::Tensor x) { return x * x.sum().item<float>(); }, {"obs"},
                           {"y"});
  CudaGraphModule graphed(syncing);
  graphed(Batch());
  TD_EXPECT_THROW_MSG(graphed(Batch()), c10::Error,
                      {"CudaGraphModule: capturing", "failed", "the next call tries again"});
  EXPECT_FALSE(graphed.captured());
  const at::Tensor x = at::ones({3}, at::Device("cuda:0"));
  EXPECT_EQ((x * 2).sum().item<float>(), 6.0f);
}

}  // namespace
