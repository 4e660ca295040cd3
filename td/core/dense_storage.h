// The dense backend: entries held in memory, in insertion order. The default storage of every
// TensorDict built by the constructors; part of //td/core:tensordict so that core registers it
// (no other library has to be linked for a TensorDict to work). See NOTE [ Storage interface ]
// in td/core/storage.h.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "td/core/internal/entry_list.h"
#include "td/core/storage.h"

namespace td {

class DenseStorage final : public EntryStorage {
 public:
  using EntryStorage::EntryStorage;

  std::string_view backend_id() const override { return "dense"; }
  Capabilities capabilities() const override {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize;
  }
  void set(std::string_view key, Value value) override { entries().set(key, std::move(value)); }
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override { return entries().erase(key); }
  void append_new(std::vector<std::pair<std::string, Value>> fresh) override {
    entries().append_new(std::move(fresh));
  }
};

}  // namespace td
