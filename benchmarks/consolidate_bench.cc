// A consolidated TensorDict vs the same work by hand, leaf by leaf, in plain LibTorch (same run,
// see ratio_main.cc). `<Case>/ours` is the TensorDict member on a consolidated TensorDict (one
// kernel over its buffer: NOTE [ One buffer, one kernel ] in td/core/leafwise.cc); `<Case>/hand`
// the ATen call on each of the same tensors kept in a std::vector.
//   Small*     100 leaves of [64] floats: clone, to(kDouble), * 2, add_, zero_, exp.
//   Big*       100 leaves of 1M floats (400 MB): clone and to(kHalf); bytes_per_second is the
//              bytes read. BigClone/memcpy is one std::memcpy of the same 400 MB into a buffer
//              allocated once: the machine's copy bandwidth, measured in the same binary;
//              BigClone/memcpy_fresh the same memcpy into a buffer allocated for each copy.
//   Save/Load  a consolidated file of 256 MiB in 64 leaves (save_consolidated; load_consolidated
//              + summing every leaf) vs memmap() / load_memmap() + the same sums. Writes start
//              with no dirty pages (sync(2), untimed). Files go to $TD_BENCH_DIR (default
//              /tmp/td_consolidate_bench).
// Run: tools/bazelw run -c opt //benchmarks:consolidate
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"
#include "td/core/tensordict.h"

namespace {

struct Data {
  std::vector<at::Tensor> hand;  // separate tensors
  td::TensorDict consolidated;   // the same values in one buffer
};

Data Make(int leaves, int64_t numel) {
  Data d;
  td::TensorDict plain({}, {});
  for (int i = 0; i < leaves; ++i) {
    d.hand.push_back(at::randn({numel}));
    plain.set("leaf" + std::to_string(i), d.hand.back());
  }
  d.consolidated = td::consolidate(plain);
  return d;
}

Data& Small() {
  static Data* d = new Data(Make(100, 64));
  return *d;
}
Data& SmallOther() {
  static Data* d = new Data(Make(100, 64));
  return *d;
}
Data& Big() {
  static Data* d = new Data(Make(100, 1 << 20));
  return *d;
}

template <class F>
void Hand(benchmark::State& state, const std::vector<at::Tensor>& in, F f) {
  std::vector<at::Tensor> out(in.size());
  for (auto _ : state) {
    for (size_t i = 0; i < in.size(); ++i) out[i] = f(in[i]);
    benchmark::DoNotOptimize(out);
  }
}

// ---- 100 leaves of [64] floats ---------------------------------------------------------------
void BM_SmallClone_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Small().consolidated.clone());
}
void BM_SmallClone_Hand(benchmark::State& s) {
  Hand(s, Small().hand, [](const at::Tensor& x) { return x.clone(); });
}
void BM_SmallToDouble_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Small().consolidated.to(at::kDouble));
}
void BM_SmallToDouble_Hand(benchmark::State& s) {
  Hand(s, Small().hand, [](const at::Tensor& x) { return x.to(at::kDouble); });
}
void BM_SmallMul2_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Small().consolidated * 2);
}
void BM_SmallMul2_Hand(benchmark::State& s) {
  Hand(s, Small().hand, [](const at::Tensor& x) { return x * 2; });
}
void BM_SmallAddInPlace_Ours(benchmark::State& s) {
  td::TensorDict a = Small().consolidated;
  for (auto _ : s) a.add_(SmallOther().consolidated, 1e-9);
}
void BM_SmallAddInPlace_Hand(benchmark::State& s) {
  std::vector<at::Tensor>& a = Small().hand;
  const std::vector<at::Tensor>& b = SmallOther().hand;
  for (auto _ : s) {
    for (size_t i = 0; i < a.size(); ++i) a[i].add_(b[i], 1e-9);
  }
}
void BM_SmallZero_Ours(benchmark::State& s) {
  td::TensorDict a = td::consolidate(Small().consolidated.clone());
  for (auto _ : s) a.zero_();
}
void BM_SmallZero_Hand(benchmark::State& s) {
  std::vector<at::Tensor> a;
  for (const at::Tensor& t : Small().hand) a.push_back(t.clone());
  for (auto _ : s) {
    for (at::Tensor& t : a) t.zero_();
  }
}
void BM_SmallExp_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Small().consolidated.exp());
}
void BM_SmallExp_Hand(benchmark::State& s) {
  Hand(s, Small().hand, [](const at::Tensor& x) { return x.exp(); });
}

BENCHMARK(BM_SmallClone_Ours)->Name("SmallClone/ours");
BENCHMARK(BM_SmallClone_Hand)->Name("SmallClone/hand");
BENCHMARK(BM_SmallToDouble_Ours)->Name("SmallToDouble/ours");
BENCHMARK(BM_SmallToDouble_Hand)->Name("SmallToDouble/hand");
BENCHMARK(BM_SmallMul2_Ours)->Name("SmallMul2/ours");
BENCHMARK(BM_SmallMul2_Hand)->Name("SmallMul2/hand");
BENCHMARK(BM_SmallAddInPlace_Ours)->Name("SmallAddInPlace/ours");
BENCHMARK(BM_SmallAddInPlace_Hand)->Name("SmallAddInPlace/hand");
BENCHMARK(BM_SmallZero_Ours)->Name("SmallZero/ours");
BENCHMARK(BM_SmallZero_Hand)->Name("SmallZero/hand");
BENCHMARK(BM_SmallExp_Ours)->Name("SmallExp/ours");
BENCHMARK(BM_SmallExp_Hand)->Name("SmallExp/hand");

