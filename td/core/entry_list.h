// The entries of one TensorDict level, in insertion order, with a key index for larger levels:
// the container the backends that hold their entries in memory (dense, memmap, shared_memory)
// keep. Backends decide what a write means (copy into a file, move into shared memory, ...);
// this only stores and finds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/core/storage.h"

namespace td {

class EntryList {
 public:
  using Entry = std::pair<std::string, Value>;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  Value& value(size_t i) { return entries_[i].second; }

  // Position of `key`, or -1.
  int64_t position(std::string_view key) const;
  const Value* find(std::string_view key) const {
    const int64_t i = position(key);
    return i < 0 ? nullptr : &entries_[i].second;
  }
  std::vector<std::string> keys() const;

  // Replaces the value of `key`, or appends it as a new entry; returns its position.
  size_t set(std::string_view key, Value value);
  // Appends entries whose keys the list does not hold yet.
  void append_new(std::vector<Entry> entries);
  // Removes `key`; false when it was not there.
  bool erase(std::string_view key);

 private:
  // Most levels hold a handful of entries: the first set() allocates room for this many
  // (append_new brings its own vector, so an operation's result allocates once).
  static constexpr size_t kInitialCapacity = 8;
  // Up to this many entries a linear scan beats hashing; past it the index is kept.
  static constexpr size_t kIndexThreshold = 12;
  void rebuild_index();

  std::vector<Entry> entries_;
  absl::flat_hash_map<std::string, int64_t> index_;  // empty while size() <= kIndexThreshold
};

// A storage whose entries are an EntryList: answers every read from it (no entry is ever
// computed, so peek() and peek_entries() hand out the stored Values). Derived backends implement
// the writes.
class EntryStorage : public Storage {
 public:
  EntryStorage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : Storage(std::move(batch_size), device) {
    holds_values_ = true;
  }

  size_t size() const override { return entries_.size(); }
  std::vector<std::string> keys() const override { return entries_.keys(); }
  bool contains(std::string_view key) const override { return entries_.position(key) >= 0; }
  std::optional<Value> get(std::string_view key) const override {
    const Value* v = entries_.find(key);
    if (v == nullptr) return std::nullopt;
    return *v;
  }
  const Value* peek(std::string_view key) const override { return entries_.find(key); }
  const std::vector<std::pair<std::string, Value>>* peek_entries() const override {
    return &entries_.entries();
  }

 protected:
  EntryList entries_;
};

}  // namespace td
