#include "td/data/dataset.h"

#include <utility>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/stack.h"

namespace td::data {

TensorDictDataset::TensorDictDataset(TensorDict data) : data_(std::move(data)) {
  if (data_.batch_dims() == 0) {
    TD_FAIL(ValueError, "TensorDictDataset: the TensorDict has batch size ",
                     SizeRepr(data_.batch_size()),
                     "; rows are taken along the first batch dim, so it needs at least one");
  }
  rows_ = static_cast<size_t>(data_.batch_size()[0]);
}

TensorDict TensorDictDataset::get(size_t index) {
  if (index >= rows_) {
    TD_FAIL(IndexError, "TensorDictDataset: row ", index, " is out of range for a dataset of ",
                     rows_, " rows (batch size ", SizeRepr(data_.batch_size()), ")");
  }
  return data_.index({static_cast<int64_t>(index)});
}

td::compat::Optional<size_t> TensorDictDataset::size() const { return rows_; }

TensorDict Stack::apply_batch(std::vector<TensorDict> rows) {
  if (rows.empty()) TD_FAIL(ValueError, "td::data::Stack: cannot collate an empty batch");
  return td::stack(rows, 0);
}

}  // namespace td::data
