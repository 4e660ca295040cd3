// The plumbing of td/core/internal/leafwise.h.
#include "td/core/internal/leafwise.h"

#include <ATen/ATen.h>
#include <ATen/MapAllocator.h>
#include <c10/core/GradMode.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "td/core/dtype.h"
#include "td/core/internal/in_place.h"
#include "td/core/mapped_copy.h"
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
// tensor -- with one dtype and device, no two leaves overlap, and the gaps in the range of the
// storage they span are at most as large as the leaves or at most 64 bytes a leaf (the
// consolidated layout's alignment padding, which dominates when leaves are small), the engine
// runs an operation ONCE over that range (a 1-D view of it) instead of once per leaf, and each
// result leaf is the same view (sizes, strides, offset) into the one result: the result is again
// one buffer, so a chain of such ops stays one kernel each. This covers
//  * out-of-place element-wise ops (LeafwiseOut) whose operands are numbers or TensorDicts whose
//    leaves are laid out the same way in a buffer of their own (same relative offsets);
//  * in-place element-wise ops (LeafwiseIn) with the same operands, when the leaves cover the
//    range with no gap (an in-place kernel must not write memory that no leaf owns); validation
//    then needs one probe, as every leaf has the same dtype and device;
//  * clone, to(dtype) and to(device) (CopyOneBuffer: memory_ops.cc, structure.cc),
//    large buffers copied in parallel chunks.
// Gaps between leaves are computed over and never read. Leaves that require grad under grad mode
// take the per-leaf path (autograd must see each leaf's own graph), and so does a kernel that
// throws (the per-leaf rerun names the key). This is the general path's fast case, not a second
// API: every caller of the engine gets it, and td::consolidate adds no operations of its own.
struct Span {
  at::Tensor whole;     // 1-D view of the spanned range
  int64_t begin = 0;    // its storage offset (elements)
  bool gapless = false;  // the leaves cover the range exactly
};

std::optional<Span> SpanOf(const std::vector<at::Tensor>& leaves) {
  if (leaves.empty()) return std::nullopt;
  const at::Tensor& first = leaves[0];
  if (!first.defined() || first.layout() != at::kStrided || !first.has_storage()) {
    return std::nullopt;
  }
  // The storage is compared through unsafe_storage(): storage() hands out a counted reference.
  const c10::StorageImpl* storage =
      first.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [offset, offset + numel)
  ranges.reserve(leaves.size());
  int64_t total = 0;
  bool sorted = true;  // consolidated leaves come in buffer order: no sort needed
  const bool grad = at::GradMode::is_enabled();
  // Quantized leaves never span: their TensorImpl carries a quantizer that Unspan's plain views
  // would lose.
  for (const at::Tensor& t : leaves) {
    if (!t.defined() || t.layout() != at::kStrided || !t.has_storage() || t.is_quantized() ||
        t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl() != storage ||
        t.scalar_type() != first.scalar_type() || t.device() != first.device() ||
        !t.is_contiguous() || (grad && t.requires_grad()) || t.is_neg() || t.is_conj()) {
      return std::nullopt;
    }
    const int64_t offset = t.storage_offset();
    if (!ranges.empty() && offset < ranges.back().first) sorted = false;
    ranges.emplace_back(offset, offset + t.numel());
    total += t.numel();
  }
  if (!sorted) std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return std::nullopt;  // overlap
  }
  const int64_t begin = ranges.front().first;
  const int64_t end = ranges.back().second;
  const int64_t gaps = end - begin - total;
  const int64_t padding =  // 64 bytes a leaf, in elements
      static_cast<int64_t>(leaves.size()) * std::max<int64_t>(1, 64 / first.element_size());
  if (total == 0 || (gaps > total && gaps > padding)) return std::nullopt;
  return Span{first.as_strided({end - begin}, {1}, begin), begin, end - begin == total};
}

