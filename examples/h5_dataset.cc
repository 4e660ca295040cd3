// An offline-RL / imitation dataset in a robomimic-style HDF5 file (data/demo_i/obs/...,
// actions, rewards, dones; num_samples attributes), opened lazily with td::h5, cut into windows of
// 8 steps (each an index of its demo: nothing read), lazily stacked, and sampled into shuffled
// training batches by td::data::BatchLoader: each batch reads only its windows' rows.
//   bazel run //examples:h5_dataset [-- /path/to/file.hdf5]   (a given file is read, not written)
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <stdlib.h>

#include <iostream>
#include <string>
#include <vector>

#include "td/backends/h5/h5.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/tensordict.h"
#include "td/data/batches.h"

namespace {

using at::indexing::Slice;

constexpr int64_t kWindow = 8;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "h5_dataset: " << what << "\n";
    std::exit(1);
  }
}

// What a robomimic file holds: 4 demos of different lengths under data/, written with our writer
// (h5py writes the same layout: td/backends/h5/testdata/h5_fixture.py robomimic).
std::string WriteDemos() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/td_h5_XXXXXX";
  Check(::mkdtemp(dir.data()) != nullptr, "mkdtemp failed");
  td::TensorDict demos({}, {});
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t n = 30 + 7 * i;
    td::TensorDict demo({{"obs", {{"pos", at::randn({n, 3})},
                                  {"img", at::randint(0, 255, {n, 8, 8}, at::kByte)}}},
                         {"actions", at::full({n, 2}, static_cast<double>(i), at::kDouble)},
                         {"rewards", at::arange(n, at::kDouble)},
                         {"dones", (at::arange(n) == n - 1).to(at::kLong)}},
                        {n});
    demos.set({"data", "demo_" + std::to_string(i)}, demo);
  }
  const std::string path = dir + "/demos.hdf5";
  td::h5::H5TensorDict file = td::h5::to_h5(demos, path);
  for (int64_t i = 0; i < 4; ++i) {
    file.set_attr("num_samples", 30 + 7 * i, {"data", "demo_" + std::to_string(i)});
  }
  file.set_attr("env_args", R"({"env_name": "Lift"})", "data");
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : WriteDemos();
  // f = h5py.File(path); data = TensorDict.from_h5(path)["data"]: read-only, lazy.
  td::h5::H5TensorDict data = td::h5::open(path, td::h5::OpenOptions().group("data"));
  std::cout << "env_args: " << data.attrs()["env_args"] << "\n";

  // Windows of kWindow steps of every demo: each an index of its demo (a selection of rows).
  std::vector<td::TensorDict> windows;
  for (const td::NestedKey& key : data.keys()) {
    td::TensorDict demo = data.get_tensordict(key);
    const int64_t n = demo.batch_size()[0];
    Check(td::h5::H5TensorDict::from(demo)->attrs()["num_samples"] == n, "num_samples differs");
    for (int64_t s = 0; s + kWindow <= n; s += kWindow) {
      windows.push_back(demo.index({Slice(s, s + kWindow)}));
    }
  }
  td::LazyStackedTensorDict stack = td::lazy_stack(windows, 0);  // batch [W, 8]
  std::cout << data.keys().size() << " demos, " << windows.size() << " windows of " << kWindow
            << " steps\n";

  // A linear policy obs/pos -> actions, fitted on shuffled batches of 4 windows.
  at::Tensor w = at::zeros({3, 2}, at::kDouble).requires_grad_();
  at::Tensor b = at::zeros({2}, at::kDouble).requires_grad_();
  td::data::BatchLoader loader(stack, td::data::BatchOptions(4).shuffle(true).seed(7).drop_last(true));
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    int64_t batches = 0;
    for (const td::TensorDict& batch : loader) {
      Check(batch.batch_size() == at::IntArrayRef({4, kWindow}), "wrong batch size");
      const at::Tensor pos = batch.get({"obs", "pos"}).to(at::kDouble);   // [4, 8, 3]
      const at::Tensor actions = batch.get("actions");                   // [4, 8, 2]
      Check(actions.select(2, 0).eq(actions.select(2, 0).select(1, 0).unsqueeze(1)).all()
                .item<bool>(),
            "a window mixes demos");
      at::Tensor loss = (pos.matmul(w) + b - actions).pow(2).mean();
      loss.backward();
      {
        c10::AutoGradMode no_grad(false);
        w.sub_(w.grad() * 0.1);
        b.sub_(b.grad() * 0.1);
        w.grad().zero_();
        b.grad().zero_();
      }
      total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << ": " << batches << " batches, mean loss " << total / batches
              << "\n";
  }
  // The last window of a demo ends it: its dones row is 1 where the demo does.
  const td::TensorDict last = data.get_tensordict("demo_0").index({Slice(-kWindow, at::indexing::None)});
  Check(last.get("dones")[kWindow - 1].item<int64_t>() == 1, "demo_0 does not end with done");
  return 0;
}
