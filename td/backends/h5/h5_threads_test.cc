// Several threads read one HDF5 file at once, through the same TensorDict and through their own
// handles: every read must give the rows asked for (NOTE [ One HDF5 lock ] in h5_io.h). The
// verdict does not depend on timing: each thread checks what it read, and every wait is bounded.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "td/backends/h5/h5.h"
#include "td/backends/memmap/test_util.h"

namespace td {
namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 60;

TEST(H5ThreadsTest, ConcurrentReadersSeeTheirRows) {
  const std::string path = testing_util::FreshDir("h5threads") + "/data.h5";
  const int64_t rows = 2000;
  TensorDict data({{"obs", at::arange(rows * 8, at::kFloat).view({rows, 8})},
                   {"next", {{"r", at::arange(rows, at::kLong) * 3}}}},
                  {rows});
  h5::to_h5(data, path, h5::ToH5Options().datasets(h5::DatasetOptions().chunk_rows(64)));
  const h5::H5TensorDict shared = h5::open(path);
  std::vector<std::future<std::string>> readers;
  for (int t = 0; t < kThreads; ++t) {
    readers.push_back(std::async(std::launch::async, [&, t]() -> std::string {
      // Half the threads share one handle, the others open their own.
      const TensorDict file = t % 2 == 0 ? TensorDict(shared) : TensorDict(h5::open(path));
      at::Generator gen = at::detail::createCPUGenerator(1000 + t);
      for (int i = 0; i < kRounds; ++i) {
        const at::Tensor idx = at::randint(rows, {32}, gen, at::kLong);
        const TensorDict batch = file.index({idx});
        if (!batch.get("obs").equal(data.get("obs").index({idx})) ||
            !batch.get({"next", "r"}).equal(idx * 3)) {
          return "thread " + std::to_string(t) + " read wrong rows in round " + std::to_string(i);
        }
        const int64_t start = (i * 37 + t * 101) % (rows - 10);
        if (!file.index({at::indexing::Slice(start, start + 10)}).get("obs").equal(
                data.get("obs").slice(0, start, start + 10))) {
          return "thread " + std::to_string(t) + " read a wrong slice in round " + std::to_string(i);
        }
      }
      return "";
    }));
  }
  for (auto& r : readers) {
    // Far above what the reads need under ASan on a loaded machine; a hang fails here by name.
    ASSERT_EQ(r.wait_for(std::chrono::seconds(240)), std::future_status::ready)
        << "a reader thread did not finish";
    EXPECT_EQ(r.get(), "");
  }
}

}  // namespace
}  // namespace td
