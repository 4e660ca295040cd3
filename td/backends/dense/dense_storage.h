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
  using Storage::Storage;

  std::string_view backend_id() const override { return "dense"; }
  Capabilities capabilities() const override {
    return Capability::kInPlaceWrite | Capability::kNewKeys;
  }
  size_t size() const override { return entries_.size(); }
  std::vector<std::string> keys() const override;
  bool contains(std::string_view key) const override { return position(key) >= 0; }
  std::optional<Value> get(std::string_view key) const override;
  void set(std::string_view key, Value value) override;
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override;

  // Direct access for the core's hot paths (no Value copy). nullptr when absent.
  const Value* find(std::string_view key) const {
    const int64_t i = position(key);
    return i < 0 ? nullptr : &entries_[i].second;
  }
  void reserve(size_t n) { entries_.reserve(n); }

 private:
  // Up to this many entries a linear scan beats hashing; past it an index is kept.
  static constexpr size_t kIndexThreshold = 12;
  int64_t position(std::string_view key) const;
  void rebuild_index();

  std::vector<std::pair<std::string, Value>> entries_;
  absl::flat_hash_map<std::string, int64_t> index_;  // empty while size() <= kIndexThreshold
};

}  // namespace td
