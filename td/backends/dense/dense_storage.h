// The dense backend: entries held in memory, in insertion order. The default storage of every
// TensorDict built by the constructors. See NOTE [ Storage interface ] in td/core/storage.h.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/core/storage.h"

namespace td {

class DenseStorage final : public Storage {
 public:
  DenseStorage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : Storage(std::move(batch_size), device) {
    holds_values_ = true;
  }

  std::string_view backend_id() const override { return "dense"; }
  Capabilities capabilities() const override {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize;
  }
  size_t size() const override { return entries_.size(); }
  std::vector<std::string> keys() const override;
  bool contains(std::string_view key) const override { return position(key) >= 0; }
  std::optional<Value> get(std::string_view key) const override;
  void set(std::string_view key, Value value) override;
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override;

  const Value* peek(std::string_view key) const override {
    const int64_t i = position(key);
    return i < 0 ? nullptr : &entries_[i].second;
  }
  const std::vector<std::pair<std::string, Value>>* peek_entries() const override {
    return &entries_;
  }
  void append_new(std::vector<std::pair<std::string, Value>> entries) override;
  void reserve(size_t n) { entries_.reserve(n); }

 private:
  // Most TensorDicts hold a handful of entries: the first set() allocates room for this many (not
  // the constructor: operations fill new storages with append_new, which brings its own vector).
  static constexpr size_t kInitialCapacity = 8;
  // Up to this many entries a linear scan beats hashing; past it an index is kept.
  static constexpr size_t kIndexThreshold = 12;
  int64_t position(std::string_view key) const;
  void rebuild_index();

  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, int64_t> index_;  // empty while size() <= kIndexThreshold
};

}  // namespace td
