// Element-wise ops over every leaf: arithmetic (+ - * / pow, rsub), zero_ / fill_, clamp
// (clamp_min / clamp_max), the unary math family, comparisons, the is* predicates (isnan, ...),
// lerp, maximum / minimum, addcmul / addcdiv, remainder (mod), logical_and and the bitwise ops,
// with their operators. Declared in td/core/ops_math.def and td/core/operators.h /
// td/core/pointwise_ops.h; every op runs on the one leaf-wise engine of
// td/core/internal/leafwise.h (LeafwiseOut / LeafwiseIn).
//
// NOTE [ Leaf-wise math ]
// Every operation here maps over the leaves with the machinery of NOTE [ Leaf maps ]
// (td/core/internal/leaves.h). Where LibTorch has a `_foreach_*` kernel, the whole leaf list goes through
// one call; if that call throws, the operation reruns leaf by leaf (out-of-place operations
// only, which have no side effects) so the error names the key. In-place operations validate
// every leaf first -- the result dtype can be cast to the leaf's dtype, an operand broadcasts
// to the leaf's shape, no leaf that requires grad is modified under grad mode -- by running the
// op on one-element tensors of the leaves' dtypes, and only then write, so a failing call
// changes nothing.
#include <ATen/ATen.h>

#include "td/compat/foreach.h"
#include "td/compat/torch.h"
#include "td/core/internal/leafwise.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::ForeachInFn;
using internal::ForeachOutFn;
using internal::LeafArg;
using internal::LeafwiseIn;
using internal::LeafwiseOut;
using internal::ResolvedOperand;
using internal::ValueCheckFn;

using ListKernel = std::function<std::vector<at::Tensor>(at::TensorList, const ResolvedOperand&)>;
using ListKernelIn = std::function<void(at::TensorList, const ResolvedOperand&)>;
using LeafKernel = std::function<at::Tensor(const at::Tensor&, const LeafArg&)>;
using LeafKernelIn = std::function<void(at::Tensor&, const LeafArg&)>;

// One operand (a TensorDict or a number): `foreach` over all leaves when given, else `each` leaf
// by leaf (NOTE [ Leaf-wise math ]).
TensorDict Binary(const TensorDict& td, const Operand& other, const ListKernel& foreach,
                  const LeafKernel& each, const char* what) {
  ForeachOutFn all;
  if (foreach) {
    all = [&](at::TensorList l, const std::vector<ResolvedOperand>& r)
        -> std::optional<std::vector<at::Tensor>> { return foreach(l, r[0]); };
  }
  return LeafwiseOut(
      td, {&other}, all, [&](const at::Tensor& x, const std::vector<LeafArg>& a) { return each(x, a[0]); },
      what);
}
TensorDict& BinaryIn(TensorDict& td, const Operand& other, const ListKernelIn& foreach,
                     const LeafKernelIn& each, const char* op, const ValueCheckFn& values = {}) {
  ForeachInFn all;
  if (foreach) {
    all = [&](at::TensorList l, const std::vector<ResolvedOperand>& r) {
      foreach(l, r[0]);
      return true;
    };
  }
  return LeafwiseIn(
      td, {&other}, all, [&](at::Tensor& x, const std::vector<LeafArg>& a) { each(x, a[0]); }, op,
      values);
}

bool IsIntegral(const at::Tensor& t) { return at::isIntegralType(t.scalar_type(), true); }

// The value checks of in-place ops whose kernels fail part-way on integer leaves.
// remainder_: an integer leaf by an integer operand holding a zero (a zero number is refused by
// the probe already).
// remainder_'s value check: an integer leaf by an integer operand holding a zero. A tensor
// operand is the same tensor for every leaf (ResolvedOperand), so it is scanned once per call.
ValueCheckFn NoIntegerZeroDivisor() {
  return [scanned = static_cast<const c10::TensorImpl*>(nullptr)](
             const at::Tensor& leaf, const std::vector<LeafArg>& args) mutable {
    const LeafArg& a = args[0];
    if (a.s || !IsIntegral(leaf) || !IsIntegral(a.t)) return;
    if (a.t.unsafeGetTensorImpl() == scanned) return;
    if ((a.t == 0).any().item<bool>()) {
      TD_FAIL(ValueError, "integer division by zero: the operand holds a zero");
    }
    scanned = a.t.unsafeGetTensorImpl();
  };
}

