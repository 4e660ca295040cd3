// The field types a td::TensorClass may declare, and how each is stored in the TensorClass's
// TensorDict (NOTE [ TensorClass storage ] in td/tensorclass/tensorclass.h):
//
//   field type                          stored as                 accessor returns
//   at::Tensor                          tensor entry              at::Tensor
//   td::TensorDict                      nested TensorDict         td::TensorDict (a handle)
//   a td::TensorClass (e.g. Inner)      nested TensorDict         Inner (a handle)
//   std::string                         non-tensor data (JSON)    std::string
//   bool, integers, float, double       non-tensor data (JSON)    the declared type
//   nlohmann::json                      non-tensor data (JSON)    nlohmann::json
//   std::optional<any of the above>     absent while nullopt      std::optional<...>
//
// Fields without std::optional are required: construction without them is a KeyError naming
// them, unless the field declares a default (NOTE [ Field defaults ]). Any other type is refused
// at compile time by a static_assert in TD_TENSORCLASS.
//
// NOTE [ Field defaults ]
// A field declared `(Type, name, default)` takes `default` when a constructor is not given it:
// the named constructor and td::from_dict (td/tensorclass/dict.h) when the name is absent, the
// positional constructor when td::use_default is passed in its place. `default` is an expression
// evaluated anew each time it is needed (so a tensor default is never shared between objects:
// upstream's default_factory), or a callable taking no arguments whose result is used (upstream's
// default_factory=fn). A tensor or TensorDict default must start with the object's batch size
// (BatchSizeError naming the field otherwise). A default containing a top-level comma is
// parenthesised, as types are: `(nlohmann::json, info, (nlohmann::json{{"k", 1}}))`.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "nlohmann/json.hpp"
#include "td/core/errors.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal::tensorclass {

// Base of every td::TensorClass<Derived>, so traits can recognise them.
struct TensorClassTag {};
template <class T>
inline constexpr bool kIsTensorClass = std::is_base_of_v<TensorClassTag, T>;

// The tag of the constructor that wraps a TensorDict without checking it.
struct WrapTag {};

// What a caller passes for one field by name (TensorClass's named-field constructor):
//   MyData({{"image", images}, {"label", labels}, {"name", "cifar"}}, {100});
class FieldValue {
 public:
  FieldValue(at::Tensor t) : v_(std::move(t)) {}                    // NOLINT
  FieldValue(TensorDict t) : v_(std::move(t)) {}                    // NOLINT
  template <class D, std::enable_if_t<kIsTensorClass<D>, int> = 0>  // NOLINT
  FieldValue(const D& d) : v_(d.tensordict()) {}                    // NOLINT
  FieldValue(const char* s) : v_(nlohmann::json(s)) {}              // NOLINT
  FieldValue(std::string s) : v_(nlohmann::json(std::move(s))) {}   // NOLINT
  template <class N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
  FieldValue(N n) : v_(nlohmann::json(n)) {}                        // NOLINT
  FieldValue(nlohmann::json j) : v_(std::move(j)) {}                // NOLINT
  FieldValue(std::nullopt_t) {}                                     // NOLINT

  bool is_none() const { return v_.index() == 0; }
  bool is_tensor() const { return v_.index() == 1; }
  bool is_tensordict() const { return v_.index() == 2; }
  bool is_json() const { return v_.index() == 3; }
  const at::Tensor& tensor() const { return std::get<1>(v_); }
  const TensorDict& tensordict() const { return std::get<2>(v_); }
  const nlohmann::json& json() const { return std::get<3>(v_); }
  // "None", "Tensor", "TensorDict" or "JSON <type>" (for error messages).
  std::string kind() const;

 private:
  std::variant<std::monostate, at::Tensor, TensorDict, nlohmann::json> v_;
};

// "" when the JSON value `j` fits a non-tensor field of kind `want` ("string", "bool",
// "integer", "number", "json"), else what it is instead.
std::string JsonMismatch(const nlohmann::json& j, std::string_view want);
// "" when the JSON number `j` lies in [lo, hi], else what it is instead (naming `type`).
std::string IntegerOutOfRange(const nlohmann::json& j, int64_t lo, uint64_t hi,
                              std::string_view type);
// "" when the JSON number `j` is within a float's range (its magnitude at most FLT_MAX), else
// what it is instead.
std::string FloatOutOfRange(const nlohmann::json& j);

