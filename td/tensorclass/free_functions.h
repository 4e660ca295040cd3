// Free functions over TensorClasses, as td/core/stack.h and td/core/operators.h provide them
// for TensorDicts: td::stack / td::cat / td::unbind, the arithmetic and comparison operators,
// the *_like constructors, allclose and printing. Included by td/tensorclass/tensorclass.h.
// Each returns the argument's class with its non-tensor fields carried. Members are called
// through TensorClass<D>, so fields that hide them (kShadow) do not get in the way.
#pragma once

#include <ATen/core/Scalar.h>

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <type_traits>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/tensorclass/fields.h"

namespace td {
namespace internal::tensorclass {
template <class D, class R>
std::vector<TensorDict> TensorDicts(const R& range) {
  std::vector<TensorDict> out;
  out.reserve(range.size());
  for (const D& d : range) out.push_back(d.tensordict());
  return out;
}
// `combined` (td::stack / td::cat of TensorClasses' TensorDicts), unless a non-tensor field
// became a NonTensorStack because the inputs hold different values: a field holds one value of
// its declared type, so that is a ValueError naming the field and its values.
inline TensorDict CheckCombinedFields(TensorDict combined, const char* op) {
  combined.for_each_entry([&](const std::string& k, const Value& v) {
    if (v.is_non_tensor() && v.non_tensor_data().is_stack()) {
      TD_FAIL(ValueError, op, ": the non-tensor field '", k, "' differs across the inputs (",
              v.non_tensor().dump(), "); a TensorClass field holds one value");
    }
  });
  return combined;
}
}  // namespace internal::tensorclass

// Upstream's is_tensorclass(obj_or_type) / is_tensor_collection(obj_or_type): whether a type
// (or the type of a value) is a TensorClass, or a TensorDict or TensorClass (what every
// TensorDict operation accepts).
//   static_assert(td::is_tensorclass<MyData>() && td::is_tensor_collection<td::TensorDict>());
//   if (td::is_tensor_collection(x)) ...
template <class T>
constexpr bool is_tensorclass() {
  return internal::tensorclass::kIsTensorClass<std::decay_t<T>>;
}
template <class T>
bool is_tensorclass(const T&) {
  return is_tensorclass<T>();
}
template <class T>
constexpr bool is_tensor_collection() {
  return is_tensorclass<T>() || std::is_base_of_v<TensorDict, std::decay_t<T>>;
}
template <class T>
bool is_tensor_collection(const T&) {
  return is_tensor_collection<T>();
}

#define TD_TC_IF_CLASS(D) template <class D, std::enable_if_t<internal::tensorclass::kIsTensorClass<D>, int> = 0>

// Stacks / concatenates TensorClasses of one type along a batch dim (the rules of td::stack /
// td::cat: same fields everywhere — KeyError naming the difference —, batch sizes that fit —
// BatchSizeError —, non-tensor fields equal across the inputs — ValueError naming the field and
// both values). The non-tensor fields are carried.
//   MyData both = td::stack({a, b}, 0);                     // batch [2, ...]
//   MyData all = td::cat(std::vector<MyData>{a, b, c}, 0);
TD_TC_IF_CLASS(D) D stack(const std::vector<D>& items, int64_t dim = 0) {
  return D::wrap(internal::tensorclass::CheckCombinedFields(
      stack(internal::tensorclass::TensorDicts<D>(items), dim), "stack"));
}
TD_TC_IF_CLASS(D) D stack(std::initializer_list<D> items, int64_t dim = 0) {
  return D::wrap(internal::tensorclass::CheckCombinedFields(
      stack(internal::tensorclass::TensorDicts<D>(items), dim), "stack"));
}
TD_TC_IF_CLASS(D) D cat(const std::vector<D>& items, int64_t dim = 0) {
  return D::wrap(internal::tensorclass::CheckCombinedFields(
      cat(internal::tensorclass::TensorDicts<D>(items), dim), "cat"));
}
TD_TC_IF_CLASS(D) D cat(std::initializer_list<D> items, int64_t dim = 0) {
  return D::wrap(internal::tensorclass::CheckCombinedFields(
      cat(internal::tensorclass::TensorDicts<D>(items), dim), "cat"));
}
// The slices along batch dim `dim` (views), as d.unbind(dim).
TD_TC_IF_CLASS(D) std::vector<D> unbind(const D& d, int64_t dim = 0) {
  return static_cast<const TensorClass<D>&>(d).unbind(dim);
}

// zeros_like / ones_like / empty_like / full_like / rand_like / randn_like of every tensor field.
//   MyData buffer = td::zeros_like(data);
TD_TC_IF_CLASS(D) D zeros_like(const D& d) { return D::wrap(zeros_like(d.tensordict())); }
TD_TC_IF_CLASS(D) D ones_like(const D& d) { return D::wrap(ones_like(d.tensordict())); }
TD_TC_IF_CLASS(D) D empty_like(const D& d) { return D::wrap(empty_like(d.tensordict())); }
TD_TC_IF_CLASS(D) D rand_like(const D& d) { return D::wrap(rand_like(d.tensordict())); }
TD_TC_IF_CLASS(D) D randn_like(const D& d) { return D::wrap(randn_like(d.tensordict())); }
TD_TC_IF_CLASS(D) D full_like(const D& d, const at::Scalar& v) {
  return D::wrap(full_like(d.tensordict(), v));
}
// td::allclose over the fields (same fields, batch size, close tensors, equal non-tensor data).
TD_TC_IF_CLASS(D) bool allclose(const D& a, const D& b, const AllCloseOptions& o = {}) {
  return allclose(a.tensordict(), b.tensordict(), o);
}

// Operators: leaf-wise arithmetic and comparisons returning the class, as TensorDict's.
//   MyData y = 2 * x + 1;   bool positive = (y > 0).all();
#define TD_TC_OPERATOR(op)                                                             \
  TD_TC_IF_CLASS(D) D operator op(const D& a, const D& b) {                            \
    return D::wrap(a.tensordict() op b.tensordict());                                  \
  }                                                                                    \
  TD_TC_IF_CLASS(D) D operator op(const D& a, const at::Scalar& b) {                   \
    return D::wrap(a.tensordict() op b);                                               \
  }
TD_TC_OPERATOR(+)
TD_TC_OPERATOR(-)
TD_TC_OPERATOR(*)
TD_TC_OPERATOR(/)
TD_TC_OPERATOR(<)
TD_TC_OPERATOR(<=)
TD_TC_OPERATOR(>)
TD_TC_OPERATOR(>=)
#undef TD_TC_OPERATOR
#define TD_TC_SCALAR_FIRST(op)                                         \
  TD_TC_IF_CLASS(D) D operator op(const at::Scalar& a, const D& b) {   \
    return D::wrap(a op b.tensordict());                               \
  }
TD_TC_SCALAR_FIRST(+)
TD_TC_SCALAR_FIRST(-)
TD_TC_SCALAR_FIRST(*)
TD_TC_SCALAR_FIRST(/)
#undef TD_TC_SCALAR_FIRST
#define TD_TC_COMPOUND(op, method)                                           \
  TD_TC_IF_CLASS(D) D& operator op(D& a, const D& b) {                      \
    return static_cast<TensorClass<D>&>(a).method(b);                        \
  }                                                                          \
  TD_TC_IF_CLASS(D) D& operator op(D& a, const at::Scalar& b) {              \
    return static_cast<TensorClass<D>&>(a).method(b);                        \
  }
TD_TC_COMPOUND(+=, add_)
TD_TC_COMPOUND(-=, sub_)
TD_TC_COMPOUND(*=, mul_)
TD_TC_COMPOUND(/=, div_)
#undef TD_TC_COMPOUND

// Prints d.repr() (Python tensordict's tensorclass layout).
TD_TC_IF_CLASS(D) std::ostream& operator<<(std::ostream& os, const D& d) {
  return os << static_cast<const TensorClass<D>&>(d).repr();
}

#undef TD_TC_IF_CLASS

}  // namespace td
