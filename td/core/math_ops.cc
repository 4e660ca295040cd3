// Devices, dtypes and memory (to, cpu, contiguous, detach, requires_grad_, pin_memory, zero_,
// fill_, *_like), arithmetic, unary math, comparisons and reductions over every leaf.
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

#include <algorithm>

#include "td/core/dtype.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/leafwise.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;
using internal::MapEach;

using UnaryFn = std::function<at::Tensor(const at::Tensor&)>;
using BinFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

TensorDict MapLeaves(const TensorDict& td, const UnaryFn& fn, const char* what,
                     bool check = false,
                     const parallel::ParallelOptions& parallel =
                         parallel::ParallelOptions().parallel(false)) {
  LeafTree tree(td);
  std::vector<at::Tensor> out =
      MapEach(tree, [&](size_t, const at::Tensor& x) { return fn(x); }, what, parallel);
  return tree.Rebuild(std::move(out), td.batch_size(), check);
}

// Runs `foreach` over all leaves; on failure reruns `each` per leaf for a keyed error.
TensorDict ForeachOr(const TensorDict& td,
                     const std::function<std::vector<at::Tensor>(at::TensorList)>& foreach,
                     const UnaryFn& each, const char* what) {
  LeafTree tree(td);
  std::vector<at::Tensor> out;
  if (tree.num_leaves() > 0) {
    try {
      out = foreach(tree.leaves());
    } catch (const c10::Error&) {
      out = MapEach(tree, [&](size_t, const at::Tensor& x) { return each(x); }, what);
    }
  }
  return tree.Rebuild(std::move(out), td.batch_size(), /*check=*/true);
}

// `other`'s leaves aligned to `tree` (every leaf of `tree` must exist in `other`).
std::vector<at::Tensor> Operand(const LeafTree& tree, const TensorDict& other) {
  return tree.Align(other, LeafTree::AlignOptions().name("the other TensorDict"));
}

TensorDict BinaryForeachOr(
    const TensorDict& td, const TensorDict& other,
    const std::function<std::vector<at::Tensor>(at::TensorList, at::TensorList)>& foreach,
    const BinFn& each, const char* what) {
  LeafTree tree(td);
  std::vector<at::Tensor> others = Operand(tree, other);
  std::vector<at::Tensor> out;
  if (tree.num_leaves() > 0) {
    bool done = false;
    if (foreach) {
      try {
        out = foreach(tree.leaves(), others);
        done = true;
      } catch (const c10::Error&) {
      }
    }
    if (!done) {
      out = MapEach(tree, [&](size_t i, const at::Tensor& x) { return each(x, others[i]); }, what);
    }
  }
  return tree.Rebuild(std::move(out), td.batch_size(), /*check=*/true);
}

using internal::CheckWritable;
using internal::Probe;

// Validates, then applies an in-place unary op to the leaves of `tree`: `each` first runs on a
// one-element probe of every leaf, so a leaf it cannot take fails before anything is written.
void UnaryInPlaceLeaves(const LeafTree& tree, const std::function<void(at::TensorList)>& foreach,
                        const std::function<void(at::Tensor&)>& each, const char* op) {
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    CheckWritable(tree, i, op);
    try {
      at::Tensor p = Probe(tree.leaves()[i]);
      each(p);
    } catch (...) {
      internal::RethrowWithKey(tree.key(i), op);
    }
  }
  if (tree.num_leaves() == 0) return;
  if (foreach) {
    foreach(tree.leaves());
  } else {
    MapEach(
        tree,
        [&](size_t, const at::Tensor& x) {
          at::Tensor t = x;
          each(t);
          return at::Tensor();
        },
        op);
  }
}

