// The one table of TensorDict's leaf-wise unary math family (beyond the ops of math_ops.cc):
// X-macros that td/core/pointwise_members.inc turns into member declarations and
// td/core/pointwise_ops.cc into definitions, so adding an op is one line here.
#pragma once

// Ops with an at::_foreach_<op> / _foreach_<op>_ kernel in LibTorch 1.13 and later: one call
// over all leaves.
#define TD_UNARY_FOREACH_OPS(X) \
  X(sin)                        \
  X(cos)                        \
  X(tan)                        \
  X(asin)                       \
  X(acos)                       \
  X(atan)                       \
  X(sinh)                       \
  X(cosh)                       \
  X(erf)                        \
  X(erfc)                       \
  X(expm1)                      \
  X(log10)                      \
  X(log1p)                      \
  X(log2)                       \
  X(lgamma)                     \
  X(frac)                       \
  X(trunc)

// Ops without a foreach kernel: at::<op> leaf by leaf.
#define TD_UNARY_PLAIN_OPS(X) \
  X(asinh)                    \
  X(acosh)                    \
  X(atanh)                    \
  X(erfinv)                   \
  X(exp2)                     \
  X(rsqrt)                    \
  X(digamma)                  \
  X(sinc)                     \
  X(deg2rad)                  \
  X(rad2deg)
