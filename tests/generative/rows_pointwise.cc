// Case generators of the element-wise rows of td/core/ops_math.def (the TD_UNARY rows are
// enumerated by tests/generative/generative_test.cc itself): each draws its operands -- a
// number, a tensor, or a TensorDict of the input's structure, sometimes missing a leaf or with
// a leaf that cannot broadcast -- and states the row's per-leaf definition with LibTorch's op.
#include "td/compat/torch.h"
#include "td/core/pointwise_ops.h"
#include "tests/generative/generative.h"

namespace td {
namespace generative {
namespace {

// An operand as a row takes it: a TensorDict matched by key, a tensor, or a number.
struct Opnd {
  enum Kind { kTD, kTensor, kScalar } kind = kScalar;
  TensorDict td;
  at::Tensor t;
  at::Scalar s;
  Operand operand() const {
    if (kind == kTD) return Operand(td);
    if (kind == kTensor) return Operand(t);
    return Operand(s);
  }
  // The leaf's operand as a tensor (a number as a 0-dim tensor of its own type).
  at::Tensor tensor(const NestedKey& k) const {
    if (kind == kTD) return td.get(k);
    if (kind == kTensor) return t;
    return at::scalar_tensor(s, s.isBoolean()         ? at::kBool
                                : s.isIntegral(false) ? at::kLong
                                                      : at::kDouble);
  }
};

Opnd DrawTD(Case& c) {
  Opnd o;
  o.kind = Opnd::kTD;
  o.td = RandomLike(c.rng, c.td, 0.6, Chance(c.rng, 0.3));
  c.Arg("other", "TensorDict " + Describe(o.td));
  return o;
}

Opnd DrawOperand(Case& c, bool numbers = true) {
  const int64_t k = Uniform(c.rng, numbers ? 0 : 1, 2);
  if (k == 2) return DrawTD(c);
  Opnd o;
  if (k == 0) {
    o.s = RandomScalar(c.rng);
    c.Arg("other", o.s);
    return o;
  }
  o.kind = Opnd::kTensor;
  const int64_t shape = Uniform(c.rng, 0, 3);  // [], [1], [2] (broadcasts or not), [1, 1]
  std::vector<int64_t> sizes = shape == 0   ? std::vector<int64_t>{}
                               : shape == 1 ? std::vector<int64_t>{1}
                               : shape == 2 ? std::vector<int64_t>{2}
                                            : std::vector<int64_t>{1, 1};
  o.t = (at::rand(sizes, at::kDouble) * 4 - 2).to(Chance(c.rng, 0.5) ? at::kFloat : at::kLong);
  c.Arg("other", "tensor " + DescribeTensor(o.t));
  return o;
}

Spec Same(LeafDef def) {
  Spec s;
  s.leaf = std::move(def);
  s.names = SameNames();
  return s;
}

// Same(def), with an argument refused whatever the leaves (so a TensorDict without leaves
// refuses it too): `refused` -> a TypeError saying `why`.
Spec SameUnless(LeafDef def, bool refused, const char* why) {
  Spec s = Same(std::move(def));
  s.batch = [refused, why](at::IntArrayRef batch) {
    TORCH_CHECK_TYPE(!refused, why);
    return batch.vec();
  };
  return s;
}

// In place: `r` (computed out of place) written into `x`, which LibTorch's in-place op refuses
// when r's dtype cannot be cast to x's or the shapes differ.
at::Tensor WriteInto(at::Tensor x, const at::Tensor& r) {
  TORCH_CHECK(at::canCast(r.scalar_type(), x.scalar_type()), "result type ", r.scalar_type(),
              " can't be cast to the desired output type ", x.scalar_type());
  TORCH_CHECK(r.sizes() == x.sizes(), "output with shape ", x.sizes(),
              " doesn't match the broadcast shape ", r.sizes());
  return x.copy_(r);
}

using TT = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
using TS = std::function<at::Tensor(const at::Tensor&, const at::Scalar&)>;

// A binary row with a TensorDict operand (`tensor_fn` on each leaf pair), out of place or in
// place (`inplace_fn` on a copy of the leaf).
void TDRow(RowTable& t, const std::string& id,
           std::function<TensorDict(const TensorDict&, const TensorDict&)> op, TT fn,
           bool inplace) {
  t[id] = [op, fn, inplace](Case& c) {
    const Opnd o = DrawTD(c);
    const LeafDef def = [o, fn](const NestedKey& k, const at::Tensor& x) {
      return fn(x, o.td.get(k));
    };
    if (inplace) {
      CheckIn(
          c, [&] { op(c.td, o.td); }, Same(def));
    } else {
      CheckOut(
          c, [&] { return op(c.td, o.td); }, Same(def));
    }
  };
}

void ScalarRow(RowTable& t, const std::string& id,
               std::function<TensorDict(const TensorDict&, const at::Scalar&)> op, TS fn,
               bool inplace) {
  t[id] = [op, fn, inplace](Case& c) {
    const at::Scalar s = RandomScalar(c.rng);
    c.Arg("other", s);
    const LeafDef def = [s, fn](const NestedKey&, const at::Tensor& x) { return fn(x, s); };
    if (inplace) {
      CheckIn(
          c, [&] { op(c.td, s); }, Same(def));
    } else {
      CheckOut(
          c, [&] { return op(c.td, s); }, Same(def));
    }
  };
}

// A row taking an Operand: `fn` gets the leaf and the operand's tensor, `sfn` (when set) the
// number itself.
void OperandRow(RowTable& t, const std::string& id,
                std::function<TensorDict(const TensorDict&, const Operand&)> op, TT fn, TS sfn,
                bool inplace, bool numbers = true) {
  t[id] = [op, fn, sfn, inplace, numbers](Case& c) {
    const Opnd o = DrawOperand(c, numbers);
    const LeafDef def = [o, fn, sfn](const NestedKey& k, const at::Tensor& x) {
      if (o.kind == Opnd::kScalar && sfn) return sfn(x, o.s);
      return fn(x, o.tensor(k));
    };
    if (inplace) {
      CheckIn(
          c, [&] { op(c.td, o.operand()); }, Same(def));
    } else {
      CheckOut(
          c, [&] { return op(c.td, o.operand()); }, Same(def));
    }
  };
}

void NullaryRow(RowTable& t, const std::string& id, std::function<TensorDict(TensorDict&)> op,
                std::function<at::Tensor(at::Tensor)> fn, bool inplace) {
  t[id] = [op, fn, inplace](Case& c) {
    const LeafDef def = [fn](const NestedKey&, const at::Tensor& x) { return fn(x); };
    if (inplace) {
      CheckIn(
          c, [&] { op(c.td); }, Same(def));
    } else {
      CheckOut(
          c, [&] { return op(c.td); }, Same(def));
    }
  };
}

}  // namespace

void AddPointwiseRows(RowTable& t) {
  using S = const at::Scalar&;
  using X = const at::Tensor&;
  using C = const TensorDict&;
  // add / sub with alpha, mul / div / pow: with a TensorDict and with a number.
  for (bool in : {false, true}) {
    const std::string u = in ? "_" : "";
    auto alpha_row = [&](const std::string& name, bool sub) {
      t[name + u + "(const TensorDict& other, const at::Scalar& alpha = 1)"] = [sub, in](Case& c) {
        const Opnd o = DrawTD(c);
        const at::Scalar alpha = Chance(c.rng, 0.5) ? at::Scalar(1) : RandomScalar(c.rng);
        c.Arg("alpha", alpha);
        const LeafDef def = [o, alpha, sub](const NestedKey& k, X x) {
          return sub ? at::sub(x, o.td.get(k), alpha) : at::add(x, o.td.get(k), alpha);
        };
        if (in) {
          const LeafDef d2 = [def](const NestedKey& k, X x) { return WriteInto(x, def(k, x)); };
          CheckIn(
              c, [&] { sub ? c.td.sub_(o.td, alpha) : c.td.add_(o.td, alpha); }, Same(d2));
        } else {
          CheckOut(
              c, [&] { return sub ? c.td.sub(o.td, alpha) : c.td.add(o.td, alpha); }, Same(def));
        }
      };
    };
    alpha_row("add", false);
    alpha_row("sub", true);
    auto in_td = [in](TT f) -> TT {
      if (!in) return f;
      return [f](X x, X y) { return WriteInto(x, f(x, y)); };
    };
    auto in_s = [in](TS f) -> TS {
      if (!in) return f;
      return [f](X x, S y) { return WriteInto(x, f(x, y)); };
    };
    TDRow(
        t, "mul" + u + "(const TensorDict& other)",
        [in](C a, C b) { return in ? TensorDict(a).mul_(b) : a.mul(b); },
        in_td([](X x, X y) { return at::mul(x, y); }), in);
    TDRow(
        t, "div" + u + "(const TensorDict& other)",
        [in](C a, C b) { return in ? TensorDict(a).div_(b) : a.div(b); },
        in_td([](X x, X y) { return at::div(x, y); }), in);
    TDRow(
        t, "pow" + u + "(const TensorDict& exponent)",
        [in](C a, C b) { return in ? TensorDict(a).pow_(b) : a.pow(b); },
        in_td([](X x, X y) { return at::pow(x, y); }), in);
    ScalarRow(
        t, "add" + u + "(const at::Scalar& other)",
        [in](C a, S s) { return in ? TensorDict(a).add_(s) : a.add(s); },
        in_s([](X x, S s) { return at::add(x, s); }), in);
    ScalarRow(
        t, "sub" + u + "(const at::Scalar& other)",
        [in](C a, S s) { return in ? TensorDict(a).sub_(s) : a.sub(s); },
        in_s([](X x, S s) { return at::sub(x, s); }), in);
    ScalarRow(
        t, "mul" + u + "(const at::Scalar& other)",
        [in](C a, S s) { return in ? TensorDict(a).mul_(s) : a.mul(s); },
        in_s([](X x, S s) { return at::mul(x, s); }), in);
    ScalarRow(
        t, "div" + u + "(const at::Scalar& other)",
        [in](C a, S s) { return in ? TensorDict(a).div_(s) : a.div(s); },
        in_s([](X x, S s) { return at::div(x, s); }), in);
    ScalarRow(
        t, "pow" + u + "(const at::Scalar& exponent)",
        [in](C a, S s) { return in ? TensorDict(a).pow_(s) : a.pow(s); },
        in_s([](X x, S s) { return at::pow(x, s); }), in);

    // clamp with optional bounds.
    t["clamp" + u +
      "(const std::optional<at::Scalar>& min, const std::optional<at::Scalar>& max = "
      "std::nullopt)"] = [in](Case& c) {
      std::optional<at::Scalar> lo, hi;
      if (Chance(c.rng, 0.7)) lo = at::Scalar(static_cast<double>(Uniform(c.rng, -4, 0)) / 2);
      if (Chance(c.rng, 0.7)) hi = at::Scalar(static_cast<double>(Uniform(c.rng, 0, 4)) / 2);
      c.Arg("min", lo ? lo->toDouble() : NAN);
      c.Arg("max", hi ? hi->toDouble() : NAN);
      compat::Optional<at::Scalar> clo, chi;
      if (lo) clo = *lo;
      if (hi) chi = *hi;
      const LeafDef def = [clo, chi, in](const NestedKey&, X x) {
        return in ? WriteInto(x, at::clamp(x, clo, chi)) : at::clamp(x, clo, chi);
      };
      Spec s = Same(def);
      s.batch = [lo, hi](at::IntArrayRef b) {  // checked even without leaves
        TORCH_CHECK_VALUE(lo || hi, "clamp needs min or max");
        return b.vec();
      };
      if (in) {
        CheckIn(
            c, [&] { c.td.clamp_(lo, hi); }, s);
      } else {
        CheckOut(
            c, [&] { return c.td.clamp(lo, hi); }, s);
      }
    };
    const char* sfx = in ? "_" : "";
    auto operand = [&](const std::string& name, const std::string& param,
                       std::function<TensorDict(TensorDict, const Operand&)> op, TT fn, TS sfn,
                       bool numbers = true) {
      OperandRow(
          t, name + sfx + "(const Operand& " + param + ")",
          [op](C a, const Operand& o) { return op(a, o); }, in_td(fn), sfn ? in_s(sfn) : TS(), in,
          numbers);
    };
    operand(
        "clamp_min", "min",
        [in](TensorDict a, const Operand& o) { return in ? a.clamp_min_(o) : a.clamp_min(o); },
        [](X x, X y) { return at::clamp_min(x, y); }, [](X x, S s) { return at::clamp_min(x, s); });
    operand(
        "clamp_max", "max",
        [in](TensorDict a, const Operand& o) { return in ? a.clamp_max_(o) : a.clamp_max(o); },
        [](X x, X y) { return at::clamp_max(x, y); }, [](X x, S s) { return at::clamp_max(x, s); });
    operand(
        "maximum", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.maximum_(o) : a.maximum(o); },
        [](X x, X y) { return at::maximum(x, y); }, [](X x, S s) { return at::clamp_min(x, s); });
    operand(
        "minimum", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.minimum_(o) : a.minimum(o); },
        [](X x, X y) { return at::minimum(x, y); }, [](X x, S s) { return at::clamp_max(x, s); });
    operand(
        "remainder", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.remainder_(o) : a.remainder(o); },
        [](X x, X y) { return at::remainder(x, y); }, [](X x, S s) { return at::remainder(x, s); });
    operand(
        "bitwise_and", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.bitwise_and_(o) : a.bitwise_and(o); },
        [](X x, X y) { return at::bitwise_and(x, y); },
        [](X x, S s) { return at::bitwise_and(x, s); });
    operand(
        "bitwise_or", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.bitwise_or_(o) : a.bitwise_or(o); },
        [](X x, X y) { return at::bitwise_or(x, y); },
        [](X x, S s) { return at::bitwise_or(x, s); });
    operand(
        "bitwise_xor", "other",
        [in](TensorDict a, const Operand& o) { return in ? a.bitwise_xor_(o) : a.bitwise_xor(o); },
        [](X x, X y) { return at::bitwise_xor(x, y); },
        [](X x, S s) { return at::bitwise_xor(x, s); });
    NullaryRow(
        t, std::string("bitwise_not") + sfx + "()",
        [in](TensorDict& a) { return in ? a.bitwise_not_() : a.bitwise_not(); },
        [in](at::Tensor x) { return in ? WriteInto(x, at::bitwise_not(x)) : at::bitwise_not(x); },
        in);

    // lerp(end, weight): end a TensorDict or a tensor (a number is a TypeError), weight anything.
    t[std::string("lerp") + sfx + "(const Operand& end, const Operand& weight)"] = [in](Case& c) {
      const Opnd end = DrawOperand(c, /*numbers=*/Chance(c.rng, 0.1));
      const Opnd w = DrawOperand(c);
      const LeafDef def = [end, w, in](const NestedKey& k, X x) {
        TORCH_CHECK_TYPE(end.kind != Opnd::kScalar, "lerp's end cannot be a number");
        if (in) {
          return w.kind == Opnd::kScalar ? at::Tensor(x).lerp_(end.tensor(k), w.s)
                                         : at::Tensor(x).lerp_(end.tensor(k), w.tensor(k));
        }
        return w.kind == Opnd::kScalar ? at::lerp(x, end.tensor(k), w.s)
                                       : at::lerp(x, end.tensor(k), w.tensor(k));
      };
      const Spec spec = SameUnless(def, end.kind == Opnd::kScalar, "lerp's end cannot be a number");
      if (in) {
        CheckIn(
            c, [&] { c.td.lerp_(end.operand(), w.operand()); }, spec);
      } else {
        CheckOut(
            c, [&] { return c.td.lerp(end.operand(), w.operand()); }, spec);
      }
    };
    // addcmul / addcdiv(t1, t2, value): t1 and t2 TensorDicts or tensors.
    for (bool div : {false, true}) {
      const std::string name = std::string(div ? "addcdiv" : "addcmul") + sfx;
      t[name + "(const Operand& t1, const Operand& t2, const at::Scalar& value = 1)"] =
          [in, div](Case& c) {
            const Opnd a = DrawOperand(c, Chance(c.rng, 0.1));
            const Opnd b = DrawOperand(c, false);
            const at::Scalar v = RandomScalar(c.rng);
            c.Arg("value", v);
            const LeafDef def = [a, b, v, in, div](const NestedKey& k, X x) {
              TORCH_CHECK_TYPE(a.kind != Opnd::kScalar, "t1 cannot be a number");
              at::Tensor y = x;
              if (in) {
                return div ? y.addcdiv_(a.tensor(k), b.tensor(k), v)
                           : y.addcmul_(a.tensor(k), b.tensor(k), v);
              }
              return div ? at::addcdiv(x, a.tensor(k), b.tensor(k), v)
                         : at::addcmul(x, a.tensor(k), b.tensor(k), v);
            };
            const Spec spec = SameUnless(def, a.kind == Opnd::kScalar, "t1 cannot be a number");
            if (in) {
              CheckIn(
                  c,
                  [&] {
                    div ? c.td.addcdiv_(a.operand(), b.operand(), v)
                        : c.td.addcmul_(a.operand(), b.operand(), v);
                  },
                  spec);
            } else {
              CheckOut(
                  c,
                  [&] {
                    return div ? c.td.addcdiv(a.operand(), b.operand(), v)
                               : c.td.addcmul(a.operand(), b.operand(), v);
                  },
                  spec);
            }
          };
    }
  }
  OperandRow(
      t, "mod(const Operand& other)", [](C a, const Operand& o) { return a.mod(o); },
      [](X x, X y) { return at::remainder(x, y); }, [](X x, S s) { return at::remainder(x, s); },
      false);
  OperandRow(
      t, "logical_and(const Operand& other)",
      [](C a, const Operand& o) { return a.logical_and(o); },
      [](X x, X y) { return at::logical_and(x, y); }, TS(), false);
  t["rsub(const Operand& other, const at::Scalar& alpha = 1)"] = [](Case& c) {
    const Opnd o = DrawOperand(c);
    const at::Scalar alpha = Chance(c.rng, 0.5) ? at::Scalar(1) : RandomScalar(c.rng);
    c.Arg("alpha", alpha);
    CheckOut(
        c, [&] { return c.td.rsub(o.operand(), alpha); }, Same([o, alpha](const NestedKey& k, X x) {
          return o.kind == Opnd::kScalar ? at::rsub(x, o.s, alpha)
                                         : at::rsub(x, o.tensor(k), alpha);
        }));
  };
  // Comparisons.
  ScalarRow(
      t, "eq(const at::Scalar& other)", [](C a, S s) { return a.eq(s); },
      [](X x, S s) { return at::eq(x, s); }, false);
  ScalarRow(
      t, "ne(const at::Scalar& other)", [](C a, S s) { return a.ne(s); },
      [](X x, S s) { return at::ne(x, s); }, false);
  ScalarRow(
      t, "lt(const at::Scalar& other)", [](C a, S s) { return a.lt(s); },
      [](X x, S s) { return at::lt(x, s); }, false);
  ScalarRow(
      t, "le(const at::Scalar& other)", [](C a, S s) { return a.le(s); },
      [](X x, S s) { return at::le(x, s); }, false);
  ScalarRow(
      t, "gt(const at::Scalar& other)", [](C a, S s) { return a.gt(s); },
      [](X x, S s) { return at::gt(x, s); }, false);
  ScalarRow(
      t, "ge(const at::Scalar& other)", [](C a, S s) { return a.ge(s); },
      [](X x, S s) { return at::ge(x, s); }, false);
  TDRow(
      t, "lt(const TensorDict& other)", [](C a, C b) { return a.lt(b); },
      [](X x, X y) { return at::lt(x, y); }, false);
  TDRow(
      t, "le(const TensorDict& other)", [](C a, C b) { return a.le(b); },
      [](X x, X y) { return at::le(x, y); }, false);
  TDRow(
      t, "gt(const TensorDict& other)", [](C a, C b) { return a.gt(b); },
      [](X x, X y) { return at::gt(x, y); }, false);
  TDRow(
      t, "ge(const TensorDict& other)", [](C a, C b) { return a.ge(b); },
      [](X x, X y) { return at::ge(x, y); }, false);
  NullaryRow(
      t, "isnan()", [](TensorDict& a) { return a.isnan(); },
      [](at::Tensor x) { return at::isnan(x); }, false);
  NullaryRow(
      t, "isfinite()", [](TensorDict& a) { return a.isfinite(); },
      [](at::Tensor x) { return at::isfinite(x); }, false);
  NullaryRow(
      t, "isposinf()", [](TensorDict& a) { return a.isposinf(); },
      [](at::Tensor x) { return at::isposinf(x); }, false);
  NullaryRow(
      t, "isneginf()", [](TensorDict& a) { return a.isneginf(); },
      [](at::Tensor x) { return at::isneginf(x); }, false);
  NullaryRow(
      t, "isreal()", [](TensorDict& a) { return a.isreal(); },
      [](at::Tensor x) { return at::isreal(x); }, false);
  NullaryRow(
      t, "zero_()", [](TensorDict& a) { return a.zero_(); }, [](at::Tensor x) { return x.zero_(); },
      true);
  ScalarRow(
      t, "fill_(const at::Scalar& value)", [](C a, S s) { return TensorDict(a).fill_(s); },
      [](X x, S s) { return at::Tensor(x).fill_(s); }, true);
}

}  // namespace generative
}  // namespace td
