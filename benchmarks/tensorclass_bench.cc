// td::TensorClass typed access vs TensorDict::get with a string key and vs a plain struct of
// tensors (the same work in plain LibTorch): reading a field, reading a field of a nested class,
// writing a field (with the batch-size check a careful struct setter does), and indexing every
// field at once.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "td/core/tensordict.h"
#include "td/tensorclass/tensorclass.h"

namespace {

class Inner : public td::TensorClass<Inner> {
 public:
  TD_TENSORCLASS(Inner, (at::Tensor, obs), (at::Tensor, reward))
};

class Batch : public td::TensorClass<Batch> {
 public:
  TD_TENSORCLASS(Batch, (at::Tensor, image), (at::Tensor, mask), (at::Tensor, label),
                 (Inner, next))
};

struct PlainInner {
  at::Tensor obs, reward;
};
struct PlainBatch {
  at::Tensor image, mask, label;
  PlainInner next;
};

Batch MakeBatch() {
  return Batch(at::randn({64, 3, 8, 8}), at::ones({64, 1, 8, 8}, at::kBool),
               at::arange(64), Inner(at::randn({64, 4}), at::randn({64}), {64}), {64});
}
PlainBatch MakePlain() {
  return PlainBatch{at::randn({64, 3, 8, 8}), at::ones({64, 1, 8, 8}, at::kBool), at::arange(64),
                    PlainInner{at::randn({64, 4}), at::randn({64})}};
}

void BM_Get_Ours(benchmark::State& state) {
  Batch b = MakeBatch();
  for (auto _ : state) {
    at::Tensor x = b.label();
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_Get_Ours)->Name("GetField/ours");

void BM_Get_TdGet(benchmark::State& state) {
  td::TensorDict t = MakeBatch().to_tensordict();
  for (auto _ : state) {
    at::Tensor x = t.get("label");
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_Get_TdGet)->Name("GetField/td_get");

void BM_Get_Hand(benchmark::State& state) {
  PlainBatch p = MakePlain();
  for (auto _ : state) {
    at::Tensor x = p.label;
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_Get_Hand)->Name("GetField/hand");

void BM_GetNested_Ours(benchmark::State& state) {
  Batch b = MakeBatch();
  for (auto _ : state) {
    at::Tensor x = b.next().obs();
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetNested_Ours)->Name("GetNested/ours");

void BM_GetNested_TdGet(benchmark::State& state) {
  td::TensorDict t = MakeBatch().to_tensordict();
  for (auto _ : state) {
    at::Tensor x = t.get({"next", "obs"});
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetNested_TdGet)->Name("GetNested/td_get");

void BM_GetNested_Hand(benchmark::State& state) {
  PlainBatch p = MakePlain();
  for (auto _ : state) {
    at::Tensor x = p.next.obs;
    benchmark::DoNotOptimize(x);
  }
}
BENCHMARK(BM_GetNested_Hand)->Name("GetNested/hand");

void BM_Set_Ours(benchmark::State& state) {
  Batch b = MakeBatch();
  const at::Tensor v = at::arange(64);
  for (auto _ : state) {
    b.set_label(v);
  }
}
BENCHMARK(BM_Set_Ours)->Name("SetField/ours");

void BM_Set_TdSet(benchmark::State& state) {
  td::TensorDict t = MakeBatch().to_tensordict();
  const at::Tensor v = at::arange(64);
  for (auto _ : state) {
    t.set("label", v);
  }
}
BENCHMARK(BM_Set_TdSet)->Name("SetField/td_set");

void BM_Set_Hand(benchmark::State& state) {
  PlainBatch p = MakePlain();
  const at::Tensor v = at::arange(64);
  for (auto _ : state) {
    if (v.dim() < 1 || v.size(0) != 64) std::abort();  // the batch-size check
    p.label = v;
    benchmark::DoNotOptimize(p.label);
  }
}
BENCHMARK(BM_Set_Hand)->Name("SetField/hand");

void BM_Index_Ours(benchmark::State& state) {
  Batch b = MakeBatch();
  for (auto _ : state) {
    Batch row = b.index({3});
    benchmark::DoNotOptimize(row);
  }
}
BENCHMARK(BM_Index_Ours)->Name("IndexInt/ours");

void BM_Index_Hand(benchmark::State& state) {
  PlainBatch p = MakePlain();
  for (auto _ : state) {
    PlainBatch row{p.image.select(0, 3), p.mask.select(0, 3), p.label.select(0, 3),
                   PlainInner{p.next.obs.select(0, 3), p.next.reward.select(0, 3)}};
    benchmark::DoNotOptimize(row);
  }
}
BENCHMARK(BM_Index_Hand)->Name("IndexInt/hand");

}  // namespace
