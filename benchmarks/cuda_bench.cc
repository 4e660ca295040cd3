// GPU benchmarks (docs/cuda.md, "Measured"): each `<Case>/ours` against the same work by hand in
// plain LibTorch, same run, timed with CUDA events on the current stream (Google Benchmark's
// manual time), ratios printed by ratio_main.cc. Built only with -DTENSORDICT_CUDA=ON
// -DTENSORDICT_CUDA_BENCHMARK=ON (CMakeLists.txt); tools/device/cuda_check.sh runs it.
//   H2D        100 leaves of [4096] floats to cuda:0: consolidated and pinned, one copy (ours)
//              vs 100 pinned per-leaf copies (per_leaf) vs one raw pinned buffer (raw)
//   Policy     an MLP policy, batch 64: td::nn::CudaGraphModule replays (ours) vs eager
//   Vmap       td::vmap over 32 small MLPs' stacked parameters (ours) vs a loop over them
//   Apply      td.apply(x * 2) over 100 CUDA leaves (ours) vs a loop over the tensors
//   To         td.to(cuda:0) of 100 separate pinned leaves (ours) vs a loop over the tensors
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <benchmark/benchmark.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <string>
#include <vector>

#include "td/consolidate/consolidate.h"
#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/functional/vmap.h"
#include "td/nn/common.h"
#include "td/nn/cuda_graph/cuda_graph_module.h"
#include "td/nn/functional.h"

namespace {

const at::Device kCuda("cuda:0");
constexpr int kLeaves = 100;

// Times `fn` per iteration with two CUDA events on the current stream.
void Timed(benchmark::State& state, const std::function<void()>& fn) {
  fn();  // warm the caching allocator
  for (auto _ : state) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    const auto stream = c10::cuda::getCurrentCUDAStream();
    start.record(stream);
    fn();
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(start.elapsed_time(stop) / 1000.0);
  }
}

std::vector<at::Tensor> Leaves(bool pinned) {
  std::vector<at::Tensor> leaves;
  for (int i = 0; i < kLeaves; ++i) {
    at::Tensor t = at::randn({4096});
    leaves.push_back(pinned ? t.pin_memory() : t);
  }
  return leaves;
}

td::TensorDict Dict(const std::vector<at::Tensor>& leaves) {
  td::TensorDict d({}, {});
  for (size_t i = 0; i < leaves.size(); ++i) d.set("x" + std::to_string(i), leaves[i]);
  return d;
}

void H2DOurs(benchmark::State& state) {
  const td::TensorDict c =
      td::consolidate(Dict(Leaves(false)), td::ConsolidateOptions().pin_memory(true));
  Timed(state, [&] { benchmark::DoNotOptimize(c.to(kCuda, /*non_blocking=*/true)); });
}
void H2DPerLeaf(benchmark::State& state) {
  const std::vector<at::Tensor> leaves = Leaves(true);
  Timed(state, [&] {
    for (const at::Tensor& t : leaves) benchmark::DoNotOptimize(t.to(kCuda, true));
  });
}
void H2DRaw(benchmark::State& state) {
  const at::Tensor raw = at::randn({kLeaves * 4096}).pin_memory();
  Timed(state, [&] { benchmark::DoNotOptimize(raw.to(kCuda, true)); });
}

torch::nn::Sequential Mlp(int64_t in, int64_t hidden, int64_t out) {
  torch::nn::Sequential m(torch::nn::Linear(in, hidden), torch::nn::Tanh(),
                          torch::nn::Linear(hidden, hidden), torch::nn::Tanh(),
                          torch::nn::Linear(hidden, out));
  m->to(kCuda);
  return m;
}

void PolicyOurs(benchmark::State& state) {
  at::NoGradGuard no_grad;
  td::nn::TensorDictModule policy(Mlp(32, 256, 8), {"obs"}, {"action"});
  td::nn::CudaGraphModule graphed(policy);
  const td::TensorDict batch({{"obs", at::randn({64, 32}, kCuda)}}, {64});
  graphed(batch);
  graphed(batch);  // captured
  Timed(state, [&] { benchmark::DoNotOptimize(graphed(batch)); });
}
void PolicyEager(benchmark::State& state) {
  at::NoGradGuard no_grad;
  td::nn::TensorDictModule policy(Mlp(32, 256, 8), {"obs"}, {"action"});
  const td::TensorDict batch({{"obs", at::randn({64, 32}, kCuda)}}, {64});
  Timed(state, [&] { benchmark::DoNotOptimize(policy(batch)); });
}

struct Ensemble {
  torch::nn::Sequential mlp = Mlp(8, 32, 4);
  std::vector<td::TensorDict> members;
  td::TensorDict stacked;
  at::Tensor x = at::randn({16, 8}, kCuda);
  Ensemble() {
    for (int i = 0; i < 32; ++i) members.push_back(td::nn::from_module(*Mlp(8, 32, 4)).detach());
    stacked = td::stack(members, 0);
  }
  at::Tensor Run(const at::Tensor& input, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, *mlp);
    return mlp->forward(input);
  }
};

void VmapOurs(benchmark::State& state) {
  at::NoGradGuard no_grad;
  Ensemble e;
  auto fn = [&](const at::Tensor& x, const td::TensorDict& p) { return e.Run(x, p); };
  Timed(state, [&] { benchmark::DoNotOptimize(td::vmap(fn, {td::kNone, 0})(e.x, e.stacked)); });
}
void VmapLoop(benchmark::State& state) {
  at::NoGradGuard no_grad;
  Ensemble e;
  Timed(state, [&] {
    for (const td::TensorDict& p : e.members) benchmark::DoNotOptimize(e.Run(e.x, p));
  });
}

void ApplyOurs(benchmark::State& state) {
  const td::TensorDict d = Dict(Leaves(false)).to(kCuda);
  Timed(state, [&] {
    benchmark::DoNotOptimize(d.apply([](const at::Tensor& t) { return t * 2; }));
  });
}
void ApplyHand(benchmark::State& state) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& t : Leaves(false)) leaves.push_back(t.to(kCuda));
  Timed(state, [&] {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : leaves) out.push_back(t * 2);
    benchmark::DoNotOptimize(out);
  });
}

void ToOurs(benchmark::State& state) {
  const td::TensorDict d = Dict(Leaves(true));
  Timed(state, [&] { benchmark::DoNotOptimize(d.to(kCuda, /*non_blocking=*/true)); });
}
void ToHand(benchmark::State& state) {
  const std::vector<at::Tensor> leaves = Leaves(true);
  Timed(state, [&] {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : leaves) out.push_back(t.to(kCuda, true));
    benchmark::DoNotOptimize(out);
  });
}

#define TD_CUDA_BENCH(fn, name) BENCHMARK(fn)->Name(name)->UseManualTime()
TD_CUDA_BENCH(H2DOurs, "H2D/ours");
TD_CUDA_BENCH(H2DPerLeaf, "H2D/per_leaf");
TD_CUDA_BENCH(H2DRaw, "H2D/raw");
TD_CUDA_BENCH(PolicyOurs, "Policy/ours");
TD_CUDA_BENCH(PolicyEager, "Policy/eager");
TD_CUDA_BENCH(VmapOurs, "Vmap/ours");
TD_CUDA_BENCH(VmapLoop, "Vmap/loop");
TD_CUDA_BENCH(ApplyOurs, "Apply/ours");
TD_CUDA_BENCH(ApplyHand, "Apply/hand");
TD_CUDA_BENCH(ToOurs, "To/ours");
TD_CUDA_BENCH(ToHand, "To/hand");

}  // namespace
