// The Python README's on-disk dataset, fed to a training loop: preallocate it with memmap_like,
// fill it, then iterate it in shuffled batches.
//
//   data = TensorDict({"images": torch.zeros((128, 128, 3), dtype=torch.uint8),
//                      "labels": torch.zeros((), dtype=torch.int)}, batch_size=[])
//   data = data.expand(1000000).memmap_like("/path/to/dataset")
//   # ==> Fill your dataset here
//
// In C++ the batches come from td::data::BatchLoader (one index_select per leaf per batch, the
// next batch gathered on a TBB worker while the model trains on the current one), and the
// evaluation pass goes through LibTorch's own torch::data::DataLoader with two workers over
// td::data::TensorDictDataset, whose examples are rows stacked back into batches.
//
// So that it runs as a test, the dataset is smaller than the README's: 8192 images of
// [32, 32, 3]. Image i of class c is noise with a bright band over rows 3c..3c+2; a linear
// classifier learns it in two epochs. Exits non-zero unless the loss falls and the accuracy is
// high.
//   bazel run //examples:dataloader [-- /path/to/dataset]
#include <ATen/ATen.h>
#include <stdlib.h>
#include <torch/data/dataloader.h>
#include <torch/data/samplers.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "td/core/tensordict.h"
#include "td/data/batches.h"
#include "td/data/dataset.h"
#include "td/nn/common.h"
#include "td/nn/sequence.h"

namespace {

using at::indexing::Slice;

constexpr int64_t kRows = 8192, kSide = 32, kClasses = 10;

std::string Folder(int argc, char** argv) {
  if (argc > 1) return argv[1];
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/td_dataloader_XXXXXX";
  if (::mkdtemp(base.data()) == nullptr) {
    std::cerr << "dataloader: mkdtemp failed\n";
    std::exit(EXIT_FAILURE);
  }
  return base + "/dataset";
}

// `n` rows of class labels and images: uniform noise in [0, 128) plus 127 on the rows of the
// image's band.
td::TensorDict MakeRows(int64_t n) {
  const at::Tensor labels = at::randint(0, kClasses, {n}, at::kInt);
  const at::Tensor band = at::arange(kSide).div(3, "floor").unsqueeze(0)
                              .eq(labels.unsqueeze(1));                       // [n, 32]
  const at::Tensor images = at::randint(0, 128, {n, kSide, kSide, 3}, at::kByte)
                                .add_(band.view({n, kSide, 1, 1}).to(at::kByte).mul(127));
  return td::TensorDict({{"images", images}, {"labels", labels}}, {n});
}

}  // namespace

int main(int argc, char** argv) {
  at::manual_seed(0);
  // Allocate the dataset on disk: no RAM, sparse files.
  td::TensorDict data = td::TensorDict({{"images", at::zeros({kSide, kSide, 3}, at::kByte)},
                                        {"labels", at::zeros({}, at::kInt)}},
                                       {})
                            .expand({kRows})
                            .memmap_like(Folder(argc, argv));
  // ==> Fill your dataset here: chunks of rows written in place, straight into the files.
  for (int64_t start = 0; start < kRows; start += 1024) {
    data.index_put_({Slice(start, start + 1024)}, MakeRows(1024));
  }
  std::cout << data << "\n";

  // The model reads "images" and writes "logits"; the loss writes one value per row.
  torch::nn::Linear linear(kSide * kSide * 3, kClasses);
  td::nn::TensorDictSequential model(
      td::nn::TensorDictModule(
          [](at::Tensor images) { return images.flatten(1).to(at::kFloat).div_(255); },
          {"images"}, {"pixels"}),
      td::nn::TensorDictModule(linear, {"pixels"}, {"logits"}));
  td::nn::TensorDictModule loss_module(
      [](at::Tensor logits, at::Tensor labels) {
        return torch::nn::functional::cross_entropy(
            logits, labels.to(at::kLong),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      },
      {"logits", "labels"}, {"loss"});
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));

  // A new order every epoch; the next batch is read from the files while this one trains.
  td::data::BatchLoader loader(
      data, td::data::BatchOptions(64).shuffle(true).seed(0).drop_last(true).prefetch(true));
  double first_loss = -1, last_loss = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    double total = 0;
    int64_t batches = 0;
    for (td::TensorDict batch : loader) {  // batch size [64], new tensors (not views of the files)
      model(batch);
      loss_module(batch);
      const at::Tensor loss = batch.get("loss").mean();
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      if (first_loss < 0) first_loss = loss.item<double>();
      total += loss.item<double>();
      ++batches;
    }
    last_loss = total / batches;
    std::cout << "epoch " << epoch << ": " << batches << " batches of 64, mean loss " << last_loss
              << "\n";
  }

  // Evaluation through torch::data: rows as examples, stacked into TensorDict batches.
  torch::NoGradGuard no_grad;
  auto eval_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      td::data::TensorDictDataset(data).map(td::data::Stack()),
      torch::data::DataLoaderOptions().batch_size(512).workers(2));
  int64_t correct = 0, seen = 0;
  for (td::TensorDict batch : *eval_loader) {
    model(batch);
    correct += batch.get("logits").argmax(-1).eq(batch.get("labels")).sum().item<int64_t>();
    seen += batch.batch_size()[0];
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(seen);
  std::cout << "first batch loss " << first_loss << ", last epoch " << last_loss << "; accuracy "
            << accuracy << " over " << seen << " rows\n";
  if (seen != kRows || !(last_loss < 0.5 * first_loss) || accuracy < 0.9) {
    std::cerr << "dataloader: the model did not learn\n";
    return EXIT_FAILURE;
  }
  std::cout << "dataloader example: OK\n";
  return EXIT_SUCCESS;
}
