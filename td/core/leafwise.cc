// The plumbing of td/core/internal/leafwise.h.
#include "td/core/internal/leafwise.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <utility>

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

bool TracksGrad(const std::vector<at::Tensor>& leaves) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : leaves) {
    if (t.requires_grad()) return true;
  }
  return false;
}

namespace {

// NOTE [ One buffer, one kernel ]
// When every leaf is a contiguous view into ONE storage -- a consolidated TensorDict
// (td/consolidate), the parameters of a module flattened into one buffer, the pieces of one split
// tensor -- with one dtype and device, no two leaves overlap, and the range of the storage they
// span holds at most twice their elements, an out-of-place element-wise op whose operands are
// numbers runs ONCE over that range (a 1-D view of it) instead of once per leaf, and each result
// leaf is the same view (sizes, strides, offset) into the one result: the result is again one
// buffer, so a chain of such ops stays one kernel each. Gaps between leaves are computed over and
// never read. Leaves that require grad under grad mode take the per-leaf path (autograd must see
// each leaf's own graph). This is the general path's fast case, not a second API: every caller of
// LeafwiseOut gets it.
struct Span {
  at::Tensor whole;  // 1-D view of the spanned range
  int64_t begin = 0;  // its storage offset (elements)
};

std::optional<Span> SpanOf(const std::vector<at::Tensor>& leaves) {
  if (leaves.size() < 2) return std::nullopt;
  const at::Tensor& first = leaves[0];
  if (!first.defined() || first.layout() != at::kStrided || !first.has_storage()) {
    return std::nullopt;
  }
  const c10::StorageImpl* storage = first.storage().unsafeGetStorageImpl();
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [offset, offset + numel)
  ranges.reserve(leaves.size());
  int64_t total = 0;
  const bool grad = at::GradMode::is_enabled();
  for (const at::Tensor& t : leaves) {
    if (!t.defined() || t.layout() != at::kStrided || !t.has_storage() ||
        t.storage().unsafeGetStorageImpl() != storage || t.scalar_type() != first.scalar_type() ||
        t.device() != first.device() || !t.is_contiguous() || (grad && t.requires_grad()) ||
        t.is_neg() || t.is_conj()) {
      return std::nullopt;
    }
    ranges.emplace_back(t.storage_offset(), t.storage_offset() + t.numel());
    total += t.numel();
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return std::nullopt;  // overlap
  }
  const int64_t begin = ranges.front().first;
  const int64_t end = ranges.back().second;
  if (total == 0 || end - begin > 2 * total) return std::nullopt;
  return Span{first.as_strided({end - begin}, {1}, begin), begin};
}

// Each leaf's view into `out`, the op's result over `span.whole`; nullopt when `out` is not a
// contiguous 1-D result of the same length on the same device.
std::optional<std::vector<at::Tensor>> Unspan(const Span& span, const at::Tensor& out,
                                              const std::vector<at::Tensor>& leaves) {
  if (!out.defined() || out.layout() != at::kStrided || out.dim() != 1 ||
      out.numel() != span.whole.numel() || !out.is_contiguous() ||
      out.device() != span.whole.device()) {
    return std::nullopt;
  }
  std::vector<at::Tensor> views;
  views.reserve(leaves.size());
  for (const at::Tensor& t : leaves) {
    views.push_back(
        out.as_strided(t.sizes(), t.strides(), out.storage_offset() + t.storage_offset() - span.begin));
  }
  return views;
}


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

TensorDict MapLeaves(const TensorDict& td, const std::function<at::Tensor(const at::Tensor&)>& fn,
                     const char* what, bool check, const parallel::ParallelOptions& parallel) {
  LeafTree tree(td);
  std::vector<at::Tensor> out =
      MapEach(tree, [&](size_t, const at::Tensor& x) { return fn(x); }, what, parallel);
  return tree.Rebuild(std::move(out), td.batch_size(), check);
}

TensorDict LeafwiseOut(const TensorDict& td, const std::vector<const Operand*>& operands,
                       const ForeachOutFn& foreach, const EachOutFn& each, const char* what) {
  LeafTree tree(td);
  std::vector<ResolvedOperand> rs = ResolveAll(tree, operands);
  std::vector<at::Tensor> out;
  if (tree.num_leaves() > 0) {
    bool done = false;
    // NOTE [ One buffer, one kernel ]: number operands only.
    if (std::all_of(rs.begin(), rs.end(), [](const ResolvedOperand& r) { return r.is_scalar(); })) {
      if (std::optional<Span> span = SpanOf(tree.leaves())) {
        try {
          std::optional<std::vector<at::Tensor>> views =
              Unspan(*span, each(span->whole, ArgsOf(rs, 0)), tree.leaves());
          if (views) {
            out = std::move(*views);
            done = true;
          }
        } catch (const c10::Error&) {
          // rerun below: leaf by leaf, the error then names the key
        }
      }
    }
    // LibTorch 1.13's _foreach_* kernels have no derivatives: leaves that autograd tracks go
    // leaf by leaf, so each result has its graph.
    if (!done && foreach && !TracksGrad(tree.leaves())) {
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
  if (foreach && !TracksGrad(tree.leaves()) && foreach(tree.leaves(), rs)) return;
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