// The operands over the whole span: numbers as they are, a TensorDict operand as the 1-D view of
// its own buffer when its leaves sit at the same offsets relative to it as `leaves` do in
// `span`; nullopt when an operand is neither (a tensor operand, another layout).
std::optional<std::vector<LeafArg>> SpanArgs(const Span& span,
                                             const std::vector<at::Tensor>& leaves,
                                             const std::vector<ResolvedOperand>& rs) {
  std::vector<LeafArg> args;
  args.reserve(rs.size());
  for (const ResolvedOperand& r : rs) {
    if (r.is_scalar()) {
      args.push_back(r.at(0));
      continue;
    }
    std::optional<Span> other = SpanOf(r.list);
    if (!other || other->whole.numel() != span.whole.numel()) return std::nullopt;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (r.list[i].storage_offset() - other->begin != leaves[i].storage_offset() - span.begin ||
          r.list[i].sizes() != leaves[i].sizes()) {
        return std::nullopt;
      }
    }
    args.push_back(LeafArg{other->whole, {}});
  }
  return args;
}

// Each leaf's view into `out`, the op's result over `span.whole`; nullopt when `out` is not a
// contiguous 1-D result of the same length on the same device.
std::optional<std::vector<at::Tensor>> Unspan(const Span& span, const at::Tensor& out,
                                              const std::vector<at::Tensor>& leaves) {
  if (!out.defined() || out.layout() != at::kStrided || out.dim() != 1 ||
      out.numel() != span.whole.numel() || !out.is_contiguous()) {
    return std::nullopt;
  }
  std::vector<at::Tensor> views;
  views.reserve(leaves.size());
  const int64_t shift = out.storage_offset() - span.begin;
  if (out.requires_grad() || out.is_neg() || out.is_conj()) {
    // Autograd must record each view: the dispatcher's as_strided.
    for (const at::Tensor& t : leaves) {
      views.push_back(out.as_strided(t.sizes(), t.strides(), t.storage_offset() + shift));
    }
    return views;
  }
  // Otherwise each leaf's view is made directly -- a TensorImpl over the same storage with
  // `out`'s dispatch keys, sharing its version counter as a view does -- which costs a fraction
  // of a dispatched as_strided (for 100 small leaves, most of the op's time). `out` is a plain
  // tensor with storage here: wrappers without storage (functorch's batched tensors) never form
  // a span.
  const c10::TensorImpl* src = out.unsafeGetTensorImpl();
  for (const at::Tensor& t : leaves) {
    auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(src->storage()), src->key_set(),
                                                     src->dtype());
    impl->set_sizes_contiguous(t.sizes());
    impl->set_storage_offset(t.storage_offset() + shift);
    impl->set_version_counter(src->version_counter());
    views.emplace_back(std::move(impl));
  }
  return views;
}

// Below this many elements a buffer is copied in one call; above it in chunks of this size
// spread over the cores (parallel::plan_threads decides how many).
constexpr int64_t kCopyChunk = int64_t{1} << 20;

// A large fresh CPU buffer is written once, page by page: with 4 KiB pages that is one page fault
// per 4 KiB (for 400 MB, 100k faults, which cost more than the copy itself; an allocator that
// keeps freed small blocks -- what a leaf-by-leaf loop of 4 MB tensors gets from glibc -- pays
// them only once). Asking the kernel for transparent huge pages on the buffer's 2 MiB-aligned
// interior, before anything touches it, makes that 512 times fewer faults. Only advice: where
// THP is off (or not compiled in) madvise fails or is ignored and nothing changes.
void AdviseHugePages(const at::Tensor& buffer) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const size_t bytes = buffer.numel() * buffer.element_size();
  if (!buffer.device().is_cpu() || bytes < 4 * kHuge) return;
  const auto begin = reinterpret_cast<uintptr_t>(buffer.data_ptr());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)buffer;
#endif
}

