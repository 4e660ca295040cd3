// Free operators over TensorDicts (+ - * / and comparisons with TensorDicts and scalars) and the
// *_like constructors, defined in td/core/pointwise_ops.cc and td/core/memory_ops.cc (part of
// //td/core:tensordict; tensordict.h includes this file, so `2 * x + 1` works with tensordict.h
// alone).
#pragma once

#include <ATen/core/Scalar.h>

namespace td {

class TensorDict;

// ---- operators (td/core/pointwise_ops.cc) and *_like (td/core/memory_ops.cc) ---------------
// Leaf-wise arithmetic and comparisons, as the member functions add/sub/mul/div/lt/... (a
// TensorDict operand must hold every leaf of the left-hand one).
//   td::TensorDict y = 2 * x + 1;
//   bool all_positive = (y > 0).all();
TensorDict operator+(const TensorDict& a, const TensorDict& b);
TensorDict operator+(const TensorDict& a, const at::Scalar& b);
TensorDict operator+(const at::Scalar& a, const TensorDict& b);
TensorDict operator-(const TensorDict& a, const TensorDict& b);
TensorDict operator-(const TensorDict& a, const at::Scalar& b);
TensorDict operator-(const at::Scalar& a, const TensorDict& b);
TensorDict operator*(const TensorDict& a, const TensorDict& b);
TensorDict operator*(const TensorDict& a, const at::Scalar& b);
TensorDict operator*(const at::Scalar& a, const TensorDict& b);
TensorDict operator/(const TensorDict& a, const TensorDict& b);
TensorDict operator/(const TensorDict& a, const at::Scalar& b);
TensorDict operator/(const at::Scalar& a, const TensorDict& b);
TensorDict& operator+=(TensorDict& a, const TensorDict& b);
TensorDict& operator+=(TensorDict& a, const at::Scalar& b);
TensorDict& operator-=(TensorDict& a, const TensorDict& b);
TensorDict& operator-=(TensorDict& a, const at::Scalar& b);
TensorDict& operator*=(TensorDict& a, const TensorDict& b);
TensorDict& operator*=(TensorDict& a, const at::Scalar& b);
TensorDict& operator/=(TensorDict& a, const TensorDict& b);
TensorDict& operator/=(TensorDict& a, const at::Scalar& b);
TensorDict operator==(const TensorDict& a, const at::Scalar& b);
TensorDict operator!=(const TensorDict& a, const at::Scalar& b);
TensorDict operator<(const TensorDict& a, const TensorDict& b);
TensorDict operator<(const TensorDict& a, const at::Scalar& b);
TensorDict operator<=(const TensorDict& a, const TensorDict& b);
TensorDict operator<=(const TensorDict& a, const at::Scalar& b);
TensorDict operator>(const TensorDict& a, const TensorDict& b);
TensorDict operator>(const TensorDict& a, const at::Scalar& b);
TensorDict operator>=(const TensorDict& a, const TensorDict& b);
TensorDict operator>=(const TensorDict& a, const at::Scalar& b);

// A new TensorDict with the structure, batch size and device of `td` (non-tensor entries
// carried) and every leaf replaced by at::zeros_like / ones_like / empty_like / full_like /
// rand_like / randn_like of it. LibTorch's errors (e.g. rand_like of an integer leaf) come with
// the key.
//   td::TensorDict buffer = td::zeros_like(batch);
TensorDict zeros_like(const TensorDict& td);
TensorDict ones_like(const TensorDict& td);
TensorDict empty_like(const TensorDict& td);
TensorDict full_like(const TensorDict& td, const at::Scalar& value);
TensorDict rand_like(const TensorDict& td);
TensorDict randn_like(const TensorDict& td);

}  // namespace td