void RequireTensorOperand(const Operand& o, const char* op, const char* name) {
  if (o.is_scalar()) {
    TD_FAIL(TypeError, op, ": ", name, " must be a TensorDict or a tensor, got the number ",
                    o.scalar().toDouble());
  }
}

at::Tensor Lerp(const at::Tensor& x, const std::vector<LeafArg>& a) {
  return a[1].s ? at::lerp(x, a[0].t, *a[1].s) : at::lerp(x, a[0].t, a[1].t);
}
void LerpIn(at::Tensor& x, const std::vector<LeafArg>& a) {
  if (a[1].s) {
    x.lerp_(a[0].t, *a[1].s);
  } else {
    x.lerp_(a[0].t, a[1].t);
  }
}

// One _foreach_lerp kernel where LibTorch has it (td/compat/foreach.h); else leaf by leaf.
ForeachOutFn LerpForeach() {
  if (!compat::kHasForeachLerp) return {};
  return [](at::TensorList l, const std::vector<ResolvedOperand>& r) {
    return r[1].is_scalar() ? compat::ForeachLerp(l, r[0].list, *r[1].scalar)
                            : compat::ForeachLerp(l, r[0].list, r[1].list);
  };
}
ForeachInFn LerpForeachIn() {
  if (!compat::kHasForeachLerp) return {};
  return [](at::TensorList l, const std::vector<ResolvedOperand>& r) {
    return r[1].is_scalar() ? compat::ForeachLerp_(l, r[0].list, *r[1].scalar)
                            : compat::ForeachLerp_(l, r[0].list, r[1].list);
  };
}

}  // namespace

// ---- arithmetic ---------------------------------------------------------------------------
// A TensorDict operand runs _foreach_<op>(leaves, its leaves), a number _foreach_<op>(leaves, s).

