// The README's "Preprocessing with TensorDict.map", in C++: a dataset of images and labels is
// processed in place, one item at a time, by 4 TBB workers with a progress bar; then a second
// map computes new entries chunk by chunk and returns them concatenated, and map_iter streams
// per-chunk results in order.
//
//   bazel run //examples:preprocess_map
#include <ATen/ATen.h>

#include <cstdlib>
#include <iostream>

#include "td/core/tensordict.h"
#include "td/parallel/map.h"

int main() {
  at::manual_seed(0);
  constexpr int64_t kItems = 2000;
  // The dataset: in Python, `data.memmap_like("/path/to/dataset")` would put it on disk; the
  // map below works the same on a memmap TensorDict (chunks are views of its files).
  td::TensorDict data({{"images", at::randint(0, 256, {kItems, 32, 32, 3}, at::kByte)},
                       {"labels", at::randint(0, 100, {kItems}, at::kInt)}},
                      {kItems});
  const td::TensorDict original = data.clone();

  // def process_data(data):
  //     images = data.get("images").flip(-2).clone()
  //     labels = data.get("labels") // 10
  //     data.set_("images", images)  # flip image
  //     data.set_("labels", labels)  # cluster labels
  auto process_data = [](td::TensorDict item) {
    at::Tensor images = item.get("images").flip(-2).clone();
    at::Tensor labels = at::floor_divide(item.get("labels"), 10);
    item.set_("images", images);
    item.set_("labels", labels);
  };
  // data.map(process_data, num_workers=4, chunksize=0, pbar=True): one image at a time, written
  // straight back into `data`.
  td::parallel::map(data, process_data,
                    td::parallel::MapOptions().num_workers(4).chunksize(0).pbar(true).out(data));
  if (!data.get("images").equal(original.get("images").flip(-2)) ||
      !data.get("labels").equal(at::floor_divide(original.get("labels"), 10))) {
    std::cerr << "in-place preprocessing gave a wrong result\n";
    return EXIT_FAILURE;
  }

  // A map that returns new entries: the results come back concatenated in order.
  td::TensorDict stats = td::parallel::map(
      data,
      [](const td::TensorDict& chunk) {
        at::Tensor pixels = chunk.get("images").to(at::kFloat) / 255;
        return td::TensorDict({{"brightness", pixels.mean({1, 2, 3})},
                               {"cluster", chunk.get("labels")}},
                              chunk.batch_size());
      },
      td::parallel::MapOptions().num_workers(2).chunksize(256));
  std::cout << stats << "\n";

  // map_iter: per-chunk results, in order, while the workers compute ahead.
  int64_t seen = 0;
  for (const td::TensorDict& part :
       td::parallel::map_iter(stats, [](const td::TensorDict& chunk) { return chunk.clone(); },
                              td::parallel::MapOptions().num_workers(2).chunksize(500))) {
    seen += part.batch_size()[0];
  }
  std::cout << "streamed " << seen << " rows in order\n";
  return seen == kItems ? EXIT_SUCCESS : EXIT_FAILURE;
}
