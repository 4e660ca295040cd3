// td/data vs plain LibTorch, in the same run (see ratio_main.cc). One pass (one epoch, shuffled,
// batches of 256, the last one partial) over a memmap_like dataset of 1,000,000 rows: "image"
// uint8 [3, 8, 8] and "label" int64 -- 200 MB of files, filled with random bytes, in the page
// cache after the first pass:
//   Pass1M/ours            td::data::BatchLoader (one index_select per leaf per batch)
//   Pass1M/hand            the same batches by hand: at::from_file-mapped tensors, one randperm,
//                          tensor.index_select(0, rows) per leaf per batch
//   Pass1M/hand_index      the same with tensor.index({rows}) (advanced indexing) per leaf
//   Pass1M/per_row         torch::data::make_data_loader over td::data::TensorDictDataset with
//                          a RandomSampler and td::data::Stack (a row per example, then stacking)
//   Pass1MPrefetch/ours    BatchLoader with prefetch(true); the consumer does nothing, so this
//                          shows the cost of handing batches across threads, not the overlap
// Counters: rows/s. Files go to $TD_BENCH_DIR (default /tmp/td_data_bench). Run:
//   tools/bazelw run -c opt //benchmarks:data
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <benchmark/benchmark.h>
#include <torch/data/dataloader.h>
#include <torch/data/samplers.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "td/core/tensordict.h"
#include "td/data/batches.h"
#include "td/data/dataset.h"

namespace {

constexpr int64_t kRows = 1000000;
constexpr int64_t kBatch = 256;

std::string Dir() {
  static const std::string* dir = [] {
    const char* env = std::getenv("TD_BENCH_DIR");
    auto* d = new std::string(env && *env ? env : "/tmp/td_data_bench");
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir;
}

const td::TensorDict& Dataset() {
  static const td::TensorDict* data = [] {
    td::TensorDict one({{"image", at::zeros({3, 8, 8}, at::kByte)},
                        {"label", at::zeros({}, at::kLong)}},
                       {});
    auto* d = new td::TensorDict(one.expand({kRows}).memmap_like(Dir() + "/dataset"));
    at::manual_seed(0);
    d->get("image").copy_(at::randint(0, 256, {kRows, 3, 8, 8}, at::kByte));
    d->get("label").copy_(at::randint(0, 10, {kRows}, at::kLong));
    return d;
  }();
  return *data;
}

void Report(benchmark::State& state) {
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kRows),
                         benchmark::Counter::kIsRate);
}

void BM_Pass_Ours(benchmark::State& state) {
  td::data::BatchLoader loader(
      Dataset(), td::data::BatchOptions(kBatch).shuffle(true).seed(1).prefetch(state.range(0)));
  for (auto _ : state) {
    int64_t n = 0;
    for (td::TensorDict batch : loader) {
      benchmark::DoNotOptimize(batch);
      n += batch.batch_size()[0];
    }
    if (n != kRows) state.SkipWithError("wrong number of rows");
  }
  Report(state);
}
BENCHMARK(BM_Pass_Ours)->Arg(0)->Name("Pass1M/ours")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pass_Ours)->Arg(1)->Name("Pass1MPrefetch/ours")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Pass_Hand(benchmark::State& state) {
  Dataset();  // the files exist
  const std::string dir = Dir() + "/dataset";
  const at::Tensor image = at::from_file(dir + "/image.memmap", true, kRows * 192, at::kByte)
                               .view({kRows, 3, 8, 8});
  const at::Tensor label = at::from_file(dir + "/label.memmap", true, kRows, at::kLong);
  int64_t epoch = 0;
  for (auto _ : state) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(++epoch);
    const at::Tensor order = at::randperm(kRows, gen, at::TensorOptions().dtype(at::kLong));
    int64_t n = 0;
    for (int64_t start = 0; start < kRows; start += kBatch) {
      const at::Tensor rows = order.slice(0, start, std::min(kRows, start + kBatch));
      at::Tensor a = state.range(0) ? image.index({rows}) : image.index_select(0, rows);
      at::Tensor b = state.range(0) ? label.index({rows}) : label.index_select(0, rows);
      benchmark::DoNotOptimize(a);
      benchmark::DoNotOptimize(b);
      n += a.size(0);
    }
    if (n != kRows) state.SkipWithError("wrong number of rows");
  }
  Report(state);
}
BENCHMARK(BM_Pass_Hand)->Arg(0)->Name("Pass1M/hand")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Pass_Hand)->Arg(1)->Name("Pass1M/hand_index")->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Pass_PerRow(benchmark::State& state) {
  for (auto _ : state) {
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        td::data::TensorDictDataset(Dataset()).map(td::data::Stack()),
        torch::data::DataLoaderOptions().batch_size(kBatch).workers(0));
    int64_t n = 0;
    for (td::TensorDict& batch : *loader) {
      benchmark::DoNotOptimize(batch);
      n += batch.batch_size()[0];
    }
    if (n != kRows) state.SkipWithError("wrong number of rows");
  }
  Report(state);
}
BENCHMARK(BM_Pass_PerRow)->Name("Pass1M/per_row")->UseRealTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