#define TD_ARITH_(name, what, ALPHA_PARAM, ALPHA_ARG)                                            \
  TensorDict TensorDict::name(const TensorDict& other ALPHA_PARAM) const {                       \
    return Binary(                                                                               \
        *this, other,                                                                            \
        [&](at::TensorList l, const ResolvedOperand& r) {                                        \
          return at::_foreach_##name(l, r.list ALPHA_ARG);                                       \
        },                                                                                       \
        [&](const at::Tensor& x, const LeafArg& a) { return at::name(x, a.t ALPHA_ARG); }, what); \
  }                                                                                              \
  TensorDict TensorDict::name(const at::Scalar& other) const {                                   \
    return Binary(                                                                               \
        *this, other,                                                                            \
        [&](at::TensorList l, const ResolvedOperand& r) {                                        \
          return at::_foreach_##name(l, *r.scalar);                                              \
        },                                                                                       \
        [&](const at::Tensor& x, const LeafArg& a) { return at::name(x, *a.s); }, what);         \
  }                                                                                              \
  TensorDict& TensorDict::name##_(const TensorDict& other ALPHA_PARAM) {                         \
    return BinaryIn(                                                                             \
        *this, other,                                                                            \
        [&](at::TensorList l, const ResolvedOperand& r) {                                        \
          at::_foreach_##name##_(l, r.list ALPHA_ARG);                                           \
        },                                                                                       \
        [&](at::Tensor& x, const LeafArg& a) { x.name##_(a.t ALPHA_ARG); }, #name "_");          \
  }                                                                                              \
  TensorDict& TensorDict::name##_(const at::Scalar& other) {                                     \
    return BinaryIn(                                                                             \
        *this, other,                                                                            \
        [&](at::TensorList l, const ResolvedOperand& r) { at::_foreach_##name##_(l, *r.scalar); }, \
        [&](at::Tensor& x, const LeafArg& a) { x.name##_(*a.s); }, #name "_");                   \
  }
#define TD_COMMA_ ,
TD_ARITH_(add, "adding", TD_COMMA_ const at::Scalar& alpha, TD_COMMA_ alpha)
TD_ARITH_(sub, "subtracting", TD_COMMA_ const at::Scalar& alpha, TD_COMMA_ alpha)
TD_ARITH_(mul, "multiplying", , )
TD_ARITH_(div, "dividing", , )
#undef TD_COMMA_
#undef TD_ARITH_

TensorDict TensorDict::pow(const TensorDict& exponent) const {
  return Binary(*this, exponent, {},
                [](const at::Tensor& x, const LeafArg& a) { return at::pow(x, a.t); },
                "raising to a power");
}
TensorDict TensorDict::pow(const at::Scalar& exponent) const {
  return Binary(*this, exponent, {},
                [](const at::Tensor& x, const LeafArg& a) { return at::pow(x, *a.s); },
                "raising to a power");
}
TensorDict& TensorDict::pow_(const TensorDict& exponent) {
  return BinaryIn(*this, exponent, {}, [](at::Tensor& x, const LeafArg& a) { x.pow_(a.t); },
                  "pow_");
}
TensorDict& TensorDict::pow_(const at::Scalar& exponent) {
  return BinaryIn(*this, exponent, {}, [](at::Tensor& x, const LeafArg& a) { x.pow_(*a.s); },
                  "pow_");
}

// ---- zero_, fill_, clamp ------------------------------------------------------------------

TensorDict& TensorDict::zero_() {
  return LeafwiseIn(
      *this, {},
      [](at::TensorList l, const std::vector<ResolvedOperand>&) {
        at::_foreach_zero_(l);
        return true;
      },
      [](at::Tensor& x, const std::vector<LeafArg>&) { x.zero_(); }, "zero_");
}

TensorDict& TensorDict::fill_(const at::Scalar& value) {
  return LeafwiseIn(
      *this, {}, {}, [&](at::Tensor& x, const std::vector<LeafArg>&) { x.fill_(value); }, "fill_");
}

TensorDict& TensorDict::fill_(KeyRef key, const at::Scalar& value) {
  const at::Tensor t = get(key);
  return set_(key, internal::WithKeyContext(key, "fill_ of", [&] { return at::full_like(t, value); }));
}

// ---- state dict with metadata -------------------------------------------------------------

TensorDict TensorDict::clamp(const std::optional<at::Scalar>& min,
                             const std::optional<at::Scalar>& max) const {
  if (!min && !max) TD_FAIL(ValueError, "clamp: at least one of min and max is needed");
  return LeafwiseOut(
      *this, {}, {},
      [&](const at::Tensor& t, const std::vector<LeafArg>&) {
        return at::clamp(t, min ? compat::Optional<at::Scalar>(*min) : compat::kNullopt,
                         max ? compat::Optional<at::Scalar>(*max) : compat::kNullopt);
      },
      "clamping");
}

TensorDict& TensorDict::clamp_(const std::optional<at::Scalar>& min,
                               const std::optional<at::Scalar>& max) {
  if (!min && !max) TD_FAIL(ValueError, "clamp_: at least one of min and max is needed");
  return LeafwiseIn(
      *this, {}, {},
      [&](at::Tensor& t, const std::vector<LeafArg>&) {
        t.clamp_(min ? compat::Optional<at::Scalar>(*min) : compat::kNullopt,
                 max ? compat::Optional<at::Scalar>(*max) : compat::kNullopt);
      },
      "clamp_");
}

// ---- comparisons --------------------------------------------------------------------------

#define TD_COMPARE_(name)                                                                     \
  TensorDict TensorDict::name(const at::Scalar& other) const {                                \
    return Binary(*this, other, {},                                                           \
                  [](const at::Tensor& x, const LeafArg& a) { return at::name(x, *a.s); },    \
                  "comparing");                                                               \
  }
#define TD_COMPARE_TD_(name)                                                                  \
  TD_COMPARE_(name)                                                                           \
  TensorDict TensorDict::name(const TensorDict& other) const {                                \
    return Binary(*this, other, {},                                                           \
                  [](const at::Tensor& x, const LeafArg& a) { return at::name(x, a.t); },     \
                  "comparing");                                                               \
  }
TD_COMPARE_(eq)
TD_COMPARE_(ne)
TD_COMPARE_TD_(lt)
TD_COMPARE_TD_(le)
TD_COMPARE_TD_(gt)
TD_COMPARE_TD_(ge)
#undef TD_COMPARE_TD_
#undef TD_COMPARE_

// ---- lerp ---------------------------------------------------------------------------------

TensorDict TensorDict::lerp(const Operand& end, const Operand& weight) const {
  RequireTensorOperand(end, "lerp", "end");
  return LeafwiseOut(*this, {&end, &weight}, LerpForeach(), Lerp, "lerp of");
}
TensorDict& TensorDict::lerp_(const Operand& end, const Operand& weight) {
  RequireTensorOperand(end, "lerp_", "end");
  return LeafwiseIn(*this, {&end, &weight}, LerpForeachIn(), LerpIn, "lerp_");
}

// ---- maximum / minimum --------------------------------------------------------------------

#define TD_MAXMIN(name, clamp)                                                                \
  TensorDict TensorDict::name(const Operand& other) const {                                   \
    return LeafwiseOut(                                                                       \
        *this, {&other},                                                                      \
        [](at::TensorList l, const std::vector<ResolvedOperand>& r)                           \
            -> std::optional<std::vector<at::Tensor>> {                                       \
          if (r[0].is_scalar()) return std::nullopt;                                          \
          return at::_foreach_##name(l, r[0].list);                                           \
        },                                                                                    \
        [](const at::Tensor& x, const std::vector<LeafArg>& a) {                              \
          return a[0].s ? at::clamp(x, *a[0].s) : at::name(x, a[0].t);                        \
        },                                                                                    \
        #name " of");                                                                         \
  }                                                                                           \
  TensorDict& TensorDict::name##_(const Operand& other) {                                     \
    return LeafwiseIn(                                                                        \
        *this, {&other},                                                                      \
        [](at::TensorList l, const std::vector<ResolvedOperand>& r) {                         \
          if (r[0].is_scalar()) return false;                                                 \
          at::_foreach_##name##_(l, r[0].list);                                               \
          return true;                                                                        \
        },                                                                                    \
        [](at::Tensor& x, const std::vector<LeafArg>& a) {                                    \
          if (a[0].s) {                                                                       \
            x.clamp##_(*a[0].s);                                                              \
          } else {                                                                            \
            at::name##_out(x, x, a[0].t);                                                     \
          }                                                                                   \
        },                                                                                    \
        #name "_");                                                                           \
  }
TD_MAXMIN(maximum, clamp_min)
TD_MAXMIN(minimum, clamp_max)
#undef TD_MAXMIN

// ---- addcmul / addcdiv --------------------------------------------------------------------

#define TD_ADDC(name)                                                                         \
  TensorDict TensorDict::name(const Operand& t1, const Operand& t2, const at::Scalar& value)  \
      const {                                                                                 \
    RequireTensorOperand(t1, #name, "tensor1");                                               \
    RequireTensorOperand(t2, #name, "tensor2");                                               \
    return LeafwiseOut(                                                                       \
        *this, {&t1, &t2},                                                                    \
        [&](at::TensorList l, const std::vector<ResolvedOperand>& r)                          \
            -> std::optional<std::vector<at::Tensor>> {                                       \
          return at::_foreach_##name(l, r[0].list, r[1].list, value);                         \
        },                                                                                    \
        [&](const at::Tensor& x, const std::vector<LeafArg>& a) {                             \
          return at::name(x, a[0].t, a[1].t, value);                                          \
        },                                                                                    \
        #name " of");                                                                         \
  }                                                                                           \
  TensorDict& TensorDict::name##_(const Operand& t1, const Operand& t2,                       \
                                  const at::Scalar& value) {                                  \
    RequireTensorOperand(t1, #name "_", "tensor1");                                           \
    RequireTensorOperand(t2, #name "_", "tensor2");                                           \
    return LeafwiseIn(                                                                        \
        *this, {&t1, &t2},                                                                    \
        [&](at::TensorList l, const std::vector<ResolvedOperand>& r) {                        \
          at::_foreach_##name##_(l, r[0].list, r[1].list, value);                             \
          return true;                                                                        \
        },                                                                                    \
        [&](at::Tensor& x, const std::vector<LeafArg>& a) { x.name##_(a[0].t, a[1].t, value); }, \
        #name "_");                                                                           \
  }
TD_ADDC(addcmul)
TD_ADDC(addcdiv)
#undef TD_ADDC

// ---- remainder, bitwise, clamp_min / clamp_max (a TensorDict, tensor or number operand) -------

#define TD_BINARY(name, check)                                                                \
  TensorDict TensorDict::name(const Operand& other) const {                                   \
    return LeafwiseOut(                                                                       \
        *this, {&other}, {},                                                                  \
        [](const at::Tensor& x, const std::vector<LeafArg>& a) {                              \
          return a[0].s ? at::name(x, *a[0].s) : at::name(x, a[0].t);                         \
        },                                                                                    \
        #name " of");                                                                         \
  }                                                                                           \
  TensorDict& TensorDict::name##_(const Operand& other) {                                     \
    return LeafwiseIn(                                                                        \
        *this, {&other}, {},                                                                  \
        [](at::Tensor& x, const std::vector<LeafArg>& a) {                                    \
          if (a[0].s) {                                                                       \
            x.name##_(*a[0].s);                                                               \
          } else {                                                                            \
            x.name##_(a[0].t);                                                                \
          }                                                                                   \
        },                                                                                    \
        #name "_", ValueCheckFn(check));                                                      \
  }
TD_BINARY(remainder, NoIntegerZeroDivisor())
TD_BINARY(bitwise_and, )
TD_BINARY(bitwise_or, )
TD_BINARY(bitwise_xor, )
TD_BINARY(clamp_min, )
TD_BINARY(clamp_max, )
#undef TD_BINARY

TensorDict TensorDict::mod(const Operand& other) const { return remainder(other); }

TensorDict TensorDict::logical_and(const Operand& other) const {
  return LeafwiseOut(
      *this, {&other}, {},
      [](const at::Tensor& x, const std::vector<LeafArg>& a) {
        return at::logical_and(x, a[0].tensor());
      },
      "logical_and of");
}

TensorDict TensorDict::rsub(const Operand& other, const at::Scalar& alpha) const {
  return LeafwiseOut(
      *this, {&other}, {},
      [&](const at::Tensor& x, const std::vector<LeafArg>& a) {
        return a[0].s ? at::rsub(x, *a[0].s, alpha) : at::rsub(x, a[0].t, alpha);
      },
      "rsub of");
}


// ---- the is* predicates -------------------------------------------------------------------

#define TD_PREDICATE_(name)                                                                   \
  TensorDict TensorDict::name() const {                                                       \
    return LeafwiseOut(                                                                       \
        *this, {}, {},                                                                        \
        [](const at::Tensor& x, const std::vector<LeafArg>&) { return at::name(x); },         \
        #name " of");                                                                         \
  }
TD_PREDICATE_(isnan)
TD_PREDICATE_(isfinite)
TD_PREDICATE_(isposinf)
TD_PREDICATE_(isneginf)
TD_PREDICATE_(isreal)
#undef TD_PREDICATE_

TensorDict TensorDict::bitwise_not() const {
  return LeafwiseOut(
      *this, {}, {}, [](const at::Tensor& x, const std::vector<LeafArg>&) { return at::bitwise_not(x); },
      "bitwise_not of");
}
TensorDict& TensorDict::bitwise_not_() {
  return LeafwiseIn(
      *this, {}, {}, [](at::Tensor& x, const std::vector<LeafArg>&) { x.bitwise_not_(); },
      "bitwise_not_");
}
// ---- the unary math family ----------------------------------------------------------------

// One definition pair per TD_UNARY row of the op table (td/core/ops_math.def).
#define TD_UNARY_FOREACH_(name)                                                               \
  TensorDict TensorDict::name() const {                                                       \
    return LeafwiseOut(                                                                       \
        *this, {},                                                                            \
        [](at::TensorList l, const std::vector<ResolvedOperand>&)                             \
            -> std::optional<std::vector<at::Tensor>> { return at::_foreach_##name(l); },     \
        [](const at::Tensor& x, const std::vector<LeafArg>&) { return at::name(x); },         \
        #name " of");                                                                         \
  }                                                                                           \
  TensorDict& TensorDict::name##_() {                                                         \
    return LeafwiseIn(                                                                        \
        *this, {},                                                                            \
        [](at::TensorList l, const std::vector<ResolvedOperand>&) {                           \
          at::_foreach_##name##_(l);                                                          \
          return true;                                                                        \
        },                                                                                    \
        [](at::Tensor& x, const std::vector<LeafArg>&) { x.name##_(); }, #name "_");          \
  }
#define TD_UNARY_PLAIN_(name)                                                                 \
  TensorDict TensorDict::name() const {                                                       \
    return LeafwiseOut(                                                                       \
        *this, {}, {},                                                                        \
        [](const at::Tensor& x, const std::vector<LeafArg>&) { return at::name(x); },         \
        #name " of");                                                                         \
  }                                                                                           \
  TensorDict& TensorDict::name##_() {                                                         \
    return LeafwiseIn(                                                                        \
        *this, {}, {}, [](at::Tensor& x, const std::vector<LeafArg>&) { x.name##_(); },       \
        #name "_");                                                                           \
  }
#define TD_UNARY(name, kernel) TD_UNARY_##kernel##_(name)
#include "td/core/ops.def"
#undef TD_UNARY_FOREACH_
#undef TD_UNARY_PLAIN_

// ---- operators ----------------------------------------------------------------------------

TensorDict operator+(const TensorDict& a, const TensorDict& b) { return a.add(b); }
TensorDict operator+(const TensorDict& a, const at::Scalar& b) { return a.add(b); }
TensorDict operator+(const at::Scalar& a, const TensorDict& b) { return b.add(a); }
TensorDict operator-(const TensorDict& a, const TensorDict& b) { return a.sub(b); }
TensorDict operator-(const TensorDict& a, const at::Scalar& b) { return a.sub(b); }
TensorDict operator-(const at::Scalar& a, const TensorDict& b) {
  return Binary(b, a, {}, [](const at::Tensor& t, const LeafArg& s) { return at::rsub(t, *s.s); },
                "subtracting");
}
TensorDict operator*(const TensorDict& a, const TensorDict& b) { return a.mul(b); }
TensorDict operator*(const TensorDict& a, const at::Scalar& b) { return a.mul(b); }
TensorDict operator*(const at::Scalar& a, const TensorDict& b) { return b.mul(a); }
TensorDict operator/(const TensorDict& a, const TensorDict& b) { return a.div(b); }
TensorDict operator/(const TensorDict& a, const at::Scalar& b) { return a.div(b); }
TensorDict operator/(const at::Scalar& a, const TensorDict& b) {
  const at::Tensor s = internal::WrappedNumber(a);
  return LeafwiseOut(
      b, {}, {}, [&](const at::Tensor& t, const std::vector<LeafArg>&) { return at::div(s, t); },
      "dividing");
}
TensorDict& operator+=(TensorDict& a, const TensorDict& b) { return a.add_(b); }
TensorDict& operator+=(TensorDict& a, const at::Scalar& b) { return a.add_(b); }
TensorDict& operator-=(TensorDict& a, const TensorDict& b) { return a.sub_(b); }
TensorDict& operator-=(TensorDict& a, const at::Scalar& b) { return a.sub_(b); }
TensorDict& operator*=(TensorDict& a, const TensorDict& b) { return a.mul_(b); }
TensorDict& operator*=(TensorDict& a, const at::Scalar& b) { return a.mul_(b); }
TensorDict& operator/=(TensorDict& a, const TensorDict& b) { return a.div_(b); }
TensorDict& operator/=(TensorDict& a, const at::Scalar& b) { return a.div_(b); }
TensorDict operator==(const TensorDict& a, const at::Scalar& b) { return a.eq(b); }
TensorDict operator!=(const TensorDict& a, const at::Scalar& b) { return a.ne(b); }
TensorDict operator<(const TensorDict& a, const TensorDict& b) { return a.lt(b); }
TensorDict operator<(const TensorDict& a, const at::Scalar& b) { return a.lt(b); }
TensorDict operator<=(const TensorDict& a, const TensorDict& b) { return a.le(b); }
TensorDict operator<=(const TensorDict& a, const at::Scalar& b) { return a.le(b); }
TensorDict operator>(const TensorDict& a, const TensorDict& b) { return a.gt(b); }
TensorDict operator>(const TensorDict& a, const at::Scalar& b) { return a.gt(b); }
TensorDict operator>=(const TensorDict& a, const TensorDict& b) { return a.ge(b); }
TensorDict operator>=(const TensorDict& a, const at::Scalar& b) { return a.ge(b); }

TensorDict operator%(const TensorDict& a, const Operand& b) { return a.remainder(b); }
TensorDict operator&(const TensorDict& a, const Operand& b) { return a.bitwise_and(b); }
TensorDict operator|(const TensorDict& a, const Operand& b) { return a.bitwise_or(b); }
TensorDict operator^(const TensorDict& a, const Operand& b) { return a.bitwise_xor(b); }
TensorDict operator~(const TensorDict& a) { return a.bitwise_not(); }
TensorDict& operator%=(TensorDict& a, const Operand& b) { return a.remainder_(b); }
TensorDict& operator&=(TensorDict& a, const Operand& b) { return a.bitwise_and_(b); }
TensorDict& operator|=(TensorDict& a, const Operand& b) { return a.bitwise_or_(b); }
TensorDict& operator^=(TensorDict& a, const Operand& b) { return a.bitwise_xor_(b); }

}  // namespace td
