// The plumbing of td/core/internal/leafwise.h.
#include "td/core/internal/leafwise.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "td/core/dtype.h"
#include "td/core/internal/in_place.h"
#include "td/core/storage.h"

namespace td {
namespace internal {

// A one-element tensor of `t`'s dtype and device (for the in-place dry runs).
at::Tensor Probe(const at::Tensor& t) { return at::ones({1}, t.options()); }

// Checks that an in-place op may modify leaf `i` (see NOTE [ Leaf-wise math ]).
void CheckWritable(const LeafTree& tree, size_t i, const char* op) {
  const at::Tensor& leaf = tree.leaves()[i];
  if (at::GradMode::is_enabled() && leaf.requires_grad() && leaf.is_leaf()) {
    TD_FAIL(c10::Error, op, ": key ", tree.key(i).repr(),
                     " is a leaf tensor that requires grad and cannot be modified in place "
                     "(use at::NoGradGuard or detach_() first)");
  }
}

namespace {

std::vector<ResolvedOperand> ResolveAll(const LeafTree& tree,
                                        const std::vector<const Operand*>& operands) {
  std::vector<ResolvedOperand> out;
  out.reserve(operands.size());
  for (const Operand* o : operands) out.push_back(Resolve(tree, *o));
  return out;
}

std::vector<LeafArg> ArgsOf(const std::vector<ResolvedOperand>& rs, size_t i) {
  std::vector<LeafArg> args;
  args.reserve(rs.size());
  for (const ResolvedOperand& r : rs) args.push_back(r.at(i));
  return args;
}

}  // namespace

at::Tensor WrappedNumber(const at::Scalar& s) {
  at::Tensor t = at::scalar_tensor(s, s.isFloatingPoint() ? at::kDouble
                                      : s.isBoolean()     ? at::kBool
                                      : s.isComplex()     ? at::kComplexDouble
                                                          : at::kLong);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

ResolvedOperand Resolve(const LeafTree& tree, const Operand& operand) {
  ResolvedOperand r;
  if (operand.is_scalar()) {
    r.scalar = operand.scalar();
  } else if (operand.is_tensor()) {
    if (!operand.tensor().defined()) TD_FAIL(ValueError, "the operand is an undefined tensor");
    r.list.assign(tree.num_leaves(), operand.tensor());
  } else {
    r.list = tree.Align(operand.tensordict(), LeafTree::AlignOptions().name("the operand"));
  }
  return r;
}

TensorDict LeafwiseOut(const TensorDict& td, const std::vector<const Operand*>& operands,
                       const ForeachOutFn& foreach, const EachOutFn& each, const char* what) {
  LeafTree tree(td);
  std::vector<ResolvedOperand> rs = ResolveAll(tree, operands);
  std::vector<at::Tensor> out;
  if (tree.num_leaves() > 0) {
    bool done = false;
    if (foreach) {
      try {
        std::optional<std::vector<at::Tensor>> r = foreach(tree.leaves(), rs);
        if (r) {
          out = std::move(*r);
          done = true;
        }
      } catch (const c10::Error&) {
        // rerun leaf by leaf below: the error then names the key
      }
    }
    if (!done) {
      out = MapEach(
          tree, [&](size_t i, const at::Tensor& x) { return each(x, ArgsOf(rs, i)); }, what);
    }
  }
  return tree.Rebuild(std::move(out), td.batch_size(), /*check=*/true);
}

namespace {

void LeafwiseInLeaves(const LeafTree& tree, const std::vector<const Operand*>& operands,
                      const ForeachInFn& foreach, const EachInFn& each, const char* op) {
  std::vector<ResolvedOperand> rs = ResolveAll(tree, operands);
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    const at::Tensor& leaf = tree.leaves()[i];
    CheckWritable(tree, i, op);
    std::vector<LeafArg> probes = ArgsOf(rs, i);
    for (LeafArg& a : probes) {
      if (a.s) continue;
      std::vector<int64_t> shape;
      try {
        shape = at::infer_size(leaf.sizes(), a.t.sizes());
      } catch (const c10::Error&) {
        shape.clear();
      }
      if (shape != leaf.sizes()) {
        TD_FAIL(ValueError, op, ": the operand for key ", tree.key(i).repr(), " has shape ",
                         SizeRepr(a.t.sizes()), ", which does not broadcast to the leaf's shape ",
                         SizeRepr(leaf.sizes()));
      }
      a.t = Probe(a.t);
    }
    try {
      at::Tensor p = Probe(leaf);
      each(p, probes);
    } catch (...) {
      RethrowWithKey(tree.key(i), op);
    }
  }
  if (tree.num_leaves() == 0) return;
  if (foreach && foreach(tree.leaves(), rs)) return;
  MapEach(
      tree,
      [&](size_t i, const at::Tensor& x) {
        at::Tensor t = x;
        each(t, ArgsOf(rs, i));
        return at::Tensor();
      },
      op);
}

}  // namespace

TensorDict& LeafwiseIn(TensorDict& td, const std::vector<const Operand*>& operands,
                       const ForeachInFn& foreach, const EachInFn& each, const char* op) {
  WriteLeaves(td, op,
              [&](const LeafTree& tree) { LeafwiseInLeaves(tree, operands, foreach, each, op); });
  return td;
}

}  // namespace internal
}  // namespace td