// Validates, then applies an in-place binary op with operands aligned to the leaves of `tree`.
void BinaryInPlaceLeaves(const LeafTree& tree, const TensorDict& other,
                         const std::function<void(at::TensorList, at::TensorList)>& foreach,
                         const std::function<void(at::Tensor&, const at::Tensor&)>& each,
                         const char* op) {
  std::vector<at::Tensor> others = Operand(tree, other);
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    const at::Tensor& leaf = tree.leaves()[i];
    CheckWritable(tree, i, op);
    const at::Tensor& o = others[i];
    std::vector<int64_t> shape;
    try {
      shape = at::infer_size(leaf.sizes(), o.sizes());
    } catch (const c10::Error&) {
      shape.clear();
    }
    if (shape != leaf.sizes()) {
      TD_FAIL(ValueError, op, ": the operand for key ", tree.key(i).repr(), " has shape ",
                       SizeRepr(o.sizes()), ", which does not broadcast to the leaf's shape ",
                       SizeRepr(leaf.sizes()));
    }
    try {
      at::Tensor p = Probe(leaf);
      each(p, Probe(o));
    } catch (...) {
      internal::RethrowWithKey(tree.key(i), op);
    }
  }
  if (tree.num_leaves() == 0) return;
  if (foreach) {
    foreach(tree.leaves(), others);
  } else {
    MapEach(
        tree,
        [&](size_t i, const at::Tensor& x) {
          at::Tensor t = x;
          each(t, others[i]);
          return at::Tensor();
        },
        op);
  }
}

// The in-place ops write through NOTE [ In-place writes ].
TensorDict& UnaryInPlace(TensorDict& td, const std::function<void(at::TensorList)>& foreach,
                         const std::function<void(at::Tensor&)>& each, const char* op) {
  internal::WriteLeaves(td, op,
                        [&](const LeafTree& tree) { UnaryInPlaceLeaves(tree, foreach, each, op); });
  return td;
}

TensorDict& BinaryInPlace(TensorDict& td, const TensorDict& other,
                          const std::function<void(at::TensorList, at::TensorList)>& foreach,
                          const std::function<void(at::Tensor&, const at::Tensor&)>& each,
                          const char* op) {
  internal::WriteLeaves(
      td, op, [&](const LeafTree& tree) { BinaryInPlaceLeaves(tree, other, foreach, each, op); });
  return td;
}

// A 0-dim tensor holding `s` that promotes like a Python number (a "wrapped number").
at::Tensor WrappedScalar(const at::Scalar& s) {
  at::Tensor t = at::scalar_tensor(s, s.isFloatingPoint() ? at::kDouble
                                      : s.isBoolean()     ? at::kBool
                                      : s.isComplex()     ? at::kComplexDouble
                                                          : at::kLong);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Reduction plumbing: `all(t)` reduces every element, `dims(t, dims, keepdim)` batch dims.
TensorDict Reduce(const TensorDict& td, const ReduceOptions& options, const char* op,
                  const UnaryFn& all,
                  const std::function<at::Tensor(const at::Tensor&, at::IntArrayRef, bool)>& dims,
                  const std::function<std::vector<at::Tensor>(at::TensorList)>& foreach_all = {}) {
  LeafTree tree(td);
  if (!options.dim()) {
    std::vector<at::Tensor> out;
    bool done = false;
    if (foreach_all && tree.num_leaves() > 0) {
      try {
        out = foreach_all(tree.leaves());
        done = true;
      } catch (const c10::Error&) {
      }
    }
    if (!done) out = MapEach(tree, [&](size_t, const at::Tensor& x) { return all(x); }, op);
    return tree.Rebuild(std::move(out), {}, /*check=*/false, std::nullopt,
                        /*nested_extra_dims=*/false);
  }
  const int64_t bd = td.batch_dims();
  std::vector<int64_t> ds;
  for (int64_t d : *options.dim()) {
    const int64_t w = internal::WrapBatchDim(d, bd, td.batch_size(), op);
    if (std::find(ds.begin(), ds.end(), w) != ds.end()) {
      TD_FAIL(ValueError, op, ": dim ", d, " appears twice in ", *options.dim());
    }
    ds.push_back(w);
  }
  std::vector<int64_t> nb;
  for (int64_t i = 0; i < bd; ++i) {
    const bool reduced = std::find(ds.begin(), ds.end(), i) != ds.end();
    if (!reduced) {
      nb.push_back(td.batch_size()[i]);
    } else if (options.keepdim()) {
      nb.push_back(1);
    }
  }
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& x) { return dims(x, ds, options.keepdim()); }, op);
  return tree.Rebuild(std::move(out), nb, /*check=*/false);
}

// Reduces over `dims` one dim at a time (for ops taking a single dim).
at::Tensor EachDim(const at::Tensor& t, at::IntArrayRef dims, bool keepdim,
                   const std::function<at::Tensor(const at::Tensor&, int64_t, bool)>& fn) {
  std::vector<int64_t> ds = dims.vec();
  std::sort(ds.rbegin(), ds.rend());
  at::Tensor r = t;
  for (int64_t d : ds) r = fn(r, d, keepdim);
  return r;
}