// ---- 100 leaves of 1M floats -----------------------------------------------------------------
constexpr int64_t kBigBytes = int64_t{100} << 22;

void BM_BigClone_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Big().consolidated.clone());
  s.SetBytesProcessed(s.iterations() * kBigBytes);
}
void BM_BigClone_Hand(benchmark::State& s) {
  Hand(s, Big().hand, [](const at::Tensor& x) { return x.clone(); });
  s.SetBytesProcessed(s.iterations() * kBigBytes);
}
void BM_BigClone_Memcpy(benchmark::State& s) {
  at::Tensor src = *td::consolidated_buffer(Big().consolidated);
  at::Tensor dst = at::empty_like(src);
  std::memset(dst.data_ptr(), 1, dst.numel());  // pages mapped before timing
  for (auto _ : s) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.numel());
    benchmark::ClobberMemory();
  }
  s.SetBytesProcessed(s.iterations() * src.numel());
}
// The same memcpy into a buffer allocated for each copy, as a clone must: what plain LibTorch
// plus memcpy costs when the result is new memory (the kernel maps and zeroes its pages).
void BM_BigClone_MemcpyFresh(benchmark::State& s) {
  at::Tensor src = *td::consolidated_buffer(Big().consolidated);
  for (auto _ : s) {
    at::Tensor dst = at::empty_like(src);
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.numel());
    benchmark::DoNotOptimize(dst);
  }
  s.SetBytesProcessed(s.iterations() * src.numel());
}
void BM_BigToHalf_Ours(benchmark::State& s) {
  for (auto _ : s) benchmark::DoNotOptimize(Big().consolidated.to(at::kHalf));
  s.SetBytesProcessed(s.iterations() * kBigBytes);
}
void BM_BigToHalf_Hand(benchmark::State& s) {
  Hand(s, Big().hand, [](const at::Tensor& x) { return x.to(at::kHalf); });
  s.SetBytesProcessed(s.iterations() * kBigBytes);
}

BENCHMARK(BM_BigClone_Ours)->Name("BigClone/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BigClone_Hand)->Name("BigClone/hand")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BigClone_Memcpy)->Name("BigClone/memcpy")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BigClone_MemcpyFresh)
    ->Name("BigClone/memcpy_fresh")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BigToHalf_Ours)->Name("BigToHalf/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BigToHalf_Hand)->Name("BigToHalf/hand")->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- 256 MiB file in 64 leaves -----------------------------------------------------------------
std::string Dir() {
  static const std::string* dir = [] {
    const char* env = std::getenv("TD_BENCH_DIR");
    auto* d = new std::string(env && *env ? env : "/tmp/td_consolidate_bench");
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir;
}

const td::TensorDict& Ckpt() {
  static const td::TensorDict* c = [] {
    td::TensorDict plain({}, {});
    for (int i = 0; i < 64; ++i) plain.set("w" + std::to_string(i), at::randn({1024, 1024}));
    return new td::TensorDict(td::consolidate(plain));
  }();
  return *c;
}

void Settle(benchmark::State& s) {
  s.PauseTiming();
  ::sync();
  s.ResumeTiming();
}

double SumAll(const td::TensorDict& t) {
  double sum = 0;
  for (const td::Value& v : t.values()) sum += v.tensor().sum().item<double>();
  return sum;
}

void BM_Save_Ours(benchmark::State& s) {
  const std::string path = Dir() + "/ckpt.td";
  for (auto _ : s) {
    Settle(s);
    td::save_consolidated(Ckpt(), path);
  }
  s.SetBytesProcessed(s.iterations() * (int64_t{256} << 20));
}
void BM_Save_Memmap(benchmark::State& s) {
  const std::string prefix = Dir() + "/ckpt_memmap";
  for (auto _ : s) {
    Settle(s);
    benchmark::DoNotOptimize(Ckpt().memmap(prefix));
  }
  s.SetBytesProcessed(s.iterations() * (int64_t{256} << 20));
}
void BM_Load_Ours(benchmark::State& s) {
  const std::string path = Dir() + "/ckpt.td";
  td::save_consolidated(Ckpt(), path);
  for (auto _ : s) benchmark::DoNotOptimize(SumAll(td::load_consolidated(path)));
  s.SetBytesProcessed(s.iterations() * (int64_t{256} << 20));
}
void BM_Load_Memmap(benchmark::State& s) {
  const std::string prefix = Dir() + "/ckpt_memmap";
  Ckpt().memmap(prefix);
  for (auto _ : s) benchmark::DoNotOptimize(SumAll(td::TensorDict::load_memmap(prefix)));
  s.SetBytesProcessed(s.iterations() * (int64_t{256} << 20));
}

BENCHMARK(BM_Save_Ours)->Name("Save/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Save_Memmap)->Name("Save/memmap")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Load_Ours)->Name("Load/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Load_Memmap)->Name("Load/memmap")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
