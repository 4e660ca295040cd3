// NestedKey: the key type of TensorDict — a non-empty sequence of string components.
//
// `"a"` is a one-component key, `{"a", "b"}` reaches entry `b` of the sub-TensorDict `a`, and
// nested braces flatten, as nested tuples do in Python:
//
//   td::NestedKey k = {"nested", {"supernested", {"key"}}};
//   assert(k == td::NestedKey({"nested", "supernested", "key"}));
//   std::cout << k;   // ('nested', 'supernested', 'key')
//
// One-component keys keep their single string inline (no heap use beyond std::string's own small
// buffer), so building a key from a literal on every call is cheap.
#pragma once

#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"

namespace td {

class NestedKey {
 public:
  using Parts = absl::InlinedVector<std::string, 1>;

  // Implicit on purpose: a string is a key, like in Python.
  NestedKey(const char* key) : parts_{std::string(key)} {}      // NOLINT
  NestedKey(std::string key) : parts_{std::move(key)} {}        // NOLINT
  NestedKey(std::string_view key) : parts_{std::string(key)} {}  // NOLINT
  // Concatenates the components of each element: {"a", {"b", "c"}} == ("a", "b", "c").
  // Throws c10::ValueError when the result is empty.
  NestedKey(std::initializer_list<NestedKey> parts);  // NOLINT
  // Throws c10::ValueError when `parts` is empty.
  explicit NestedKey(const std::vector<std::string>& parts);
  explicit NestedKey(Parts parts);

  const Parts& parts() const { return parts_; }
  size_t size() const { return parts_.size(); }
  bool is_nested() const { return parts_.size() > 1; }
  const std::string& front() const { return parts_.front(); }
  const std::string& back() const { return parts_.back(); }
  const std::string& operator[](size_t i) const { return parts_[i]; }
  auto begin() const { return parts_.begin(); }
  auto end() const { return parts_.end(); }

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

  friend bool operator==(const NestedKey& a, const NestedKey& b) { return a.parts_ == b.parts_; }
  friend bool operator!=(const NestedKey& a, const NestedKey& b) { return !(a == b); }
  friend bool operator<(const NestedKey& a, const NestedKey& b) {
    return std::lexicographical_compare(a.parts_.begin(), a.parts_.end(), b.parts_.begin(),
                                        b.parts_.end());
  }
  template <typename H>
  friend H AbslHashValue(H h, const NestedKey& k) {
    return H::combine(std::move(h), k.parts_);
  }

 private:
  Parts parts_;
};

std::ostream& operator<<(std::ostream& os, const NestedKey& key);

// Formats a list of keys as Python prints a list: ['a', ('b', 'c')].
std::string KeysRepr(const std::vector<NestedKey>& keys);
std::string KeysRepr(const std::vector<std::string>& keys);

}  // namespace td

template <>
struct std::hash<td::NestedKey> {
  size_t operator()(const td::NestedKey& k) const { return absl::Hash<td::NestedKey>()(k); }
};
