// memmap backend vs plain LibTorch and plain POSIX, in the same run (see ratio_main.cc):
//   Write256MiB    memmap() with default options (num_threads 0: every CPU for this much
//                  data) of 64 float tensors of 4 MiB (crash-safe: temporary directory,
//                  rename, previous copy removed, files mapped back)  vs  torch::save of the same
//                  tensors  and  write(2) of the same bytes into 64 existing files.
//   WriteThreads   memmap() with num_threads(2)  vs  num_threads(1).
//   LoadReadAll    load_memmap() of that checkpoint + summing every leaf  vs  torch::load + the
//                  same sums (files in the page cache for both).
//   Read3Rows      3 random rows (index with a long tensor) of a memmap_like dataset of
//                  1,000,000 x (128x128x3 uint8 image, int32 label) -- 49 GB of sparse files --
//                  vs  the same on a 10,000-row dataset (does the cost grow with the dataset?)
//                  and  by hand: index of an at::from_file-mapped tensor per leaf.
// Files go to $TD_BENCH_DIR (default /tmp/td_memmap_bench). Run:
//   tools/bazelw run -c opt //benchmarks:memmap
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <torch/serialize.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/tensordict.h"

namespace {

constexpr int kLeaves = 64;

std::string Dir() {
  static const std::string* dir = [] {
    const char* env = std::getenv("TD_BENCH_DIR");
    auto* d = new std::string(env && *env ? env : "/tmp/td_memmap_bench");
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir;
}

const std::vector<at::Tensor>& Tensors() {
  static const auto* tensors = [] {
    auto* v = new std::vector<at::Tensor>;
    for (int i = 0; i < kLeaves; ++i) v->push_back(at::randn({1024, 1024}));  // 4 MiB each
    return v;
  }();
  return *tensors;
}

const td::TensorDict& Params() {
  static const auto* params = [] {
    std::vector<td::TensorDict::Item> items;
    for (int i = 0; i < kLeaves; ++i) items.emplace_back("w" + std::to_string(i), Tensors()[i]);
    return new td::TensorDict(items, {});
  }();
  return *params;
}

// Each write starts with no dirty pages waiting for writeback (sync(2), untimed), so that every
// case measures the same thing -- copying the bytes into the page cache and committing the
// files -- whatever ran before it.
void Settle(benchmark::State& state) {
  state.PauseTiming();
  ::sync();
  state.ResumeTiming();
}

void BM_Write_Ours(benchmark::State& state) {
  const std::string prefix = Dir() + "/ckpt";
  const auto options = td::MemmapOptions().num_threads(state.range(0));
  for (auto _ : state) {
    Settle(state);
    td::TensorDict saved = Params().memmap(prefix, options);
    benchmark::DoNotOptimize(saved);
  }
  state.SetBytesProcessed(state.iterations() * int64_t{kLeaves} * (4 << 20));
}
BENCHMARK(BM_Write_Ours)->Arg(0)->Name("Write256MiB/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Write_Ours)->Arg(2)->Name("WriteThreads/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Write_Ours)->Arg(1)->Name("WriteThreads/one_thread")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Write_TorchSave(benchmark::State& state) {
  const std::string file = Dir() + "/ckpt.pt";
  for (auto _ : state) {
    Settle(state);
    torch::save(Tensors(), file);
  }
  state.SetBytesProcessed(state.iterations() * int64_t{kLeaves} * (4 << 20));
}
BENCHMARK(BM_Write_TorchSave)->Name("Write256MiB/torch_save")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Write_Posix(benchmark::State& state) {
  const std::string dir = Dir() + "/raw";
  std::filesystem::create_directories(dir);
  for (auto _ : state) {
    Settle(state);
    for (int i = 0; i < kLeaves; ++i) {
      const at::Tensor& t = Tensors()[i];
      const std::string file = dir + "/w" + std::to_string(i) + ".memmap";
      int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      const char* p = static_cast<const char*>(t.data_ptr());
      size_t n = t.numel() * t.element_size();
      while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w <= 0) std::abort();
        p += w;
        n -= static_cast<size_t>(w);
      }
      ::close(fd);
    }
  }
  state.SetBytesProcessed(state.iterations() * int64_t{kLeaves} * (4 << 20));
}
BENCHMARK(BM_Write_Posix)->Name("Write256MiB/write")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Load_Ours(benchmark::State& state) {
  const std::string prefix = Dir() + "/load";
  Params().memmap(prefix);
  for (auto _ : state) {
    td::TensorDict loaded = td::TensorDict::load_memmap(prefix);
    double total = 0;
    for (const td::Value& v : loaded.values()) total += v.tensor().sum().item<double>();
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_Load_Ours)->Name("LoadReadAll/ours")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Load_TorchLoad(benchmark::State& state) {
  const std::string file = Dir() + "/load.pt";
  torch::save(Tensors(), file);
  for (auto _ : state) {
    std::vector<at::Tensor> loaded;
    torch::load(loaded, file);
    double total = 0;
    for (const at::Tensor& t : loaded) total += t.sum().item<double>();
    benchmark::DoNotOptimize(total);
  }
}
BENCHMARK(BM_Load_TorchLoad)->Name("LoadReadAll/torch_load")->UseRealTime()->Unit(benchmark::kMillisecond);

// A memmap_like dataset of `rows` rows: images [rows, 128, 128, 3] uint8, labels [rows] int32.
const td::TensorDict& Dataset(int64_t rows) {
  static std::map<int64_t, td::TensorDict>* cache = new std::map<int64_t, td::TensorDict>;
  auto it = cache->find(rows);
  if (it != cache->end()) return it->second;
  td::TensorDict one({{"images", at::zeros({128, 128, 3}, at::kByte)},
                      {"labels", at::zeros({}, at::kInt)}},
                     {});
  td::TensorDict data =
      one.expand({rows}).memmap_like(Dir() + "/dataset" + std::to_string(rows));
  return cache->emplace(rows, data).first->second;
}

at::Tensor RandomRows(std::mt19937_64* rng, int64_t rows) {
  std::uniform_int_distribution<int64_t> pick(0, rows - 1);
  return at::tensor({pick(*rng), pick(*rng), pick(*rng)}, at::kLong);
}

void BM_Read3_Ours(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const td::TensorDict& data = Dataset(rows);
  std::mt19937_64 rng(7);
  for (auto _ : state) {
    td::TensorDict batch = data.index({RandomRows(&rng, rows)});
    benchmark::DoNotOptimize(batch);
  }
}
BENCHMARK(BM_Read3_Ours)->Arg(1000000)->Name("Read3Rows/ours")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Read3_Ours)->Arg(10000)->Name("Read3Rows/rows10k")->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_Read3_Hand(benchmark::State& state) {
  const int64_t rows = 1000000;
  Dataset(rows);  // the files exist
  const std::string dir = Dir() + "/dataset" + std::to_string(rows);
  at::Tensor images = at::from_file(dir + "/images.memmap", true, rows * 128 * 128 * 3, at::kByte)
                          .view({rows, 128, 128, 3});
  at::Tensor labels = at::from_file(dir + "/labels.memmap", true, rows, at::kInt);
  std::mt19937_64 rng(7);
  for (auto _ : state) {
    at::Tensor idx = RandomRows(&rng, rows);
    at::Tensor a = images.index({idx});
    at::Tensor b = labels.index({idx});
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_Read3_Hand)->Name("Read3Rows/hand")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
