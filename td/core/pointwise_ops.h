// The operand type of TensorDict's leaf-wise ops (td::Operand), the (values, indices) pair of
// min / max / cummax / cummin along a dim (td::ValuesIndices), and Python's %, &, |, ^ and ~ over
// TensorDicts with their compound assignments. The member functions are declared in
// td/core/ops.def. Part of //td/core:tensordict; tensordict.h includes this file.
#pragma once

#include <ATen/core/Scalar.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>

#include "td/core/tensordict.h"

namespace td {

// An operand of TensorDict's leaf-wise ops (lerp, maximum, addcmul, remainder, ...): a
// TensorDict (matched by key), a tensor (broadcast against every leaf) or a number. Built
// implicitly from each of these:
//   td.maximum(other_td); td.maximum(at::zeros({})); td.maximum(0.5);
class Operand {
 public:
  Operand(TensorDict td) : v_(std::move(td)) {}                    // NOLINT
  Operand(at::Tensor t) : v_(std::move(t)) {}                      // NOLINT
  Operand(const at::Scalar& s) : v_(s) {}                          // NOLINT
  Operand(double s) : v_(at::Scalar(s)) {}                         // NOLINT
  Operand(float s) : v_(at::Scalar(static_cast<double>(s))) {}     // NOLINT
  Operand(int s) : v_(at::Scalar(static_cast<int64_t>(s))) {}      // NOLINT
  Operand(int64_t s) : v_(at::Scalar(s)) {}                        // NOLINT
  Operand(bool s) : v_(at::Scalar(s)) {}                           // NOLINT
  // A td::TensorClass (anything whose `tensordict()` is a TensorDict): its TensorDict.
  template <class T, class = std::enable_if_t<std::is_convertible_v<
                         decltype(std::declval<const T&>().tensordict()), const TensorDict&>>>
  Operand(const T& x) : v_(x.tensordict()) {}                      // NOLINT

  bool is_tensordict() const { return v_.index() == 0; }
  bool is_tensor() const { return v_.index() == 1; }
  bool is_scalar() const { return v_.index() == 2; }
  const TensorDict& tensordict() const { return std::get<0>(v_); }
  const at::Tensor& tensor() const { return std::get<1>(v_); }
  const at::Scalar& scalar() const { return std::get<2>(v_); }

 private:
  std::variant<TensorDict, at::Tensor, at::Scalar> v_;
};

// Python's `torch.return_types.min(values=..., indices=...)` for TensorDicts: two TensorDicts of
// the same structure. Structured bindings work:
//   auto [values, indices] = td.min_with_indices(0);
struct ValuesIndices {
  TensorDict values;
  TensorDict indices;
};

// Leaf-wise torch.remainder / bitwise_and / bitwise_or / bitwise_xor / bitwise_not; the right
// operand is a TensorDict (matched by key), a tensor or a number (see td::Operand). Throws what
// the member functions throw (KeyError for a missing leaf, LibTorch's error with the key, e.g.
// for a float leaf of &).
//   td::TensorDict parity = steps % 2;
//   td::TensorDict keep = valid & ~done;
TensorDict operator%(const TensorDict& a, const Operand& b);
TensorDict operator&(const TensorDict& a, const Operand& b);
TensorDict operator|(const TensorDict& a, const Operand& b);
TensorDict operator^(const TensorDict& a, const Operand& b);
TensorDict operator~(const TensorDict& a);
TensorDict& operator%=(TensorDict& a, const Operand& b);
TensorDict& operator&=(TensorDict& a, const Operand& b);
TensorDict& operator|=(TensorDict& a, const Operand& b);
TensorDict& operator^=(TensorDict& a, const Operand& b);

}  // namespace td
