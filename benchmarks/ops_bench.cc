// Tensor-like operations on a 10-key TensorDict with batch [64] vs the same ATen calls written by
// hand over the 10 tensors (a vector of (name, tensor) pairs in, a new one out, as a hand-rolled
// dict of tensors would do): index({3}), index({Slice(2, 40)}), a bool mask, a long index tensor,
// reshape, unsqueeze, clone; apply(x + 1) over 100 leaves; stack and cat of 100 TensorDicts of
// 10 keys. Run: tools/bazelw run -c opt //benchmarks:ops
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <string>
#include <utility>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"

namespace {

using at::indexing::Slice;
using Dict = std::vector<std::pair<std::string, at::Tensor>>;

constexpr int64_t kBatch = 64;

// 10 entries of batch [64] with varied feature shapes and dtypes.
Dict MakeDict(int seed) {
  at::manual_seed(seed);
  return {{"obs", at::randn({kBatch, 32})},
          {"next_obs", at::randn({kBatch, 32})},
          {"action", at::randn({kBatch, 4})},
          {"reward", at::randn({kBatch, 1})},
          {"done", at::rand({kBatch, 1}) > 0.9},
          {"value", at::randn({kBatch})},
          {"log_prob", at::randn({kBatch})},
          {"advantage", at::randn({kBatch})},
          {"step", at::randint(1000, {kBatch}, at::kLong)},
          {"hidden", at::randn({kBatch, 2, 16})}};
}

td::TensorDict ToTd(const Dict& d) {
  td::TensorDict t({}, {kBatch});
  for (const auto& [k, v] : d) t.set(k, v);
  return t;
}

const Dict& Base() {
  static const auto* d = new Dict(MakeDict(0));
  return *d;
}

const at::Tensor& Mask() {
  static const auto* m = new at::Tensor(at::rand({kBatch}) > 0.5);
  return *m;
}

const at::Tensor& LongIndex() {
  static const auto* i = new at::Tensor(at::randint(kBatch, {32}, at::kLong));
  return *i;
}

// Runs `fn` over every tensor of `d` into a new dict: the hand-written baseline.
template <class Fn>
Dict HandMap(const Dict& d, Fn&& fn) {
  Dict out;
  out.reserve(d.size());
  for (const auto& [k, v] : d) out.emplace_back(k, fn(v));
  return out;
}

template <class OursFn>
void Ours(benchmark::State& state, OursFn fn) {
  td::TensorDict t = ToTd(Base());
  for (auto _ : state) {
    td::TensorDict r = fn(t);
    benchmark::DoNotOptimize(r);
  }
}

template <class HandFn>
void Hand(benchmark::State& state, HandFn fn) {
  const Dict& d = Base();
  for (auto _ : state) {
    Dict r = HandMap(d, fn);
    benchmark::DoNotOptimize(r);
  }
}

const auto kIndexIntOurs = [](const td::TensorDict& t) { return t.index({3}); };
const auto kIndexIntHand = [](const at::Tensor& x) { return x.index({3}); };
const auto kIndexSliceOurs = [](const td::TensorDict& t) { return t.index({Slice(2, 40)}); };
const auto kIndexSliceHand = [](const at::Tensor& x) { return x.index({Slice(2, 40)}); };
const auto kIndexMaskOurs = [](const td::TensorDict& t) { return t.index({Mask()}); };
const auto kIndexMaskHand = [](const at::Tensor& x) { return x.index({Mask()}); };
const auto kIndexLongOurs = [](const td::TensorDict& t) { return t.index({LongIndex()}); };
const auto kIndexLongHand = [](const at::Tensor& x) { return x.index({LongIndex()}); };
const auto kReshapeOurs = [](const td::TensorDict& t) { return t.reshape({8, 8}); };
const auto kReshapeHand = [](const at::Tensor& x) {
  std::vector<int64_t> s = {8, 8};
  s.insert(s.end(), x.sizes().begin() + 1, x.sizes().end());
  return x.reshape(s);
};
const auto kUnsqueezeOurs = [](const td::TensorDict& t) { return t.unsqueeze(0); };
const auto kUnsqueezeHand = [](const at::Tensor& x) { return x.unsqueeze(0); };
const auto kCloneOurs = [](const td::TensorDict& t) { return t.clone(); };
const auto kCloneHand = [](const at::Tensor& x) { return x.clone(); };

BENCHMARK_CAPTURE(Ours, IndexInt, kIndexIntOurs)->Name("IndexInt/ours");
BENCHMARK_CAPTURE(Hand, IndexInt, kIndexIntHand)->Name("IndexInt/hand");
BENCHMARK_CAPTURE(Ours, IndexSlice, kIndexSliceOurs)->Name("IndexSlice/ours");
BENCHMARK_CAPTURE(Hand, IndexSlice, kIndexSliceHand)->Name("IndexSlice/hand");
BENCHMARK_CAPTURE(Ours, IndexMask, kIndexMaskOurs)->Name("IndexMask/ours");
BENCHMARK_CAPTURE(Hand, IndexMask, kIndexMaskHand)->Name("IndexMask/hand");
BENCHMARK_CAPTURE(Ours, IndexLong, kIndexLongOurs)->Name("IndexLong/ours");
BENCHMARK_CAPTURE(Hand, IndexLong, kIndexLongHand)->Name("IndexLong/hand");
BENCHMARK_CAPTURE(Ours, Reshape, kReshapeOurs)->Name("Reshape/ours");
BENCHMARK_CAPTURE(Hand, Reshape, kReshapeHand)->Name("Reshape/hand");
BENCHMARK_CAPTURE(Ours, Unsqueeze, kUnsqueezeOurs)->Name("Unsqueeze/ours");
BENCHMARK_CAPTURE(Hand, Unsqueeze, kUnsqueezeHand)->Name("Unsqueeze/hand");
BENCHMARK_CAPTURE(Ours, Clone, kCloneOurs)->Name("Clone/ours");
BENCHMARK_CAPTURE(Hand, Clone, kCloneHand)->Name("Clone/hand");

// ---- apply(x + 1) over 100 leaves -----------------------------------------------------------

const Dict& Hundred() {
  static const auto* d = [] {
    auto* out = new Dict;
    for (int i = 0; i < 100; ++i) out->emplace_back("leaf" + std::to_string(i), at::randn({kBatch, 8}));
    return out;
  }();
  return *d;
}

void BM_Apply100_Ours(benchmark::State& state) {
  td::TensorDict t = ToTd(Hundred());
  for (auto _ : state) {
    td::TensorDict r = t.apply([](const at::Tensor& x) { return x + 1; });
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Apply100_Ours)->Name("Apply100/ours");

void BM_Apply100_Hand(benchmark::State& state) {
  const Dict& d = Hundred();
  for (auto _ : state) {
    Dict r = HandMap(d, [](const at::Tensor& x) { return x + 1; });
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Apply100_Hand)->Name("Apply100/hand");

// ---- stack / cat of 100 TensorDicts of 10 keys ----------------------------------------------

const std::vector<Dict>& ManyDicts() {
  static const auto* v = [] {
    auto* out = new std::vector<Dict>;
    for (int i = 0; i < 100; ++i) out->push_back(MakeDict(i));
    return out;
  }();
  return *v;
}

std::vector<td::TensorDict> ManyTds() {
  std::vector<td::TensorDict> tds;
  for (const Dict& d : ManyDicts()) tds.push_back(ToTd(d));
  return tds;
}

// The hand-written stack/cat: for each key, collect its tensor from every dict (looked up by
// name, as with any dict) and call at::stack / at::cat.
template <class Op>
Dict HandCombine(const std::vector<Dict>& dicts, Op&& op) {
  Dict out;
  out.reserve(dicts[0].size());
  std::vector<at::Tensor> parts;
  for (const auto& [k, v0] : dicts[0]) {
    parts.clear();
    parts.reserve(dicts.size());
    for (const Dict& d : dicts) {
      for (const auto& [k2, v] : d) {
        if (k2 == k) {
          parts.push_back(v);
          break;
        }
      }
    }
    out.emplace_back(k, op(parts));
  }
  return out;
}

void BM_Stack100_Ours(benchmark::State& state) {
  std::vector<td::TensorDict> tds = ManyTds();
  for (auto _ : state) {
    td::TensorDict r = td::stack(tds, 0);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Stack100_Ours)->Name("Stack100/ours");

void BM_Stack100_Hand(benchmark::State& state) {
  const std::vector<Dict>& dicts = ManyDicts();
  for (auto _ : state) {
    Dict r = HandCombine(dicts, [](const std::vector<at::Tensor>& p) { return at::stack(p, 0); });
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Stack100_Hand)->Name("Stack100/hand");

void BM_Cat100_Ours(benchmark::State& state) {
  std::vector<td::TensorDict> tds = ManyTds();
  for (auto _ : state) {
    td::TensorDict r = td::cat(tds, 0);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Cat100_Ours)->Name("Cat100/ours");

void BM_Cat100_Hand(benchmark::State& state) {
  const std::vector<Dict>& dicts = ManyDicts();
  for (auto _ : state) {
    Dict r = HandCombine(dicts, [](const std::vector<at::Tensor>& p) { return at::cat(p, 0); });
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Cat100_Hand)->Name("Cat100/hand");

}  // namespace