// The C++ name of an arithmetic field type: "bool", "int32_t", "uint8_t", "float", "double".
template <class T>
constexpr const char* ArithmeticName() {
  if constexpr (std::is_same_v<T, bool>) {
    return "bool";
  } else if constexpr (std::is_floating_point_v<T>) {
    return sizeof(T) == 4 ? "float" : sizeof(T) == 8 ? "double" : "long double";
  } else if constexpr (std::is_signed_v<T>) {
    return sizeof(T) == 1 ? "int8_t" : sizeof(T) == 2 ? "int16_t" : sizeof(T) == 4 ? "int32_t"
                                                                                    : "int64_t";
  } else {
    return sizeof(T) == 1 ? "uint8_t" : sizeof(T) == 2 ? "uint16_t" : sizeof(T) == 4 ? "uint32_t"
                                                                                     : "uint64_t";
  }
}

// Throws TypeError: "<Class> field '<name>' holds <what>, but it is declared as <declared>".
[[noreturn]] void FailFieldType(std::string_view cls, std::string_view name,
                                std::string_view what, std::string_view declared);

template <class T, class = void>
struct FieldTraits {
  static constexpr bool kSupported = false;
};

// Shared by every field kind: `check` returns "" when an entry fits, else what it is instead.
template <>
struct FieldTraits<at::Tensor> {
  static constexpr bool kSupported = true;
  static constexpr bool kRequired = true;
  static constexpr const char* kDeclared = "at::Tensor";
  using Get = at::Tensor;
  static at::Tensor read(const TensorDict& td, const NestedKey& key) { return td.get(key); }
  static Value to_value(at::Tensor v) { return Value(std::move(v)); }
  static std::string check(const Value& v) {
    return v.is_tensor() ? std::string() : std::string("a ") + std::string(v.kind());
  }
  static Value from_field(const FieldValue& f, std::string_view cls, std::string_view name) {
    if (!f.is_tensor()) FailFieldType(cls, name, "a " + f.kind(), kDeclared);
    return Value(f.tensor());
  }
};

template <>
struct FieldTraits<TensorDict> {
  static constexpr bool kSupported = true;
  static constexpr bool kRequired = true;
  static constexpr const char* kDeclared = "td::TensorDict";
  using Get = TensorDict;
  static TensorDict read(const TensorDict& td, const NestedKey& key) {
    return td.get_tensordict(key);
  }
  static Value to_value(TensorDict v) { return Value(std::move(v)); }
  static std::string check(const Value& v) {
    return v.is_tensordict() ? std::string() : std::string("a ") + std::string(v.kind());
  }
  static Value from_field(const FieldValue& f, std::string_view cls, std::string_view name) {
    if (!f.is_tensordict()) FailFieldType(cls, name, "a " + f.kind(), kDeclared);
    return Value(f.tensordict());
  }
};

// A nested TensorClass: its TensorDict is the nested entry.
template <class D>
struct FieldTraits<D, std::enable_if_t<kIsTensorClass<D>>> {
  static constexpr bool kSupported = true;
  static constexpr bool kRequired = true;
  static constexpr const char* kDeclared = D::kClassName;
  using Get = D;
  static D read(const TensorDict& td, const NestedKey& key) {
    return D::wrap(td.get_tensordict(key));
  }
  static Value to_value(const D& v) { return Value(v.tensordict()); }
  static std::string check(const Value& v) {
    if (!v.is_tensordict()) return std::string("a ") + std::string(v.kind());
    std::string why = D::check_tensordict(v.tensordict());
    return why.empty() ? why : std::string("a TensorDict that is not a ") + D::kClassName + ": " + why;
  }
  static Value from_field(const FieldValue& f, std::string_view cls, std::string_view name) {
    if (!f.is_tensordict()) FailFieldType(cls, name, "a " + f.kind(), kDeclared);
    std::string why = check(Value(f.tensordict()));
    if (!why.empty()) FailFieldType(cls, name, why, kDeclared);
    return Value(f.tensordict());
  }
};

