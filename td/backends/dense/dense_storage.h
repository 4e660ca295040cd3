// The dense backend: entries held in memory, in insertion order. The default storage of every
// TensorDict built by the constructors. See NOTE [ Storage interface ] in td/core/storage.h.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "td/core/entry_list.h"
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
  std::vector<std::string> keys() const override { return entries_.keys(); }
  bool contains(std::string_view key) const override { return entries_.position(key) >= 0; }
  std::optional<Value> get(std::string_view key) const override;
  void set(std::string_view key, Value value) override { entries_.set(key, std::move(value)); }
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override { return entries_.erase(key); }

  const Value* peek(std::string_view key) const override { return entries_.find(key); }
  const std::vector<std::pair<std::string, Value>>* peek_entries() const override {
    return &entries_.entries();
  }
  void append_new(std::vector<std::pair<std::string, Value>> entries) override {
    entries_.append_new(std::move(entries));
  }

 private:
  EntryList entries_;
};

}  // namespace td
