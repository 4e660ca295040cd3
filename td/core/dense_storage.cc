#include "td/core/dense_storage.h"

namespace td {

std::shared_ptr<Storage> MakeDenseStorage(std::vector<int64_t> batch_size,
                                          std::optional<at::Device> device) {
  return std::make_shared<DenseStorage>(std::move(batch_size), device);
}

TD_REGISTER_STORAGE_BACKEND("dense", [](const StorageSpec& spec)
                                         -> absl::StatusOr<std::shared_ptr<Storage>> {
  return MakeDenseStorage(spec.batch_size(), spec.device());
});

void DenseStorage::set_(std::string_view key, const at::Tensor& value) {
  const int64_t i = entries().position(key);
  TORCH_INTERNAL_ASSERT(i >= 0, "set_ on a missing key");
  entries().value(i).mutable_tensor().copy_(value);
}

}  // namespace td
