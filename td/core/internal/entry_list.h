// The entries of one TensorDict level, in insertion order, with a key index for larger levels:
// the container the backends that hold their entries in memory (dense, memmap, shared_memory)
// keep. Backends decide what a write means (copy into a file, move into shared memory, ...);
// this only stores and finds.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "td/core/storage.h"

namespace td {

namespace internal {
// The first and last sizeof(Word) bytes of a and b are equal (n >= sizeof(Word)).
template <class Word>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool SameEnds(const char* a, const char* b, size_t n) {
  Word a0, b0, a1, b1;
  std::memcpy(&a0, a, sizeof(Word));
  std::memcpy(&b0, b, sizeof(Word));
  std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
  std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
  return ((a0 ^ b0) | (a1 ^ b1)) == 0;
}
}  // namespace internal

// True when the n bytes at a and b are equal. Keys are short: up to 16 bytes this is two
// overlapping word compares inline (no call into libc's memcmp, whose call costs as much as a
// whole small-level lookup).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool SameBytes(const char* a, const char* b, size_t n) {
  if (n > 16) return std::memcmp(a, b, n) == 0;
  if (n >= 8) return internal::SameEnds<uint64_t>(a, b, n);
  if (n >= 4) return internal::SameEnds<uint32_t>(a, b, n);
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

class EntryList {
 public:
  using Entry = std::pair<std::string, Value>;

  EntryList() = default;
  // The index refers to this object's entries: an EntryList stays where it was made.
  EntryList(const EntryList&) = delete;
  EntryList& operator=(const EntryList&) = delete;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  Value& value(size_t i) { return entries_[i].second; }

  // Position of `key`, or -1. Small levels (the common case) are scanned inline.
  int64_t position(std::string_view key) const {
    if (entries_.size() > kIndexThreshold) return indexed_position(key);
    const size_t n = entries_.size();
    for (size_t i = 0; i < n; ++i) {
      const std::string& k = entries_[i].first;
      if (k.size() == key.size() && SameBytes(k.data(), key.data(), key.size())) {
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  }
  const Value* find(std::string_view key) const {
    const int64_t i = position(key);
    return i < 0 ? nullptr : &entries_[i].second;
  }
  std::vector<std::string> keys() const;

  // Replaces the value of `key`, or appends it as a new entry; returns its position. A
  // sub-TensorDict value is placed one level below this one (NOTE [ Nesting depth ] in
  // entry_list.cc): throws NestingError, before changing anything, when that would nest a level
  // deeper than kMaxNestingDepth or make the value contain this level.
  size_t set(std::string_view key, Value&& value);
  // Appends entries whose keys the list does not hold yet (placed as by set()).
  void append_new(std::vector<Entry> entries);
  // The depth of this level: 0 for a root, else the deepest depth it was ever set at
  // (NOTE [ Nesting depth ]).
  int depth() const { return depth_; }
  // Removes `key`; false when it was not there.
  bool erase(std::string_view key);

 private:
  // Most levels hold a handful of entries: the first set() allocates room for this many
  // (append_new brings its own vector, so an operation's result allocates once).
  static constexpr size_t kInitialCapacity = 8;
  // Up to this many entries a linear scan beats hashing; past it lookups use the index.
  static constexpr size_t kIndexThreshold = 12;
  // Drops the index; the next lookup of a large level builds it again.
  void reset_index();
  // Builds the index if it is not built (safe from concurrent readers).
  void build_index() const;
  int64_t indexed_position(std::string_view key) const;

  friend void PlaceNested(const EntryList* into, int into_depth, const TensorDict& sub,
                          std::string_view key, bool record);

  // The index holds positions into entries_ and hashes / compares them through the keys stored
  // there (looked up by string_view), so building it copies no key.
  struct PositionHash {
    using is_transparent = void;
    const std::vector<Entry>* entries;
    size_t operator()(uint32_t i) const { return (*this)(std::string_view((*entries)[i].first)); }
    size_t operator()(std::string_view key) const {
      return absl::Hash<absl::string_view>()(absl::string_view(key.data(), key.size()));
    }
  };
  struct PositionEq {
    using is_transparent = void;
    const std::vector<Entry>* entries;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }  // keys are distinct
    bool operator()(uint32_t a, std::string_view key) const { return (*entries)[a].first == key; }
    bool operator()(std::string_view key, uint32_t a) const { return (*entries)[a].first == key; }
  };

  std::vector<Entry> entries_;
  // NOTE [ Lazy key index ]
  // The index is built by the first lookup of a large level, not when a level is filled: most
  // operation results (clone, math, indexing) are iterated or consumed without a lookup by key.
  // Concurrent readers of a const TensorDict may race to build it: `indexed_` (acquire /
  // release) says it is complete, `index_mu_` lets one of them build it. Writers (serialised by
  // the caller, like every write) keep a built index in step or drop it. (A std::mutex: Abseil
  // 20220623 locks an absl::Mutex only through calls that 20260526 deprecates.)
  mutable absl::flat_hash_set<uint32_t, PositionHash, PositionEq> index_{
      0, PositionHash{&entries_}, PositionEq{&entries_}};
  mutable std::atomic<bool> indexed_{false};
  mutable std::mutex index_mu_;
  // Raised through const pointers when a level is placed deeper (a property of the level's
  // position, not of its entries); written only by writes, which the caller serialises.
  mutable int depth_ = 0;
};

// Checks that `sub` can be set under `key` into a level at depth `into_depth` whose entries are
// `into` (nullptr when that level computes its entries): no level of `sub` may end deeper than
// kMaxNestingDepth, and `sub` may not contain `into`. Throws NestingError naming `key` and the
// depth. With `record`, also raises the recorded depth of every level of `sub` that is held in
// an EntryList. See NOTE [ Nesting depth ] in entry_list.cc.
void PlaceNested(const EntryList* into, int into_depth, const TensorDict& sub,
                 std::string_view key, bool record);

// The entry `key` of `s`: the held Value without a copy when `s` holds its entries
// (Storage::held_entries()), else get()'s result kept alive in `*holder`. nullptr when absent.
// Valid until the next write to `s` (or while `*holder` lives).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline const Value* FindEntry(const Storage& s, std::string_view key,
                              std::optional<Value>* holder) {
  if (const EntryList* held = s.held_entries()) return held->find(key);
  *holder = s.get(key);
  return *holder ? &**holder : nullptr;
}

// A storage whose entries are an EntryList: answers every read from it (no entry is ever
// computed, so held_entries() hands out the stored Values). Derived backends implement the
// writes through entries().
class EntryStorage : public Storage {
 public:
  EntryStorage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : Storage(std::move(batch_size), device) {
    held_entries_ = &entries_;
  }

  size_t size() const override { return entries_.size(); }
  std::vector<std::string> keys() const override { return entries_.keys(); }
  bool contains(std::string_view key) const override { return entries_.position(key) >= 0; }
  std::optional<Value> get(std::string_view key) const override {
    const Value* v = entries_.find(key);
    if (v == nullptr) return std::nullopt;
    return *v;
  }

 protected:
  EntryList& entries() { return entries_; }
  const EntryList& entries() const { return entries_; }

 private:
  EntryList entries_;
};

}  // namespace td