// Non-tensor fields: JSON values stored as td::NonTensorData.
template <class T>
struct JsonFieldTraits {
  static constexpr bool kSupported = true;
  static constexpr bool kRequired = true;
  static constexpr const char* kWant = std::is_same_v<T, std::string>      ? "string"
                                       : std::is_same_v<T, bool>           ? "bool"
                                       : std::is_integral_v<T>             ? "integer"
                                       : std::is_floating_point_v<T>       ? "number"
                                                                           : "json";
  static constexpr const char* kDeclared = []() constexpr {
    if constexpr (std::is_same_v<T, std::string>) {
      return "std::string";
    } else if constexpr (std::is_same_v<T, nlohmann::json>) {
      return "nlohmann::json";
    } else {
      return ArithmeticName<T>();
    }
  }();
  using Get = T;
  // "" when `j` is a T: of the right JSON type and, for numbers, within T's range (a value that
  // would wrap or become infinite is refused, never converted).
  static std::string mismatch(const nlohmann::json& j) {
    std::string why = JsonMismatch(j, kWant);
    if (!why.empty()) return why;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return IntegerOutOfRange(j, static_cast<int64_t>(std::numeric_limits<T>::min()),
                               static_cast<uint64_t>(std::numeric_limits<T>::max()), kDeclared);
    } else if constexpr (std::is_same_v<T, float>) {
      return FloatOutOfRange(j);
    } else {
      return why;
    }
  }
  static T read(const TensorDict& td, const NestedKey& key) {
    nlohmann::json j = td.get_non_tensor(key);
    std::string why = mismatch(j);
    if (!why.empty()) FailFieldType("TensorClass", key.repr(), why, kDeclared);
    if constexpr (std::is_same_v<T, nlohmann::json>) {
      return j;
    } else {
      return j.template get<T>();
    }
  }
  static Value to_value(T v) { return Value(NonTensorData(nlohmann::json(std::move(v)))); }
  static std::string check(const Value& v) {
    if (!v.is_non_tensor()) return std::string("a ") + std::string(v.kind());
    return mismatch(v.non_tensor());
  }
  static Value from_field(const FieldValue& f, std::string_view cls, std::string_view name) {
    if (!f.is_json()) FailFieldType(cls, name, "a " + f.kind(), kDeclared);
    std::string why = mismatch(f.json());
    if (!why.empty()) FailFieldType(cls, name, why, kDeclared);
    // Normalise through T (an integer given for a double field is stored as a double).
    if constexpr (std::is_same_v<T, nlohmann::json>) {
      return Value(NonTensorData(f.json()));
    } else {
      return to_value(f.json().template get<T>());
    }
  }
};

template <>
struct FieldTraits<std::string> : JsonFieldTraits<std::string> {};
template <>
struct FieldTraits<nlohmann::json> : JsonFieldTraits<nlohmann::json> {};
template <class T>
struct FieldTraits<T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, char>>>
    : JsonFieldTraits<T> {};

// std::optional<T>: not required; nullopt while the entry is absent.
template <class T>
struct FieldTraits<std::optional<T>, std::enable_if_t<FieldTraits<T>::kSupported>> {
  static constexpr bool kSupported = true;
  static constexpr bool kRequired = false;
  static constexpr const char* kDeclared = FieldTraits<T>::kDeclared;
  using Get = std::optional<typename FieldTraits<T>::Get>;
  static Get read(const TensorDict& td, const NestedKey& key) {
    if (!td.contains(key)) return std::nullopt;
    return FieldTraits<T>::read(td, key);
  }
  static std::optional<Value> to_value(std::optional<T> v) {
    if (!v) return std::nullopt;
    return FieldTraits<T>::to_value(*std::move(v));
  }
  static std::string check(const Value& v) { return FieldTraits<T>::check(v); }
  static Value from_field(const FieldValue& f, std::string_view cls, std::string_view name) {
    return FieldTraits<T>::from_field(f, cls, name);
  }
};

// ---- defaults (NOTE [ Field defaults ]) ----------------------------------------------------
// The last argument TD_TENSORCLASS passes to its per-field macros, after the optional default.
struct DefaultEnd {};
// A field's default: `d()` when `d` is callable with no arguments, else `d`, as a T.
template <class T, class U>
T MakeDefault(U&& d, DefaultEnd) {
  if constexpr (std::is_invocable_v<U&>) {
    return T(d());
  } else {
    return T(std::forward<U>(d));
  }
}
// The tag of td::use_default.
struct UseDefault {
  explicit constexpr UseDefault(int) {}
};
// The positional constructor's parameter for a field with a default: a value of the field's type
// (any argument that converts to it) or td::use_default.
template <class T>
class OrDefault {
 public:
  OrDefault(UseDefault) {}  // NOLINT(google-explicit-constructor)
  template <class U,
            std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                 !std::is_same_v<std::decay_t<U>, UseDefault> &&
                                 !std::is_same_v<std::decay_t<U>, OrDefault>,
                             int> = 0>
  OrDefault(U&& v) : v_(std::in_place, std::forward<U>(v)) {}  // NOLINT
  bool given() const { return v_.has_value(); }
  T take() && { return *std::move(v_); }

 private:
  std::optional<T> v_;
};

template <class T>
struct IsOptional : std::false_type {
  using Inner = T;
};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {
  using Inner = T;
};

}  // namespace internal::tensorclass

// In place of a positional constructor argument, the field's declared default
// (NOTE [ Field defaults ] in td/tensorclass/fields.h):
//   Config c(weights, td::use_default, {8});
inline constexpr internal::tensorclass::UseDefault use_default{0};

// One field given by name: `{"image", images}`.
struct NamedField {
  NamedField(std::string n, internal::tensorclass::FieldValue v) : name(std::move(n)), value(std::move(v)) {}
  std::string name;
  internal::tensorclass::FieldValue value;
};

}  // namespace td