ReduceOptions Dims(at::IntArrayRef dims, bool keepdim) {
  return ReduceOptions().dim(dims.vec()).keepdim(keepdim);
}

}  // namespace

// ---- devices, dtypes, memory --------------------------------------------------------------

TensorDict TensorDict::to(at::Device device, bool non_blocking) const {
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& t) { return t.to(device, non_blocking); }, "moving",
      parallel::ParallelOptions());
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false,
                      std::optional<at::Device>(device));
}

TensorDict TensorDict::to(at::ScalarType dtype) const {
  // A floating dtype casts the floating leaves (nn::Module::to); any other dtype casts every
  // leaf, as Python tensordict does.
  const bool all = !at::isFloatingType(dtype);
  return MapLeaves(
      *this,
      [dtype, all](const at::Tensor& t) { return all || t.is_floating_point() ? t.to(dtype) : t; },
      "casting", /*check=*/false, parallel::ParallelOptions());
}

TensorDict TensorDict::to(at::Device device, at::ScalarType dtype, bool non_blocking) const {
  if (!at::isFloatingType(dtype)) {
    TD_FAIL(TypeError, "to(device, dtype) casts the floating-point leaves and needs a floating "
                    "dtype, got ", DtypeName(dtype));
  }
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree,
      [&](size_t, const at::Tensor& t) {
        return t.is_floating_point() ? t.to(device, dtype, non_blocking)
                                     : t.to(device, non_blocking);
      },
      "moving", parallel::ParallelOptions());
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false,
                      std::optional<at::Device>(device));
}

TensorDict TensorDict::cpu() const { return to(at::Device(at::kCPU)); }

TensorDict TensorDict::contiguous() const {
  // to_dense() first: the result is dense at every level whatever the backend, and a lazy
  // stack's exclusive keys are an error rather than dropped.
  return MapLeaves(to_dense(), [](const at::Tensor& t) { return t.contiguous(); }, "making contiguous",
                   /*check=*/false, parallel::ParallelOptions());
}

TensorDict TensorDict::detach() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return t.detach(); }, "detaching");
}

TensorDict& TensorDict::detach_() {
  internal::WriteLeaves(
      *this, "detach_",
      [](const LeafTree& tree) {
        MapEach(
            tree,
            [](size_t, const at::Tensor& t) {
              at::Tensor x = t;
              x.detach_();
              return at::Tensor();
            },
            "detaching");
      },
      internal::LazyLevels::kReject);
  return *this;
}

TensorDict& TensorDict::requires_grad_(bool requires_grad) {
  internal::WriteLeaves(
      *this, "requires_grad_",
      [&](const LeafTree& tree) {
        MapEach(
            tree,
            [&](size_t, const at::Tensor& t) {
              if (t.is_floating_point() || t.is_complex()) {
                at::Tensor x = t;
                x.requires_grad_(requires_grad);
              }
              return at::Tensor();
            },
            "setting requires_grad on");
      },
      internal::LazyLevels::kReject);
  return *this;
}

TensorDict TensorDict::pin_memory() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return t.pin_memory(); }, "pinning");
}

TensorDict& TensorDict::zero_() {
  return UnaryInPlace(
      *this, [](at::TensorList l) { at::_foreach_zero_(l); }, [](at::Tensor& t) { t.zero_(); },
      "zero_");
}

TensorDict& TensorDict::fill_(const at::Scalar& value) {
  return UnaryInPlace(
      *this, {}, [&](at::Tensor& t) { t.fill_(value); }, "fill_");
}

TensorDict zeros_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::zeros_like(t); }, "zeros_like of");
}
TensorDict ones_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::ones_like(t); }, "ones_like of");
}
TensorDict empty_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::empty_like(t); }, "empty_like of");
}
TensorDict full_like(const TensorDict& td, const at::Scalar& value) {
  return MapLeaves(
      td, [&](const at::Tensor& t) { return at::full_like(t, value); }, "full_like of");
}
TensorDict rand_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::rand_like(t); }, "rand_like of");
}
TensorDict randn_like(const TensorDict& td) {
  return MapLeaves(td, [](const at::Tensor& t) { return at::randn_like(t); }, "randn_like of");
}

// ---- arithmetic ---------------------------------------------------------------------------