// `whole` copied into a new contiguous tensor of `options`. A CPU buffer mapped from a file
// (a loaded consolidated file) is copied under the SIGBUS guard (NOTE [ SIGBUS guard ],
// td/core/mapped_copy.h): a file truncated since it was mapped is a MemmapError naming it.
at::Tensor CopyWhole(const at::Tensor& whole, const at::TensorOptions& options) {
  const int64_t n = whole.numel();
  const bool cpu = whole.device().is_cpu() && options.device().is_cpu();
  const at::MapAllocator* file =
      cpu && options.dtype() == whole.dtype()
          ? at::MapAllocator::fromDataPtr(whole.storage().data_ptr())
          : nullptr;
  if (file == nullptr && (n <= kCopyChunk || !cpu)) {
    return whole.to(options, /*non_blocking=*/false, /*copy=*/true);
  }
  at::Tensor out = at::empty({n}, options);
  AdviseHugePages(out);
  const int64_t chunks = (n + kCopyChunk - 1) / kCopyChunk;
  const int threads = parallel::plan_threads(chunks, n, parallel::ParallelOptions());
  std::atomic<bool> faulted{false};
  parallel::parallel_for(chunks, threads, [&](int64_t c) {
    const int64_t b = c * kCopyChunk;
    const int64_t e = std::min(n, b + kCopyChunk);
    if (file == nullptr) {
      out.slice(0, b, e).copy_(whole.slice(0, b, e));
      return;
    }
    const size_t item = whole.element_size();
    const char* from = static_cast<const char*>(whole.data_ptr()) + b * item;
    char* into = static_cast<char*>(out.data_ptr()) + b * item;
    const size_t bytes = static_cast<size_t>(e - b) * item;
    if (!GuardedCopy([&] { std::memcpy(into, from, bytes); })) faulted = true;
  });
  if (faulted) {
    TD_FAIL(MemmapError, "copying a buffer mapped from ", file->filename(),
            " raised SIGBUS: the file is shorter than when it was mapped (truncated by another "
            "process?)");
  }
  return out;
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

std::optional<std::vector<at::Tensor>> CopyOneBuffer(const std::vector<at::Tensor>& leaves,
                                                     const at::TensorOptions& options) {
  std::optional<Span> span = SpanOf(leaves);
  if (!span) return std::nullopt;
  // Not caught: a copy fails for the whole buffer (a truncated mapped file is a MemmapError a
  // leaf-by-leaf rerun would turn into SIGBUS).
  return Unspan(*span, CopyWhole(span->whole, span->whole.options().merge_in(options)), leaves);
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
    // The one-kernel case of NOTE [ One buffer, one kernel ].
    if (std::optional<Span> span = SpanOf(tree.leaves())) {
      if (std::optional<std::vector<LeafArg>> args = SpanArgs(*span, tree.leaves(), rs)) {
        try {
          std::optional<std::vector<at::Tensor>> views =
              Unspan(*span, each(span->whole, *args), tree.leaves());
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

// NOTE [ One buffer, one kernel ], in place: every leaf is checked writable, one probe of the
// common dtype validates the op, then one kernel writes the whole range. False (nothing written)
// when the leaves or operands do not allow it or the probe throws: the caller then validates
// leaf by leaf, so the error names the key.
bool OneKernelIn(const LeafTree& tree, const std::vector<ResolvedOperand>& rs,
                 const EachInFn& each) {
  std::optional<Span> span = SpanOf(tree.leaves());
  if (!span || !span->gapless) return false;
  std::optional<std::vector<LeafArg>> args = SpanArgs(*span, tree.leaves(), rs);
  if (!args) return false;
  // Every leaf is writable: SpanOf refuses leaves that require grad under grad mode, the one
  // case CheckWritable rejects.
  std::vector<LeafArg> probes = *args;
  for (LeafArg& a : probes) {
    if (!a.s) a.t = Probe(a.t);
  }
  try {
    at::Tensor p = Probe(span->whole);
    each(p, probes);
  } catch (const c10::Error&) {
    return false;
  }
  each(span->whole, *args);
  return true;
}

void LeafwiseInLeaves(const LeafTree& tree, const std::vector<const Operand*>& operands,
                      const ForeachInFn& foreach, const EachInFn& each, const char* op,
                      const ValueCheckFn& values) {
  std::vector<ResolvedOperand> rs = ResolveAll(tree, operands);
  if (values) {  // before any kernel: one that fails on a value has written what came before
    for (size_t i = 0; i < tree.num_leaves(); ++i) {
      try {
        values(tree.leaves()[i], ArgsOf(rs, i));
      } catch (...) {
        RethrowWithKey(tree.key(i), op);
      }
    }
  }
  if (OneKernelIn(tree, rs, each)) return;
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
                       const ForeachInFn& foreach, const EachInFn& each, const char* op,
                       const ValueCheckFn& values) {
  WriteLeaves(td, op, [&](const LeafTree& tree) {
    LeafwiseInLeaves(tree, operands, foreach, each, op, values);
  });
  return td;
}

}  // namespace internal
}  // namespace td
