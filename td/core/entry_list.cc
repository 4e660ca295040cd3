#include "td/core/entry_list.h"

namespace td {

int64_t EntryList::position(std::string_view key) const {
  if (index_.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) return static_cast<int64_t>(i);
    }
    return -1;
  }
  auto it = index_.find(absl::string_view(key.data(), key.size()));
  return it == index_.end() ? -1 : it->second;
}

std::vector<std::string> EntryList::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.first);
  return out;
}

size_t EntryList::set(std::string_view key, Value value) {
  const int64_t i = position(key);
  if (i >= 0) {
    entries_[i].second = std::move(value);
    return static_cast<size_t>(i);
  }
  if (entries_.capacity() == 0) entries_.reserve(kInitialCapacity);
  entries_.emplace_back(std::string(key), std::move(value));
  const size_t pos = entries_.size() - 1;
  if (!index_.empty()) {
    index_.emplace(entries_.back().first, static_cast<int64_t>(pos));
  } else if (entries_.size() > kIndexThreshold) {
    rebuild_index();
  }
  return pos;
}

void EntryList::append_new(std::vector<Entry> entries) {
  if (entries_.empty()) {
    entries_ = std::move(entries);
  } else {
    entries_.reserve(entries_.size() + entries.size());
    for (Entry& e : entries) entries_.push_back(std::move(e));
  }
  rebuild_index();
}

bool EntryList::erase(std::string_view key) {
  const int64_t i = position(key);
  if (i < 0) return false;
  entries_.erase(entries_.begin() + i);
  rebuild_index();
  return true;
}

void EntryList::rebuild_index() {
  index_.clear();
  if (entries_.size() <= kIndexThreshold) return;
  index_.reserve(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    index_.emplace(entries_[i].first, static_cast<int64_t>(i));
  }
}

}  // namespace td
