// "Building datasets" from the Python README, in C++: preallocate a dataset of 1,000,000 images
// on disk with memmap_like (49 GB of sparse files: no RAM, nothing written), fill some rows, and
// read 3 items by index -- only those rows are read from disk.
//   bazel run //examples:memmap_dataset [-- /path/to/dataset]
#include <ATen/ATen.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <iostream>
#include <string>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/tensordict.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "memmap_dataset: " << what << "\n";
    std::exit(1);
  }
}

std::string Folder(int argc, char** argv) {
  if (argc > 1) return argv[1];
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/td_dataset_XXXXXX";
  Check(::mkdtemp(base.data()) != nullptr, "mkdtemp failed");
  return base + "/dataset";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string folder = Folder(argc, argv);
  // data = TensorDict({"images": zeros((128, 128, 3), uint8), "labels": zeros((), int)}, [])
  td::TensorDict data({{"images", at::zeros({128, 128, 3}, at::kByte)},
                       {"labels", at::zeros({}, at::kInt)}},
                      {});
  data = data.expand({1000000});            // data.expand(1000000): no memory
  data = data.memmap_like(folder);          // data.memmap_like("/path/to/dataset")
  std::cout << data << "\n";

  struct stat st;
  Check(::stat((folder + "/images.memmap").c_str(), &st) == 0, "no images file");
  std::cout << "images.memmap: " << st.st_size << " bytes, " << st.st_blocks * 512
            << " bytes on disk\n";

  // Fill your dataset here: a few items written in place.
  for (int64_t i : {1, 10000, 500000}) {
    data.index_put_({i}, td::TensorDict({{"images", at::full({128, 128, 3}, i % 251, at::kByte)},
                                         {"labels", at::scalar_tensor(i % 10, at::kInt)}},
                                        {}));
  }

  // data[torch.tensor([1, 10000, 500000])]
  td::TensorDict batch = data.index({at::tensor({1, 10000, 500000}, at::kLong)});
  std::cout << batch << "\n";
  Check(batch.batch_size() == at::IntArrayRef({3}), "wrong batch size");
  Check(batch.get("labels").equal(at::tensor({1, 0, 0}, at::kInt)), "wrong labels");
  Check(batch.get("images").index({1}).eq(10000 % 251).all().item<bool>(), "wrong image");
  Check(::stat((folder + "/images.memmap").c_str(), &st) == 0 && st.st_blocks * 512 < (64 << 20),
        "the dataset was materialised on disk");

  // Another process (or a later run) opens the same dataset.
  td::TensorDict reopened = td::TensorDict::load_memmap(folder);
  Check(reopened.get("labels").index({500000}).item<int>() == 0 &&
            reopened.get("images").index({500000, 0, 0, 0}).item<int>() == 500000 % 251,
        "reopened dataset differs");
  std::cout << "dataset OK\n";
  return 0;
}
