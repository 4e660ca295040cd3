// Core dict operations vs the same work on a hand-rolled std::unordered_map / absl::flat_hash_map
// of tensors: construction of a 10-key TensorDict with batch [64] (all checks included), get of a
// flat key and of a depth-3 nested key, set of an existing key.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/core/tensordict.h"

namespace {

const std::vector<std::string>& Names() {
  static const auto* names = new std::vector<std::string>{
      "obs", "action", "reward", "done", "value", "log_prob", "next_obs", "advantage", "ret",
      "mask"};
  return *names;
}

const std::vector<at::Tensor>& Tensors() {
  static const auto* tensors = [] {
    auto* v = new std::vector<at::Tensor>;
    for (int i = 0; i < 10; ++i) v->push_back(at::randn({64, 8}));
    return v;
  }();
  return *tensors;
}

void BM_Construct_Ours(benchmark::State& state) {
  const auto& names = Names();
  const auto& ts = Tensors();
  for (auto _ : state) {
    td::TensorDict t({}, {64});
    for (int i = 0; i < 10; ++i) t.set(names[i], ts[i]);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_Construct_Ours)->Name("Construct10/ours");

void BM_Construct_Hand(benchmark::State& state) {
  const auto& names = Names();
  const auto& ts = Tensors();
  for (auto _ : state) {
    std::unordered_map<std::string, at::Tensor> m;
    for (int i = 0; i < 10; ++i) {
      // The check a careful hand-written map would do: leading dim is the batch size.
      if (ts[i].dim() < 1 || ts[i].size(0) != 64) std::abort();
      m.emplace(names[i], ts[i]);
    }
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_Construct_Hand)->Name("Construct10/hand");

void BM_ConstructAbsl_Hand(benchmark::State& state) {
  const auto& names = Names();
  const auto& ts = Tensors();
  for (auto _ : state) {
    absl::flat_hash_map<std::string, at::Tensor> m;
    for (int i = 0; i < 10; ++i) {
      if (ts[i].dim() < 1 || ts[i].size(0) != 64) std::abort();
      m.emplace(names[i], ts[i]);
    }
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_ConstructAbsl_Hand)->Name("Construct10/absl");

td::TensorDict MakeTd() {
  td::TensorDict t({}, {64});
  for (int i = 0; i < 10; ++i) t.set(Names()[i], Tensors()[i]);
  t.set({"l1", "l2", "leaf"}, Tensors()[0]);
  return t;
}

void BM_GetFlat_Ours(benchmark::State& state) {
  td::TensorDict t = MakeTd();
  for (auto _ : state) {
    at::Tensor x = t.get("advantage");
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetFlat_Ours)->Name("GetFlat/ours");

void BM_GetFlat_Hand(benchmark::State& state) {
  std::unordered_map<std::string, at::Tensor> m;
  for (int i = 0; i < 10; ++i) m.emplace(Names()[i], Tensors()[i]);
  for (auto _ : state) {
    at::Tensor x = m.find("advantage")->second;
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetFlat_Hand)->Name("GetFlat/hand");

void BM_GetFlatAbsl_Hand(benchmark::State& state) {
  absl::flat_hash_map<std::string, at::Tensor> m;
  for (int i = 0; i < 10; ++i) m.emplace(Names()[i], Tensors()[i]);
  for (auto _ : state) {
    at::Tensor x = m.find("advantage")->second;
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetFlatAbsl_Hand)->Name("GetFlat/absl");

void BM_GetNested_Ours(benchmark::State& state) {
  td::TensorDict t = MakeTd();
  for (auto _ : state) {
    at::Tensor x = t.get({"l1", "l2", "leaf"});
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetNested_Ours)->Name("GetNested3/ours");

// The hand-rolled nested equivalent: maps of maps.
struct Node {
  std::unordered_map<std::string, at::Tensor> leaves;
  std::unordered_map<std::string, std::shared_ptr<Node>> children;
};

void BM_GetNested_Hand(benchmark::State& state) {
  Node root;
  root.children["l1"] = std::make_shared<Node>();
  root.children["l1"]->children["l2"] = std::make_shared<Node>();
  root.children["l1"]->children["l2"]->leaves["leaf"] = Tensors()[0];
  for (auto _ : state) {
    at::Tensor x = root.children.find("l1")->second->children.find("l2")->second->leaves.find(
        "leaf")->second;
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetNested_Hand)->Name("GetNested3/hand");

void BM_SetExisting_Ours(benchmark::State& state) {
  td::TensorDict t = MakeTd();
  const at::Tensor& v = Tensors()[3];
  for (auto _ : state) {
    t.set("reward", v);
  }
}
BENCHMARK(BM_SetExisting_Ours)->Name("SetExisting/ours");

void BM_SetExisting_Hand(benchmark::State& state) {
  std::unordered_map<std::string, at::Tensor> m;
  for (int i = 0; i < 10; ++i) m.emplace(Names()[i], Tensors()[i]);
  const at::Tensor& v = Tensors()[3];
  for (auto _ : state) {
    if (v.dim() < 1 || v.size(0) != 64) std::abort();
    m["reward"] = v;
  }
}
BENCHMARK(BM_SetExisting_Hand)->Name("SetExisting/hand");

}  // namespace
