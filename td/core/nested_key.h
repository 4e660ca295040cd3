// NestedKey: the key type of TensorDict — a non-empty sequence of string components.
//
// `"a"` is a one-component key, `{"a", "b"}` reaches entry `b` of the sub-TensorDict `a`, and
// nested braces flatten, as nested tuples do in Python:
//
//   td::NestedKey k = {"nested", {"supernested", {"key"}}};
//   assert(k == td::NestedKey({"nested", "supernested", "key"}));
//   std::cout << k;   // ('nested', 'supernested', 'key')
//
// NestedKey owns its strings: it is what keys() returns and what a program stores. Operations
// take their key as a KeyRef (below, NOTE [ Key parameters ]), a view that every form of key
// converts to without allocating.
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

// NOTE [ Key parameters ]
// KeyRef is how an operation takes a key: a view of the caller's strings, built where the call is
// written and valid until the call returns, so that a key written as a literal, a std::string
// or a NestedKey costs no allocation on the way in, whatever its length. It converts from
// everything a NestedKey does -- "a", std::string, std::string_view, a NestedKey, {"a", "b"}
// and nested braces {"a", {"b", "c"}} -- and keeps up to four components inline. It never
// outlives the call it is passed to: store a NestedKey (`ref.key()`) instead.
class KeyRef {
 public:
  KeyRef(const char* key) : size_(1) { inline_[0] = key; }                // NOLINT
  KeyRef(const std::string& key) : size_(1) { inline_[0] = key; }         // NOLINT
  KeyRef(std::string_view key) : size_(1) { inline_[0] = key; }           // NOLINT
  KeyRef(const NestedKey& key) : size_(key.size()) {                      // NOLINT
    if (size_ > kInline) {
      init_long(key);
      return;
    }
    std::string_view* out = inline_;
    for (const std::string& part : key) *out++ = part;
  }
  // {"a", "b"}. Throws c10::ValueError when empty. Inline, so that the lengths of literals are
  // known at the call site.
  KeyRef(std::initializer_list<const char*> parts) : size_(parts.size()) {  // NOLINT
    if (size_ == 0 || size_ > kInline) {
      init_long(parts);
      return;
    }
    std::string_view* out = inline_;
    for (const char* part : parts) *out++ = part;
  }
  // {"a", {"b", "c"}}, {prefix, "b"}: the components of each element, in order.
  KeyRef(std::initializer_list<KeyRef> parts);  // NOLINT

  absl::Span<const std::string_view> parts() const { return {data(), size_}; }
  size_t size() const { return size_; }
  bool is_nested() const { return size_ > 1; }
  std::string_view front() const { return data()[0]; }
  std::string_view back() const { return data()[size_ - 1]; }
  std::string_view operator[](size_t i) const { return data()[i]; }
  const std::string_view* begin() const { return data(); }
  const std::string_view* end() const { return data() + size_; }

  // The owning key (allocates what std::string does).
  NestedKey key() const;
  // Python's repr, as NestedKey::repr().
  std::string repr() const;

 private:
  // Keys of up to kInline components (all but the deepest) live in inline_; longer ones in
  // heap_. A plain array rather than a small-vector type: a one-component key is built with two
  // stores, inline at the call site, and every get / set / contains starts by building one.
  static constexpr size_t kInline = 4;
  const std::string_view* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
  void push_back(std::string_view part);
  // The constructors' case of no parts (throws) or more than kInline.
  void init_long(std::initializer_list<const char*> parts);
  void init_long(const NestedKey& key);

  std::string_view inline_[kInline];
  size_t size_ = 0;
  std::vector<std::string_view> heap_;
};


// Formats a list of keys as Python prints a list: ['a', ('b', 'c')].
std::string KeysRepr(const std::vector<NestedKey>& keys);
std::string KeysRepr(const std::vector<std::string>& keys);

}  // namespace td

template <>
struct std::hash<td::NestedKey> {
  size_t operator()(const td::NestedKey& k) const { return absl::Hash<td::NestedKey>()(k); }
};
