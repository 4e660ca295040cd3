// td/parallel vs the same work written by hand with plain LibTorch, in the same run
// (`bazel run -c opt //benchmarks:parallel`; see docs/parallel.md for the figures):
//  - ApplyExp100x1M: apply(exp) over 100 leaves of 1M floats. Baselines: `hand` (a serial loop of
//    Tensor::exp, LibTorch's default intra-op threads), `serial` (our apply with
//    td::parallel::set_num_threads(1)) and
//    `hand_tbb` (a hand-written tbb::parallel_for over the leaves).
//  - ApplySmall10x64: apply(exp) over 10 leaves of 64 floats, where the threshold keeps ours
//    serial. Baselines: `serial_td` (the same TensorDict built by a plain recursive loop over
//    the entries — what apply did before it could go parallel), `hand` (a loop over a vector).
//  - Map1M: td::parallel::map over a 1M-row TensorDict (images 1M x 64 floats, labels 1M)
//    with a real-work fn (normalise, a 64x64 projection, a tanh, a row sum), 2 workers.
//    Baselines: `one_worker` (the same map with num_workers 1) and `hand` (a serial loop over
//    the same chunks with plain tensors, then at::cat).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <oneapi/tbb/parallel_for.h>

#include <string>
#include <vector>

#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/executor/executor.h"
#include "td/parallel/map.h"