TensorDict TensorDict::add(const TensorDict& other, const at::Scalar& alpha) const {
  return BinaryForeachOr(
      *this, other, [&](at::TensorList a, at::TensorList b) { return at::_foreach_add(a, b, alpha); },
      [&](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b, alpha); }, "adding");
}
TensorDict TensorDict::add(const at::Scalar& other) const {
  return ForeachOr(
      *this, [&](at::TensorList a) { return at::_foreach_add(a, other); },
      [&](const at::Tensor& a) { return at::add(a, other); }, "adding");
}
TensorDict TensorDict::sub(const TensorDict& other, const at::Scalar& alpha) const {
  return BinaryForeachOr(
      *this, other, [&](at::TensorList a, at::TensorList b) { return at::_foreach_sub(a, b, alpha); },
      [&](const at::Tensor& a, const at::Tensor& b) { return at::sub(a, b, alpha); },
      "subtracting");
}
TensorDict TensorDict::sub(const at::Scalar& other) const {
  return ForeachOr(
      *this, [&](at::TensorList a) { return at::_foreach_sub(a, other); },
      [&](const at::Tensor& a) { return at::sub(a, other); }, "subtracting");
}
TensorDict TensorDict::mul(const TensorDict& other) const {
  return BinaryForeachOr(
      *this, other, [](at::TensorList a, at::TensorList b) { return at::_foreach_mul(a, b); },
      [](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); }, "multiplying");
}
TensorDict TensorDict::mul(const at::Scalar& other) const {
  return ForeachOr(
      *this, [&](at::TensorList a) { return at::_foreach_mul(a, other); },
      [&](const at::Tensor& a) { return at::mul(a, other); }, "multiplying");
}
TensorDict TensorDict::div(const TensorDict& other) const {
  return BinaryForeachOr(
      *this, other, [](at::TensorList a, at::TensorList b) { return at::_foreach_div(a, b); },
      [](const at::Tensor& a, const at::Tensor& b) { return at::div(a, b); }, "dividing");
}
TensorDict TensorDict::div(const at::Scalar& other) const {
  return ForeachOr(
      *this, [&](at::TensorList a) { return at::_foreach_div(a, other); },
      [&](const at::Tensor& a) { return at::div(a, other); }, "dividing");
}
TensorDict TensorDict::pow(const TensorDict& exponent) const {
  return BinaryForeachOr(
      *this, exponent, {}, [](const at::Tensor& a, const at::Tensor& b) { return at::pow(a, b); },
      "raising to a power");
}
TensorDict TensorDict::pow(const at::Scalar& exponent) const {
  return MapLeaves(
      *this, [&](const at::Tensor& a) { return at::pow(a, exponent); }, "raising to a power");
}

TensorDict& TensorDict::add_(const TensorDict& other, const at::Scalar& alpha) {
  return BinaryInPlace(
      *this, other, [&](at::TensorList a, at::TensorList b) { at::_foreach_add_(a, b, alpha); },
      [&](at::Tensor& a, const at::Tensor& b) { a.add_(b, alpha); }, "add_");
}
TensorDict& TensorDict::add_(const at::Scalar& other) {
  return UnaryInPlace(
      *this, [&](at::TensorList a) { at::_foreach_add_(a, other); },
      [&](at::Tensor& a) { a.add_(other); }, "add_");
}
TensorDict& TensorDict::sub_(const TensorDict& other, const at::Scalar& alpha) {
  return BinaryInPlace(
      *this, other, [&](at::TensorList a, at::TensorList b) { at::_foreach_sub_(a, b, alpha); },
      [&](at::Tensor& a, const at::Tensor& b) { a.sub_(b, alpha); }, "sub_");
}
TensorDict& TensorDict::sub_(const at::Scalar& other) {
  return UnaryInPlace(
      *this, [&](at::TensorList a) { at::_foreach_sub_(a, other); },
      [&](at::Tensor& a) { a.sub_(other); }, "sub_");
}
TensorDict& TensorDict::mul_(const TensorDict& other) {
  return BinaryInPlace(
      *this, other, [](at::TensorList a, at::TensorList b) { at::_foreach_mul_(a, b); },
      [](at::Tensor& a, const at::Tensor& b) { a.mul_(b); }, "mul_");
}
TensorDict& TensorDict::mul_(const at::Scalar& other) {
  return UnaryInPlace(
      *this, [&](at::TensorList a) { at::_foreach_mul_(a, other); },
      [&](at::Tensor& a) { a.mul_(other); }, "mul_");
}
TensorDict& TensorDict::div_(const TensorDict& other) {
  return BinaryInPlace(
      *this, other, [](at::TensorList a, at::TensorList b) { at::_foreach_div_(a, b); },
      [](at::Tensor& a, const at::Tensor& b) { a.div_(b); }, "div_");
}
TensorDict& TensorDict::div_(const at::Scalar& other) {
  return UnaryInPlace(
      *this, [&](at::TensorList a) { at::_foreach_div_(a, other); },
      [&](at::Tensor& a) { a.div_(other); }, "div_");
}
TensorDict& TensorDict::pow_(const TensorDict& exponent) {
  return BinaryInPlace(
      *this, exponent, {}, [](at::Tensor& a, const at::Tensor& b) { a.pow_(b); }, "pow_");
}
TensorDict& TensorDict::pow_(const at::Scalar& exponent) {
  return UnaryInPlace(
      *this, {}, [&](at::Tensor& a) { a.pow_(exponent); }, "pow_");
}

