// NestedKey: the key type of TensorDict — a non-empty sequence of string components.
//
// `"a"` is a one-component key, `{"a", "b"}` reaches entry `b` of the sub-TensorDict `a`, and
// nested braces flatten, as nested tuples do in Python:
//
//   td::NestedKey k = {"nested", {"supernested", {"key"}}};
//   assert(k == td::NestedKey({"nested", "supernested", "key"}));
//   std::cout << k;   // ('nested', 'supernested', 'key')
//
// One-component keys hold just their string (no heap use beyond std::string's own small buffer),
// so building a key from a literal on every call is cheap.
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "absl/hash/hash.h"

namespace td {

class NestedKey {
 public:
  // Components of a nested key; up to four are kept without a heap allocation.
  using Parts = absl::InlinedVector<std::string, 4>;

  // Implicit on purpose: a string is a key, like in Python.
  NestedKey(const char* key) : head_(key) {}                  // NOLINT
  NestedKey(std::string key) : head_(std::move(key)) {}       // NOLINT
  NestedKey(std::string_view key) : head_(key) {}             // NOLINT
  // Concatenates the components of each element: {"a", {"b", "c"}} == ("a", "b", "c").
  // Throws c10::ValueError when the result is empty.
  NestedKey(std::initializer_list<NestedKey> parts);  // NOLINT
  // A braced list of literals, {"a", "b"}: each string is built once, in place.
  NestedKey(std::initializer_list<const char*> parts);  // NOLINT
  // Throws c10::ValueError when `parts` is empty.
  explicit NestedKey(Parts parts);
  explicit NestedKey(const std::vector<std::string>& parts)
      : NestedKey(Parts(parts.begin(), parts.end())) {}

  absl::Span<const std::string> parts() const {
    return nested_.empty() ? absl::Span<const std::string>(&head_, 1)
                           : absl::Span<const std::string>(nested_);
  }
  size_t size() const { return nested_.empty() ? 1 : nested_.size(); }
  bool is_nested() const { return !nested_.empty(); }
  const std::string& front() const { return parts().front(); }
  const std::string& back() const { return parts().back(); }
  const std::string& operator[](size_t i) const { return parts()[i]; }
  auto begin() const { return parts().begin(); }
  auto end() const { return parts().end(); }

  // The key without its last component (`("a","b","c")` -> `("a","b")`); requires is_nested().
  NestedKey parent() const;
  // This key followed by `other`'s components.
  NestedKey operator+(const NestedKey& other) const;
  // Components joined by `sep`: ("a","b") -> "a.b" with sep ".".
  std::string join(std::string_view sep) const;
  // Python's repr: 'a' or ('a', 'b').
  std::string repr() const;
  // True if this key starts with all the components of `prefix`.
  bool starts_with(const NestedKey& prefix) const;

  friend bool operator==(const NestedKey& a, const NestedKey& b) {
    return a.parts() == b.parts();
  }
  friend bool operator!=(const NestedKey& a, const NestedKey& b) { return !(a == b); }
  friend bool operator<(const NestedKey& a, const NestedKey& b) {
    auto pa = a.parts();
    auto pb = b.parts();
    return std::lexicographical_compare(pa.begin(), pa.end(), pb.begin(), pb.end());
  }
  template <typename H>
  friend H AbslHashValue(H h, const NestedKey& k) {
    return H::combine(std::move(h), k.parts());
  }

 private:
  // A one-component key lives in `head_` alone (the common case: no allocation beyond the
  // string's own); a nested key keeps every component in `nested_` (size >= 2).
  std::string head_;
  Parts nested_;
};

std::ostream& operator<<(std::ostream& os, const NestedKey& key);

namespace internal {
// How a write names its key in error messages: the caller's NestedKey, or a flat key kept as a
// string_view, so that a write of a literal key builds no NestedKey unless it fails.
class KeyForErrors {
 public:
  KeyForErrors(const NestedKey& key) : nested_(&key) {}  // NOLINT
  explicit KeyForErrors(std::string_view flat) : flat_(flat) {}
  NestedKey key() const { return nested_ != nullptr ? *nested_ : NestedKey(flat_); }
  std::string repr() const { return key().repr(); }

 private:
  const NestedKey* nested_ = nullptr;
  std::string_view flat_;
};
}  // namespace internal

// Formats a list of keys as Python prints a list: ['a', ('b', 'c')].
std::string KeysRepr(const std::vector<NestedKey>& keys);
std::string KeysRepr(const std::vector<std::string>& keys);

}  // namespace td

template <>
struct std::hash<td::NestedKey> {
  size_t operator()(const td::NestedKey& k) const { return absl::Hash<td::NestedKey>()(k); }
};