namespace {

td::TensorDict MakeLeaves(int n, int64_t rows, int64_t cols) {
  at::manual_seed(0);
  td::TensorDict t({}, {rows});
  for (int i = 0; i < n; ++i) t.set("leaf" + std::to_string(i), at::randn({rows, cols}));
  return t;
}

std::vector<at::Tensor> Leaves(const td::TensorDict& t) {
  std::vector<at::Tensor> out;
  for (const td::Value& v : t.values()) out.push_back(v.tensor());
  return out;
}

at::Tensor Exp(const at::Tensor& x) { return x.exp(); }

// ---- apply over 100 leaves of 1M floats ------------------------------------------------------

const td::TensorDict& Big() {
  static const auto* t = new td::TensorDict(MakeLeaves(100, 1000, 1000));
  return *t;
}

void BM_ApplyBig_Ours(benchmark::State& state) {
  const td::TensorDict& t = Big();
  for (auto _ : state) benchmark::DoNotOptimize(t.apply(Exp));
}
BENCHMARK(BM_ApplyBig_Ours)->Name("ApplyExp100x1M/ours")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ApplyBig_Serial(benchmark::State& state) {
  const td::TensorDict& t = Big();
  td::parallel::set_num_threads(1);  // every td loop serial
  for (auto _ : state) benchmark::DoNotOptimize(t.apply(Exp));
  td::parallel::set_num_threads(0);
}
BENCHMARK(BM_ApplyBig_Serial)->Name("ApplyExp100x1M/serial")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ApplyBig_Hand(benchmark::State& state) {
  const std::vector<at::Tensor> leaves = Leaves(Big());
  for (auto _ : state) {
    std::vector<at::Tensor> out;
    out.reserve(leaves.size());
    for (const at::Tensor& x : leaves) out.push_back(x.exp());
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ApplyBig_Hand)->Name("ApplyExp100x1M/hand")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ApplyBig_HandTbb(benchmark::State& state) {
  const std::vector<at::Tensor> leaves = Leaves(Big());
  for (auto _ : state) {
    std::vector<at::Tensor> out(leaves.size());
    tbb::parallel_for(size_t{0}, leaves.size(), [&](size_t i) { out[i] = leaves[i].exp(); });
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ApplyBig_HandTbb)->Name("ApplyExp100x1M/hand_tbb")->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- apply over 10 leaves of 64 floats ---------------------------------------------------------

const td::TensorDict& Small() {
  static const auto* t = new td::TensorDict(MakeLeaves(10, 64, 1));
  return *t;
}

void BM_ApplySmall_Ours(benchmark::State& state) {
  const td::TensorDict& t = Small();
  for (auto _ : state) benchmark::DoNotOptimize(t.apply(Exp));
}
BENCHMARK(BM_ApplySmall_Ours)->Name("ApplySmall10x64/ours");

// The serial apply as a plain recursive loop over the storage (no plan, no executor).
td::TensorDict SerialApply(const td::TensorDict& src) {
  td::TensorDict out(td::MakeDenseStorage(src.batch_size().vec(), src.device()));
  const td::Storage& s = src.storage();
  for (const std::string& k : s.keys()) {
    std::optional<td::Value> v = s.get(k);
    if (v->is_tensor()) {
      out.set(k, v->tensor().exp());
    } else if (v->is_tensordict()) {
      out.set(k, SerialApply(v->tensordict()));
    } else {
      out.set(k, *v);
    }
  }
  return out;
}

void BM_ApplySmall_SerialTd(benchmark::State& state) {
  const td::TensorDict& t = Small();
  for (auto _ : state) benchmark::DoNotOptimize(SerialApply(t));
}
BENCHMARK(BM_ApplySmall_SerialTd)->Name("ApplySmall10x64/serial_td");

void BM_ApplySmall_Hand(benchmark::State& state) {
  const std::vector<at::Tensor> leaves = Leaves(Small());
  for (auto _ : state) {
    std::vector<at::Tensor> out;
    out.reserve(leaves.size());
    for (const at::Tensor& x : leaves) out.push_back(x.exp());
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_ApplySmall_Hand)->Name("ApplySmall10x64/hand");

// ---- map over a 1M-row TensorDict ------------------------------------------------------------

constexpr int64_t kRows = 1000000;
constexpr int64_t kChunk = 50000;

const td::TensorDict& Dataset() {
  static const auto* t = [] {
    at::manual_seed(0);
    return new td::TensorDict({{"images", at::randn({kRows, 64})},
                               {"labels", at::randint(0, 100, {kRows})}},
                              {kRows});
  }();
  return *t;
}

const at::Tensor& Projection() {
  static const auto* w = new at::Tensor(at::randn({64, 64}) / 8);
  return *w;
}

// The per-row work: normalise, project, squash, summarise.
std::pair<at::Tensor, at::Tensor> Work(const at::Tensor& images, const at::Tensor& labels) {
  at::Tensor x = (images - images.mean(-1, true)) / (images.std(-1, true, true) + 1e-5);
  at::Tensor h = at::tanh(at::matmul(x, Projection()));
  return {h.sum(-1), at::floor_divide(labels, 10)};
}

td::TensorDict MapFn(const td::TensorDict& chunk) {
  auto [score, cluster] = Work(chunk.get("images"), chunk.get("labels"));
  return td::TensorDict({{"score", score}, {"cluster", cluster}}, chunk.batch_size());
}

void BM_Map_Ours(benchmark::State& state) {
  const td::TensorDict& t = Dataset();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        td::parallel::map(t, MapFn, td::parallel::MapOptions().num_workers(2).chunksize(kChunk)));
  }
}
BENCHMARK(BM_Map_Ours)->Name("Map1M/ours")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Map_OneWorker(benchmark::State& state) {
  const td::TensorDict& t = Dataset();
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        td::parallel::map(t, MapFn, td::parallel::MapOptions().num_workers(1).chunksize(kChunk)));
  }
}
BENCHMARK(BM_Map_OneWorker)->Name("Map1M/one_worker")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Map_Hand(benchmark::State& state) {
  const at::Tensor images = Dataset().get("images");
  const at::Tensor labels = Dataset().get("labels");
  for (auto _ : state) {
    std::vector<at::Tensor> scores, clusters;
    for (int64_t start = 0; start < kRows; start += kChunk) {
      auto [s, c] = Work(images.narrow(0, start, kChunk), labels.narrow(0, start, kChunk));
      scores.push_back(s);
      clusters.push_back(c);
    }
    benchmark::DoNotOptimize(at::cat(scores));
    benchmark::DoNotOptimize(at::cat(clusters));
  }
}
BENCHMARK(BM_Map_Hand)->Name("Map1M/hand")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
