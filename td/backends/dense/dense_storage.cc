#include "td/backends/dense/dense_storage.h"

namespace td {

std::shared_ptr<Storage> MakeDenseStorage(std::vector<int64_t> batch_size,
                                          std::optional<at::Device> device) {
  return std::make_shared<DenseStorage>(std::move(batch_size), device);
}

TD_REGISTER_STORAGE_BACKEND("dense", [](const StorageSpec& spec)
                                         -> absl::StatusOr<std::shared_ptr<Storage>> {
  return MakeDenseStorage(spec.batch_size(), spec.device());
});

int64_t DenseStorage::position(std::string_view key) const {
  if (index_.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) return static_cast<int64_t>(i);
    }
    return -1;
  }
  auto it = index_.find(absl::string_view(key.data(), key.size()));
  return it == index_.end() ? -1 : it->second;
}

void DenseStorage::rebuild_index() {
  index_.clear();
  if (entries_.size() <= kIndexThreshold) return;
  index_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
}

std::vector<std::string> DenseStorage::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

std::optional<Value> DenseStorage::get(std::string_view key) const {
  const Value* v = peek(key);
  if (v == nullptr) return std::nullopt;
  return *v;
}

void DenseStorage::set(std::string_view key, Value value) {
  const int64_t i = position(key);
  if (i >= 0) {
    entries_[i].second = std::move(value);
    return;
  }
  if (entries_.capacity() == 0) entries_.reserve(kInitialCapacity);
  entries_.emplace_back(std::string(key), std::move(value));
  if (!index_.empty()) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  } else if (entries_.size() > kIndexThreshold) {
    rebuild_index();
  }
}

void DenseStorage::append_new(std::vector<std::pair<std::string, Value>> entries) {
  if (entries_.empty()) {
    entries_ = std::move(entries);
  } else {
    entries_.reserve(entries_.size() + entries.size());
    for (auto& e : entries) entries_.push_back(std::move(e));
  }
  rebuild_index();
}

void DenseStorage::set_(std::string_view key, const at::Tensor& value) {
  const int64_t i = position(key);
  TORCH_INTERNAL_ASSERT(i >= 0, "set_ on a missing key");
  entries_[i].second.mutable_tensor().copy_(value);
}

bool DenseStorage::erase(std::string_view key) {
  const int64_t i = position(key);
  if (i < 0) return false;
  entries_.erase(entries_.begin() + i);
  if (!index_.empty()) rebuild_index();
  return true;
}

}  // namespace td
