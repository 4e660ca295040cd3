// Lazy backends vs the same work written by hand with plain LibTorch, in the same run:
//  * LazyStackGet: get() of one key of a lazy stack of 100 TensorDicts x 10 keys (the stack built
//    once) vs at::stack of the 100 member tensors of that key (collected once);
//  * LazyStackBuildGet: building the lazy stack of the 100 TensorDicts AND reading one key, vs
//    the same at::stack;
//  * IndexViewGet (slice / integer / mask): get() through an index view vs indexing the source
//    tensor by hand with the same index;
//  * PermuteViewGet: get() through a permute view vs Tensor::permute;
//  * LazyStackIndex: indexing a lazy stack along the stack dim (returns the member) vs indexing
//    the stacked tensor of one key by hand.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/core/tensordict.h"

namespace {

using at::indexing::Slice;

constexpr int kMembers = 100;
constexpr int kKeys = 10;

const std::vector<std::string>& Keys() {
  static const auto* keys = [] {
    auto* k = new std::vector<std::string>;
    for (int i = 0; i < kKeys; ++i) k->push_back("key" + std::to_string(i));
    return k;
  }();
  return *keys;
}

// 100 TensorDicts of batch size [32], 10 keys of shape [32, 8].
const std::vector<td::TensorDict>& Members() {
  static const auto* members = [] {
    auto* m = new std::vector<td::TensorDict>;
    for (int i = 0; i < kMembers; ++i) {
      td::TensorDict t({}, {32});
      for (const std::string& k : Keys()) t.set(k, at::randn({32, 8}));
      m->push_back(t);
    }
    return m;
  }();
  return *members;
}

std::vector<at::Tensor> MemberTensors(const std::string& key) {
  std::vector<at::Tensor> out;
  for (const td::TensorDict& m : Members()) out.push_back(m.get(key));
  return out;
}

void BM_LazyStackGet_Ours(benchmark::State& state) {
  td::TensorDict s = td::lazy_stack(Members(), 0);
  for (auto _ : state) {
    at::Tensor x = s.get("key3");
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_LazyStackGet_Ours)->Name("LazyStackGet/ours");

void BM_LazyStackGet_Hand(benchmark::State& state) {
  std::vector<at::Tensor> parts = MemberTensors("key3");
  for (auto _ : state) {
    at::Tensor x = at::stack(parts, 0);
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_LazyStackGet_Hand)->Name("LazyStackGet/hand");

void BM_LazyStackBuildGet_Ours(benchmark::State& state) {
  const std::vector<td::TensorDict>& members = Members();
  for (auto _ : state) {
    td::TensorDict s = td::lazy_stack(members, 0);
    at::Tensor x = s.get("key3");
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_LazyStackBuildGet_Ours)->Name("LazyStackBuildGet/ours");

void BM_LazyStackBuildGet_Hand(benchmark::State& state) {
  std::vector<at::Tensor> parts = MemberTensors("key3");
  for (auto _ : state) {
    at::Tensor x = at::stack(parts, 0);
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_LazyStackBuildGet_Hand)->Name("LazyStackBuildGet/hand");

void BM_LazyStackIndex_Ours(benchmark::State& state) {
  td::TensorDict s = td::lazy_stack(Members(), 0);
  for (auto _ : state) {
    td::TensorDict row = s.index({42});
    benchmark::DoNotOptimize(row);
  }
}
BENCHMARK(BM_LazyStackIndex_Ours)->Name("LazyStackIndex/ours");

void BM_LazyStackIndex_Hand(benchmark::State& state) {
  at::Tensor stacked = at::stack(MemberTensors("key3"), 0);
  for (auto _ : state) {
    at::Tensor row = stacked.index({42});
    benchmark::DoNotOptimize(row);
  }
}
BENCHMARK(BM_LazyStackIndex_Hand)->Name("LazyStackIndex/hand");

// The source of the views: batch [64, 16], 10 keys of shape [64, 16, 8].
td::TensorDict ViewSource() {
  td::TensorDict t({}, {64, 16});
  for (const std::string& k : Keys()) t.set(k, at::randn({64, 16, 8}));
  return t;
}

template <class MakeIndex>
void ViewGetOurs(benchmark::State& state, MakeIndex make_index) {
  td::TensorDict src = ViewSource();
  td::TensorDict view = td::index_view(src, make_index());
  for (auto _ : state) {
    at::Tensor x = view.get("key3");
    benchmark::DoNotOptimize(x);
  }
}

template <class MakeIndex>
void ViewGetHand(benchmark::State& state, MakeIndex make_index) {
  at::Tensor src = ViewSource().get("key3");
  std::vector<at::indexing::TensorIndex> index = make_index();
  for (auto _ : state) {
    at::Tensor x = src.index(index);
    benchmark::DoNotOptimize(x);
  }
}

std::vector<at::indexing::TensorIndex> SliceIndex() { return {Slice(8, 40)}; }
std::vector<at::indexing::TensorIndex> IntIndex() { return {5}; }
std::vector<at::indexing::TensorIndex> MaskIndex() {
  return {at::arange(64) % 3 == 0};
}

void BM_IndexViewSlice_Ours(benchmark::State& s) { ViewGetOurs(s, SliceIndex); }
void BM_IndexViewSlice_Hand(benchmark::State& s) { ViewGetHand(s, SliceIndex); }
void BM_IndexViewInt_Ours(benchmark::State& s) { ViewGetOurs(s, IntIndex); }
void BM_IndexViewInt_Hand(benchmark::State& s) { ViewGetHand(s, IntIndex); }
void BM_IndexViewMask_Ours(benchmark::State& s) { ViewGetOurs(s, MaskIndex); }
void BM_IndexViewMask_Hand(benchmark::State& s) { ViewGetHand(s, MaskIndex); }
BENCHMARK(BM_IndexViewSlice_Ours)->Name("IndexViewGetSlice/ours");
BENCHMARK(BM_IndexViewSlice_Hand)->Name("IndexViewGetSlice/hand");
BENCHMARK(BM_IndexViewInt_Ours)->Name("IndexViewGetInt/ours");
BENCHMARK(BM_IndexViewInt_Hand)->Name("IndexViewGetInt/hand");
BENCHMARK(BM_IndexViewMask_Ours)->Name("IndexViewGetMask/ours");
BENCHMARK(BM_IndexViewMask_Hand)->Name("IndexViewGetMask/hand");

void BM_PermuteViewGet_Ours(benchmark::State& state) {
  td::TensorDict src = ViewSource();
  td::TensorDict view = td::permute_view(src, {1, 0});
  for (auto _ : state) {
    at::Tensor x = view.get("key3");
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_PermuteViewGet_Ours)->Name("PermuteViewGet/ours");

void BM_PermuteViewGet_Hand(benchmark::State& state) {
  at::Tensor src = ViewSource().get("key3");
  for (auto _ : state) {
    at::Tensor x = src.permute({1, 0, 2});
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_PermuteViewGet_Hand)->Name("PermuteViewGet/hand");

}  // namespace
