// TensorDicts through LibTorch's torch::data pipeline: a dataset whose examples are the rows of a
// TensorDict (dense, memory-mapped, lazily stacked — any backend), and the collation that stacks
// rows back into one batched TensorDict. With them, make_data_loader works as it does for
// tensors: sequential or random samplers, any batch size, workers > 0.
//
//   td::TensorDict data = td::TensorDict::load_memmap("/data/images");      // batch [N]
//   auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
//       td::data::TensorDictDataset(data).map(td::data::Stack()),
//       torch::data::DataLoaderOptions().batch_size(64).workers(2));
//   for (td::TensorDict batch : *loader) train(batch.get("image"), batch.get("label"));
//
// Every example is one row (`data.index({i})`, batch size data.batch_size()[1:]), so this path
// does per-row work: for whole batches at memory speed use td::data::BatchLoader (batches.h),
// which gathers each batch with one indexing call per leaf. Bazel: //td/data
// (@tensordict//td/data).
#pragma once

#include <torch/data/datasets/base.h>
#include <torch/csrc/utils/variadic.h>  // torch::enable_if_t, used by map.h without including it
#include <torch/data/datasets/map.h>
#include <torch/data/transforms/collate.h>
#include <torch/data/transforms/stack.h>

#include <cstddef>
#include <vector>

#include "td/compat/torch.h"
#include "td/core/tensordict.h"

namespace td::data {

// A torch::data dataset over the rows (first batch dim) of a TensorDict. Copying the dataset
// (make_data_loader gives each worker a copy) shares the TensorDict, which is safe because the
// workers only read it.
class TensorDictDataset
    : public torch::data::datasets::Dataset<TensorDictDataset, TensorDict> {
 public:
  // Throws ValueError when `data` has no batch dims (there are no rows to iterate).
  //   td::data::TensorDictDataset ds(td::TensorDict({{"x", at::zeros({10, 3})}}, {10}));
  explicit TensorDictDataset(TensorDict data);

  // Row `index`: data.index({index}). Its leaves are views of the data on dense and memmap
  // storage (stacking them copies). Throws IndexError naming the index and the number of rows.
  //   td::TensorDict row = ds.get(3);   // batch size data.batch_size()[1:]
  TensorDict get(size_t index) override;
  // The number of rows, data.batch_size()[0].
  td::compat::Optional<size_t> size() const override;

  const TensorDict& tensordict() const { return data_; }

 private:
  TensorDict data_;
  size_t rows_ = 0;
};

// Collation: stacks the rows of a batch into one TensorDict (td::stack along a new dim 0).
// Throws ValueError for an empty batch, and what td::stack throws when the rows' keys or shapes
// differ.
//   auto batched = td::data::TensorDictDataset(data).map(td::data::Stack());
struct Stack : public torch::data::transforms::Collation<TensorDict> {
  TensorDict apply_batch(std::vector<TensorDict> rows) override;
};

}  // namespace td::data

namespace torch::data::transforms {
// So that the LibTorch spelling works too: dataset.map(torch::data::transforms::Stack<td::TensorDict>()).
template <>
struct Stack<td::TensorDict> : public td::data::Stack {};
}  // namespace torch::data::transforms