// ---- unary math ---------------------------------------------------------------------------

#define TD_UNARY_FOREACH(name)                                                               \
  TensorDict TensorDict::name() const {                                                      \
    return ForeachOr(                                                                        \
        *this, [](at::TensorList l) { return at::_foreach_##name(l); },                      \
        [](const at::Tensor& t) { return at::name(t); }, #name " of");                       \
  }                                                                                          \
  TensorDict& TensorDict::name##_() {                                                        \
    return UnaryInPlace(                                                                     \
        *this, [](at::TensorList l) { at::_foreach_##name##_(l); },                          \
        [](at::Tensor& t) { t.name##_(); }, #name "_");                                      \
  }

TD_UNARY_FOREACH(abs)
TD_UNARY_FOREACH(neg)
TD_UNARY_FOREACH(exp)
TD_UNARY_FOREACH(log)
TD_UNARY_FOREACH(sqrt)
TD_UNARY_FOREACH(sigmoid)
TD_UNARY_FOREACH(tanh)
TD_UNARY_FOREACH(reciprocal)
TD_UNARY_FOREACH(floor)
TD_UNARY_FOREACH(ceil)
TD_UNARY_FOREACH(round)
#undef TD_UNARY_FOREACH

TensorDict TensorDict::sign() const {
  return MapLeaves(*this, [](const at::Tensor& t) { return at::sign(t); }, "sign of");
}

TensorDict TensorDict::clamp(const std::optional<at::Scalar>& min,
                             const std::optional<at::Scalar>& max) const {
  if (!min && !max) TD_FAIL(ValueError, "clamp: at least one of min and max is needed");
  return MapLeaves(
      *this,
      [&](const at::Tensor& t) {
        return at::clamp(t, min ? c10::optional<at::Scalar>(*min) : c10::nullopt,
                         max ? c10::optional<at::Scalar>(*max) : c10::nullopt);
      },
      "clamping");
}

TensorDict& TensorDict::clamp_(const std::optional<at::Scalar>& min,
                               const std::optional<at::Scalar>& max) {
  if (!min && !max) TD_FAIL(ValueError, "clamp_: at least one of min and max is needed");
  return UnaryInPlace(
      *this, {},
      [&](at::Tensor& t) {
        t.clamp_(min ? c10::optional<at::Scalar>(*min) : c10::nullopt,
                 max ? c10::optional<at::Scalar>(*max) : c10::nullopt);
      },
      "clamp_");
}

// ---- comparisons --------------------------------------------------------------------------

#define TD_COMPARE(name)                                                                  \
  TensorDict TensorDict::name(const at::Scalar& other) const {                            \
    return MapLeaves(                                                                     \
        *this, [&](const at::Tensor& t) { return at::name(t, other); }, "comparing");     \
  }
TD_COMPARE(eq)
TD_COMPARE(ne)
TD_COMPARE(lt)
TD_COMPARE(le)
TD_COMPARE(gt)
TD_COMPARE(ge)
#undef TD_COMPARE

#define TD_COMPARE_TD(name)                                                                \
  TensorDict TensorDict::name(const TensorDict& other) const {                             \
    return BinaryForeachOr(                                                                \
        *this, other, {}, [](const at::Tensor& a, const at::Tensor& b) { return at::name(a, b); }, \
        "comparing");                                                                      \
  }
TD_COMPARE_TD(lt)
TD_COMPARE_TD(le)
TD_COMPARE_TD(gt)
TD_COMPARE_TD(ge)
#undef TD_COMPARE_TD

// ---- reductions ---------------------------------------------------------------------------

TensorDict TensorDict::sum(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "sum", [](const at::Tensor& t) { return at::sum(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::sum(t, d, k); });
}
TensorDict TensorDict::sum(at::IntArrayRef dims, bool keepdim) const {
  return sum(Dims(dims, keepdim));
}

TensorDict TensorDict::mean(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "mean", [](const at::Tensor& t) { return at::mean(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::mean(t, d, k); });
}
TensorDict TensorDict::mean(at::IntArrayRef dims, bool keepdim) const {
  return mean(Dims(dims, keepdim));
}

TensorDict TensorDict::std(const ReduceOptions& o) const {
  const bool unbiased = o.unbiased();
  return Reduce(
      *this, o, "std", [=](const at::Tensor& t) { return at::std(t, unbiased); },
      [=](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::std(t, d, unbiased, k); });
}
TensorDict TensorDict::std(at::IntArrayRef dims, bool keepdim) const {
  return std(Dims(dims, keepdim));
}

TensorDict TensorDict::var(const ReduceOptions& o) const {
  const bool unbiased = o.unbiased();
  return Reduce(
      *this, o, "var", [=](const at::Tensor& t) { return at::var(t, unbiased); },
      [=](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::var(t, d, unbiased, k); });
}
TensorDict TensorDict::var(at::IntArrayRef dims, bool keepdim) const {
  return var(Dims(dims, keepdim));
}

TensorDict TensorDict::min(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "min", [](const at::Tensor& t) { return at::min(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::amin(t, d, k); });
}
TensorDict TensorDict::min(at::IntArrayRef dims, bool keepdim) const {
  return min(Dims(dims, keepdim));
}

TensorDict TensorDict::max(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "max", [](const at::Tensor& t) { return at::max(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::amax(t, d, k); });
}
TensorDict TensorDict::max(at::IntArrayRef dims, bool keepdim) const {
  return max(Dims(dims, keepdim));
}

TensorDict TensorDict::norm(const at::Scalar& p, const ReduceOptions& o) const {
  return Reduce(
      *this, o, "norm", [&](const at::Tensor& t) { return at::norm(t, p); },
      [&](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::norm(t, p, d, k); },
      [&](at::TensorList l) { return at::_foreach_norm(l, p); });
}

TensorDict TensorDict::any(at::IntArrayRef dims, bool keepdim) const {
  return Reduce(
      *this, Dims(dims, keepdim), "any", [](const at::Tensor& t) { return t.any(); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k, [](const at::Tensor& x, int64_t i, bool kk) { return x.any(i, kk); });
      });
}

TensorDict TensorDict::all(at::IntArrayRef dims, bool keepdim) const {
  return Reduce(
      *this, Dims(dims, keepdim), "all", [](const at::Tensor& t) { return t.all(); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k, [](const at::Tensor& x, int64_t i, bool kk) { return x.all(i, kk); });
      });
}

// ---- operators ----------------------------------------------------------------------------

TensorDict operator+(const TensorDict& a, const TensorDict& b) { return a.add(b); }
TensorDict operator+(const TensorDict& a, const at::Scalar& b) { return a.add(b); }
TensorDict operator+(const at::Scalar& a, const TensorDict& b) { return b.add(a); }
TensorDict operator-(const TensorDict& a, const TensorDict& b) { return a.sub(b); }
TensorDict operator-(const TensorDict& a, const at::Scalar& b) { return a.sub(b); }
TensorDict operator-(const at::Scalar& a, const TensorDict& b) {
  return MapLeaves(b, [&](const at::Tensor& t) { return at::rsub(t, a); }, "subtracting");
}
TensorDict operator*(const TensorDict& a, const TensorDict& b) { return a.mul(b); }
TensorDict operator*(const TensorDict& a, const at::Scalar& b) { return a.mul(b); }
TensorDict operator*(const at::Scalar& a, const TensorDict& b) { return b.mul(a); }
TensorDict operator/(const TensorDict& a, const TensorDict& b) { return a.div(b); }
TensorDict operator/(const TensorDict& a, const at::Scalar& b) { return a.div(b); }
TensorDict operator/(const at::Scalar& a, const TensorDict& b) {
  const at::Tensor s = WrappedScalar(a);
  return MapLeaves(b, [&](const at::Tensor& t) { return at::div(s, t); }, "dividing");
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

}  // namespace td
