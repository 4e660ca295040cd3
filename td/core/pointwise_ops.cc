// lerp, maximum / minimum, addcmul / addcdiv, remainder, the bitwise ops and the rest of the unary
// math family over every leaf (declared in td/core/tensordict.h and td/core/pointwise_ops.h).
// Plumbing: td/core/internal/leafwise.h, following NOTE [ Leaf-wise math ] in math_ops.cc.
#include <ATen/ATen.h>

#include "td/compat/foreach.h"
#include "td/compat/torch.h"
#include "td/core/internal/leafwise.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::ForeachInFn;
using internal::ForeachOutFn;
using internal::LeafArg;
using internal::LeafwiseIn;
using internal::LeafwiseOut;
using internal::ResolvedOperand;

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

// ---- remainder and bitwise ----------------------------------------------------------------

#define TD_BINARY(name)                                                                       \
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
        #name "_");                                                                           \
  }
TD_BINARY(remainder)
TD_BINARY(bitwise_and)
TD_BINARY(bitwise_or)
TD_BINARY(bitwise_xor)
#undef TD_BINARY

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
TensorDict& TensorDict::sign_() {
  return LeafwiseIn(
      *this, {}, {}, [](at::Tensor& x, const std::vector<LeafArg>&) { x.sign_(); }, "sign_");
}

// ---- unary math ---------------------------------------------------------------------------

// One definition pair per row of td/core/unary_ops_list.h.
#define TD_UNARY_FOREACH_DEF_(name)                                                           \
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
#define TD_UNARY_PLAIN_DEF_(name)                                                             \
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
TD_UNARY_FOREACH_OPS(TD_UNARY_FOREACH_DEF_)
TD_UNARY_PLAIN_OPS(TD_UNARY_PLAIN_DEF_)
#undef TD_UNARY_FOREACH_DEF_
#undef TD_UNARY_PLAIN_DEF_

// ---- operators ----------------------------------------------------------------------------

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
