#include "td/core/internal/non_tensor_stack.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "td/core/errors.h"
#include "td/core/internal/tensordict_util.h"

namespace td {
namespace internal {

std::vector<int64_t> StackShape(const nlohmann::json& values, size_t max_dims) {
  std::vector<int64_t> shape;
  const nlohmann::json* j = &values;
  while (shape.size() < max_dims && j->is_array()) {
    shape.push_back(static_cast<int64_t>(j->size()));
    if (j->empty()) break;
    j = &(*j)[0];
  }
  return shape;
}

namespace {

// True when `j` is a list nested as batch[d:] (every list at depth k has batch[d + k] items).
bool NestedAs(const nlohmann::json& j, at::IntArrayRef batch, size_t d) {
  if (d == batch.size()) return true;
  if (!j.is_array() || static_cast<int64_t>(j.size()) != batch[d]) return false;
  for (const nlohmann::json& item : j) {
    if (!NestedAs(item, batch, d + 1)) return false;
  }
  return true;
}

void Flatten(const nlohmann::json& j, size_t dims, std::vector<nlohmann::json>* out) {
  if (dims == 0) {
    out->push_back(j);
    return;
  }
  for (const nlohmann::json& item : j) Flatten(item, dims - 1, out);
}

// The nested list of values[index[...]] for the row-major int64 `index` of shape `shape`.
nlohmann::json Nest(const int64_t*& index, at::IntArrayRef shape, size_t d,
                    const std::vector<nlohmann::json>& values) {
  if (d == shape.size()) {
    const int64_t i = *index++;
    TORCH_INTERNAL_ASSERT(i >= 0 && i < static_cast<int64_t>(values.size()),
                          "NonTensorStack gather: position ", i, " of ", values.size());
    return values[static_cast<size_t>(i)];
  }
  nlohmann::json out = nlohmann::json::array();
  for (int64_t k = 0; k < shape[d]; ++k) out.push_back(Nest(index, shape, d + 1, values));
  return out;
}

}  // namespace

void CheckStackShape(const nlohmann::json& values, at::IntArrayRef batch, const NestedKey& key) {
  if (batch.empty()) {
    TD_FAIL(BatchSizeError, "the NonTensorStack ", key.repr(),
            " needs a batch dim to hold one value per element, but its TensorDict has batch "
            "size ", SizeRepr(batch), " (set a single value as NonTensorData)");
  }
  if (!NestedAs(values, batch, 0)) {
    TD_FAIL(BatchSizeError, "batch size mismatch for the NonTensorStack ", key.repr(),
            ": its values are ", values.is_array() ? "lists of shape " : "not a list (",
            values.is_array() ? SizeRepr(StackShape(values, batch.size())) : values.type_name(),
            values.is_array() ? "" : ")", ", expected one value per element of the batch size ",
            SizeRepr(batch), " (lists nested as the batch size)");
  }
}

at::Tensor StackTable::Add(const NonTensorData& d, at::IntArrayRef batch,
                           const at::Device& device) {
  const int64_t offset = static_cast<int64_t>(values.size());
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  if (!d.is_stack()) {
    if (values.empty()) {
      kind = d.kind;
    } else {
      uniform = uniform && d.kind == kind && d.data == values[0];
    }
    values.push_back(d.data);
    return at::scalar_tensor(offset, opts).expand(batch);
  }
  uniform = false;
  Flatten(d.data, batch.size(), &values);
  return at::arange(offset, static_cast<int64_t>(values.size()), opts).view(batch);
}

NonTensorData StackTable::Gather(const at::Tensor& index) const {
  if (uniform) return NonTensorData(values.at(0), kind);
  const at::Tensor flat = index.to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = flat.data_ptr<int64_t>();
  if (index.dim() == 0) return NonTensorData(Nest(p, {}, 0, values));
  return NonTensorData::stack(Nest(p, index.sizes(), 0, values));
}

absl::StatusOr<NonTensorData> StackFromFile(nlohmann::json values, at::IntArrayRef batch) {
  if (batch.empty()) return NonTensorData(std::move(values));
  if (!NestedAs(values, batch, 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the NonTensorStack's values are ",
        values.is_array() ? "lists of shape " + SizeRepr(StackShape(values, batch.size()))
                          : std::string("not a list"),
        ", which do not give one value per element of the batch size ", SizeRepr(batch),
        " of the TensorDict holding it"));
  }
  return NonTensorData::stack(std::move(values));
}

void FailStackDoesNotFit(const NestedKey& key, at::IntArrayRef stack_batch,
                         at::IntArrayRef batch) {
  TD_FAIL(ValueError, "the NonTensorStack ", key.repr(), " holds one value per element of batch size ",
          SizeRepr(stack_batch), ", but this operation gives its TensorDict batch size ",
          SizeRepr(batch), " without moving batch elements, so its values have no place "
          "(NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h)");
}

}  // namespace internal
}  // namespace td
