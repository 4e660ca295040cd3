// The h5 backend against the HDF5 C API by hand, in the same run: random batches of 256 rows of
// a 1M-row file (obs float32 [1M, 16], action float32 [1M, 4], reward float32 [1M]; 84 MB, in the
// page cache after the first batches).
//   ours: file.index({rows}).to_dense() (what td::data::BatchLoader does on a lazy backend)
//   hand: for each dataset (opened once), the sorted distinct rows as a union of hyperslabs, one
//         H5Dread, then index_select back to the batch's order (repeats included)
//   bazel run -c opt //benchmarks:h5
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "td/backends/h5/h5.h"
#include "td/backends/h5/h5_io.h"

namespace {

constexpr int64_t kRows = 1000000;
constexpr int64_t kBatch = 256;
constexpr int kPool = 64;

struct Fixture {
  std::string path;
  std::vector<at::Tensor> batches;  // kPool index tensors of kBatch random rows
  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/td_h5_bench_XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) std::abort();
    path = dir + "/data.h5";
    td::TensorDict data({{"obs", at::randn({kRows, 16})},
                         {"action", at::randn({kRows, 4})},
                         {"reward", at::randn({kRows})}},
                        {kRows});
    td::h5::to_h5(data, path);
    at::Generator gen = at::detail::createCPUGenerator(3);
    for (int i = 0; i < kPool; ++i) batches.push_back(at::randint(kRows, {kBatch}, gen, at::kLong));
  }
  ~Fixture() {
    std::remove(path.c_str());
    ::rmdir(path.substr(0, path.rfind('/')).c_str());
  }
};

Fixture& Data() {
  static Fixture f;
  return f;
}

void BM_RandomBatch_Ours(benchmark::State& state) {
  const td::h5::H5TensorDict file = td::h5::open(Data().path);
  size_t i = 0;
  for (auto _ : state) {
    td::TensorDict batch = file.index({Data().batches[i++ % kPool]}).to_dense();
    benchmark::DoNotOptimize(batch);
  }
}
BENCHMARK(BM_RandomBatch_Ours)->Name("RandomBatch256/ours")->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same reads written with the HDF5 C API.
void BM_RandomBatch_Hand(benchmark::State& state) {
  using td::h5::internal::Hid;
  std::lock_guard<std::recursive_mutex> lock(td::h5::internal::Lock());
  Hid file(H5Fopen(Data().path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  struct Ds {
    Hid id, space;
    hsize_t row_elems;
    int rank;
    std::vector<hsize_t> dims;
  };
  std::vector<Ds> sets;
  for (const char* name : {"obs", "action", "reward"}) {
    Ds d;
    d.id = Hid(H5Dopen2(file.get(), name, H5P_DEFAULT));
    d.space = Hid(H5Dget_space(d.id.get()));
    d.rank = H5Sget_simple_extent_ndims(d.space.get());
    d.dims.resize(d.rank);
    H5Sget_simple_extent_dims(d.space.get(), d.dims.data(), nullptr);
    d.row_elems = d.rank > 1 ? d.dims[1] : 1;
    sets.push_back(std::move(d));
  }
  size_t i = 0;
  for (auto _ : state) {
    const at::Tensor& rows = Data().batches[i++ % kPool];
    const int64_t* r = rows.data_ptr<int64_t>();
    std::vector<int64_t> u(r, r + rows.numel());
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    std::vector<int64_t> pos(rows.numel());
    for (int64_t k = 0; k < rows.numel(); ++k) {
      pos[k] = std::lower_bound(u.begin(), u.end(), r[k]) - u.begin();
    }
    const at::Tensor back = at::tensor(pos, at::kLong);
    std::vector<at::Tensor> out;
    for (Ds& d : sets) {
      H5Sselect_none(d.space.get());
      std::vector<hsize_t> start(d.rank, 0), count(d.rank, 1), block(d.dims);
      for (size_t k = 0; k < u.size(); ++k) {
        // Consecutive rows as one block, as any careful hand-written reader would.
        size_t e = k;
        while (e + 1 < u.size() && u[e + 1] == u[e] + 1) ++e;
        start[0] = static_cast<hsize_t>(u[k]);
        block[0] = static_cast<hsize_t>(e - k + 1);
        H5Sselect_hyperslab(d.space.get(), H5S_SELECT_OR, start.data(), nullptr, count.data(),
                            block.data());
        k = e;
      }
      std::vector<int64_t> shape = {static_cast<int64_t>(u.size())};
      if (d.rank > 1) shape.push_back(static_cast<int64_t>(d.dims[1]));
      at::Tensor t = at::empty(shape, at::kFloat);
      const hsize_t n = static_cast<hsize_t>(t.numel());
      Hid mem(H5Screate_simple(1, &n, nullptr));
      H5Dread(d.id.get(), H5T_NATIVE_FLOAT, mem.get(), d.space.get(), H5P_DEFAULT, t.data_ptr());
      out.push_back(t.index_select(0, back));
    }
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_RandomBatch_Hand)->Name("RandomBatch256/hand")->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
