// td::nn::AotiModule against the same work without it, in the same run (LibTorch 2.6 and later;
// //benchmarks:aoti exists only there, td/compat/aoti.bzl). The model is the MLP policy of
// td/nn/aoti/testdata/export_policies.py (obs [B, 6] and ("next", "hidden") [B, 10] -> action
// [B, 3], 16 -> 32 -> 32 -> 3 with tanh), exported with a dynamic batch:
//  * Mlp64, Mlp4096: AotiModule forward on a TensorDict of batch B, vs
//    - hand: torch::inductor::AOTIModelPackageLoader::run on the same tensors (target: 1.05x);
//    - script: the same MLP as TorchScript (torch.jit.script in the same script) through
//      td::nn::script_module on the same TensorDict.
// The packages are //td/nn/aoti:exported's, read from the runfiles (`bazel run` starts there).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/script.h>

#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/aoti/aoti_module.h"
#include "td/nn/script_module.h"

namespace {

const std::string& Dir() {
  static const std::string dir = "td/nn/aoti/exported/";
  return dir;
}

td::TensorDict Batch(int64_t b) {
  return td::TensorDict({{"obs", at::randn({b, 6})}, {{"next", "hidden"}, at::randn({b, 10})}},
                        {b});
}

void Ours(benchmark::State& state, int64_t b) {
  c10::InferenceMode guard;
  td::nn::AotiModule policy(Dir() + "policy.pt2");
  td::TensorDict data = Batch(b);
  for (auto _ : state) benchmark::DoNotOptimize(policy(data));
}

void Hand(benchmark::State& state, int64_t b) {
  c10::InferenceMode guard;
  torch::inductor::AOTIModelPackageLoader loader(Dir() + "policy.pt2");
  td::TensorDict data = Batch(b);
  const std::vector<at::Tensor> inputs{data.get("obs"), data.get({"next", "hidden"})};
  for (auto _ : state) benchmark::DoNotOptimize(loader.run(inputs));
}

void Script(benchmark::State& state, int64_t b) {
  c10::InferenceMode guard;
  td::nn::TensorDictModule policy = td::nn::load_script_module(
      Dir() + "policy_script.pt", {"obs", {"next", "hidden"}}, {"action"});
  td::TensorDict data = Batch(b);
  for (auto _ : state) benchmark::DoNotOptimize(policy(data));
}

BENCHMARK_CAPTURE(Ours, 64, 64)->Name("Mlp64/ours");
BENCHMARK_CAPTURE(Hand, 64, 64)->Name("Mlp64/hand");
BENCHMARK_CAPTURE(Script, 64, 64)->Name("Mlp64/script");
BENCHMARK_CAPTURE(Ours, 4096, 4096)->Name("Mlp4096/ours");
BENCHMARK_CAPTURE(Hand, 4096, 4096)->Name("Mlp4096/hand");
BENCHMARK_CAPTURE(Script, 4096, 4096)->Name("Mlp4096/script");

}  // namespace
