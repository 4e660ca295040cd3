#include "td/core/nested_key.h"

#include <sstream>

#include "absl/strings/str_join.h"
#include "td/core/errors.h"

namespace td {

NestedKey::NestedKey(std::initializer_list<NestedKey> parts) {
  size_t n = 0;
  for (const NestedKey& p : parts) n += p.size();
  if (n == 0) TD_FAIL(ValueError, "a NestedKey needs at least one component");
  if (n == 1) {
    head_ = parts.begin()->front();
    return;
  }
  nested_.reserve(n);
  for (const NestedKey& p : parts) nested_.insert(nested_.end(), p.begin(), p.end());
}

NestedKey::NestedKey(std::initializer_list<const char*> parts) {
  if (parts.size() == 0) TD_FAIL(ValueError, "a NestedKey needs at least one component");
  if (parts.size() == 1) {
    head_ = *parts.begin();
    return;
  }
  nested_.reserve(parts.size());
  for (const char* p : parts) nested_.emplace_back(p);
}

NestedKey::NestedKey(Parts parts) {
  if (parts.empty()) TD_FAIL(ValueError, "a NestedKey needs at least one component");
  if (parts.size() == 1) {
    head_ = std::move(parts.front());
  } else {
    nested_ = std::move(parts);
  }
}

void KeyRef::push_back(std::string_view part) {
  if (size_ < kInline) {
    inline_[size_++] = part;
    return;
  }
  if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
  heap_.push_back(part);
  ++size_;
}

void KeyRef::init_long(const NestedKey& key) { heap_.assign(key.begin(), key.end()); }

void KeyRef::init_long(std::initializer_list<const char*> parts) {
  if (parts.size() == 0) TD_FAIL(ValueError, "a key needs at least one component");
  heap_.assign(parts.begin(), parts.end());
}

KeyRef::KeyRef(std::initializer_list<KeyRef> parts) {
  for (const KeyRef& p : parts) {
    for (std::string_view part : p) push_back(part);
  }
  if (size_ == 0) TD_FAIL(ValueError, "a key needs at least one component");
}

NestedKey KeyRef::key() const {
  if (size_ == 1) return NestedKey(front());
  return NestedKey(NestedKey::Parts(begin(), end()));
}

std::string KeyRef::repr() const { return key().repr(); }

NestedKey NestedKey::parent() const {
  TORCH_CHECK(is_nested(), "NestedKey ", repr(), " has no parent");
  return NestedKey(Parts(nested_.begin(), nested_.end() - 1));
}

NestedKey NestedKey::operator+(const NestedKey& other) const {
  Parts p(begin(), end());
  p.insert(p.end(), other.begin(), other.end());
  return NestedKey(std::move(p));
}

std::string NestedKey::join(std::string_view sep) const {
  return absl::StrJoin(parts(), absl::string_view(sep.data(), sep.size()));
}

namespace {
void AppendQuoted(std::string* out, const std::string& s) {
  // Python uses double quotes when the string holds a single quote and no double quote.
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  out->push_back(q);
  for (char c : s) {
    if (c == '\\' || (c == q)) out->push_back('\\');
    out->push_back(c);
  }
  out->push_back(q);
}
}  // namespace

std::string NestedKey::repr() const {
  std::string out;
  if (!is_nested()) {
    AppendQuoted(&out, head_);
    return out;
  }
  out.push_back('(');
  for (size_t i = 0; i < nested_.size(); ++i) {
    if (i) out += ", ";
    AppendQuoted(&out, nested_[i]);
  }
  out.push_back(')');
  return out;
}

bool NestedKey::starts_with(const NestedKey& prefix) const {
  if (prefix.size() > size()) return false;
  return std::equal(prefix.begin(), prefix.end(), begin());
}

std::ostream& operator<<(std::ostream& os, const NestedKey& key) { return os << key.repr(); }

std::string KeysRepr(const std::vector<NestedKey>& keys) {
  return "[" + absl::StrJoin(keys, ", ", [](std::string* out, const NestedKey& k) {
           out->append(k.repr());
         }) + "]";
}

std::string KeysRepr(const std::vector<std::string>& keys) {
  return "[" + absl::StrJoin(keys, ", ", [](std::string* out, const std::string& k) {
           out->append(NestedKey(k).repr());
         }) + "]";
}

}  // namespace td
