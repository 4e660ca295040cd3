#include "td/consolidate/consolidated_ops.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/MapAllocator.h>
#include <ATen/Parallel.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "td/consolidate/layout.h"
#include "td/core/errors.h"
#include "td/core/internal/leaves.h"
#include "td/core/mapped_copy.h"

namespace td {
namespace consolidated {

using consolidate_internal::Buffer;
using consolidate_internal::BufferLayout;
using consolidate_internal::WholeBuffer;

namespace {

// Below this many bytes a CPU buffer is copied with memcpy (no dispatcher call); above it with
// Tensor::copy_, which spreads large copies over LibTorch's threads.
constexpr int64_t kMemcpyBytes = int64_t{1} << 20;

// The result of an operation: `owner` holds the new buffer laid out as `layout`; the structure is
// `td`'s (whose levels all hold their entries: BufferOfTensorDict(td) found its buffer).
TensorDict Rebuilt(const TensorDict& td, const at::Tensor& owner,
                   std::shared_ptr<const BufferLayout> layout,
                   std::optional<std::optional<at::Device>> device = std::nullopt) {
  std::optional<Buffer> b = consolidate_internal::Adopt(owner, layout);
  std::vector<at::Tensor> views =
      b ? consolidate_internal::SlotViews(*b)
        : consolidate_internal::SlotViews(
              owner.storage(), owner.storage_offset() * static_cast<int64_t>(owner.element_size()),
              *layout);
  return consolidate_internal::RebuildHeld(td, std::move(views), device);
}

// `out`, the result of an element-wise function over `whole`, as a flat contiguous tensor;
// ValueError when it has another number of elements.
at::Tensor FlatResult(const at::Tensor& out, const at::Tensor& whole, const char* op) {
  if (out.numel() != whole.numel()) {
    TD_FAIL(ValueError, "td::consolidated::", op, ": the function returned ", out.numel(),
                     " elements for a buffer of ", whole.numel(),
                     ": it must be element-wise (same number of elements as its input)");
  }
  return out.reshape({-1}).contiguous();
}

// The new layout for a result of dtype `dtype` computed over a uniform buffer.
std::shared_ptr<const BufferLayout> LayoutFor(const Buffer& b, at::ScalarType dtype) {
  if (dtype == *b.layout().uniform_dtype) return b.ctx->layout;
  return std::make_shared<BufferLayout>(b.layout().Cast(dtype));
}

// Out of place, one operand: kernel(whole buffer) when uniform, else fallback().
TensorDict Unary(const TensorDict& td, const char* op,
                 const std::function<at::Tensor(const at::Tensor&)>& kernel,
                 const std::function<TensorDict()>& fallback) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b || !b->layout().uniform_dtype) return fallback();
  at::Tensor whole = WholeBuffer(*b, *b->layout().uniform_dtype);
  at::Tensor out = kernel(whole);
  if (!out.defined() || out.layout() != at::kStrided || out.device() != whole.device()) {
    return fallback();
  }
  out = FlatResult(out, whole, op);
  return Rebuilt(td, out, LayoutFor(*b, out.scalar_type()));
}

// The buffers of two operands whose leaves under the same keys sit at the same offsets, or
// nullopt.
struct Pair {
  Buffer a, b;
};
std::optional<Pair> SameLayout(const internal::LeafTree& tree, const TensorDict& other) {
  // Of the root's held levels: results are rebuilt from them (Rebuilt).
  std::optional<Buffer> a = consolidate_internal::BufferOfTensorDict(tree.root());
  if (!a || !a->layout().uniform_dtype) return std::nullopt;
  std::vector<at::Tensor> aligned;
  try {
    aligned = tree.Align(other, internal::LeafTree::AlignOptions());
  } catch (const c10::Error&) {
    return std::nullopt;  // the member reports it
  }
  std::optional<Buffer> b = consolidate_internal::BufferOf(aligned);
  if (!b || !(b->ctx == a->ctx || b->layout().SameAs(a->layout()))) return std::nullopt;
  return Pair{*a, *b};
}

// SameLayout without flattening: both operands hold their entries, with the same keys in the
// same order (the in-place paths, which rebuild nothing); otherwise SameLayout.
std::optional<Pair> SameLayoutFast(const TensorDict& td, const TensorDict& other) {
  if (consolidate_internal::SameStructure(td, other)) {
    std::optional<Buffer> a = consolidate_internal::BufferOfTensorDict(td);
    if (!a || !a->layout().uniform_dtype) return std::nullopt;
    std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(other);
    if (!b || !(b->ctx == a->ctx || b->layout().SameAs(a->layout()))) return std::nullopt;
    return Pair{*a, *b};
  }
  return SameLayout(internal::LeafTree(td), other);
}

TensorDict Binary(const TensorDict& td, const TensorDict& other, const char* op,
                  const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& kernel,
                  const std::function<TensorDict()>& fallback) {
  std::optional<Pair> p = SameLayoutFast(td, other);
  if (!p) return fallback();
  const at::ScalarType dtype = *p->a.layout().uniform_dtype;
  at::Tensor wa = WholeBuffer(p->a, dtype);
  at::Tensor out = kernel(wa, WholeBuffer(p->b, dtype));
  if (!out.defined() || out.layout() != at::kStrided || out.device() != wa.device()) {
    return fallback();
  }
  out = FlatResult(out, wa, op);
  return Rebuilt(td, out, LayoutFor(p->a, out.scalar_type()));
}

// Writes `r` (a function's result over `whole`) into `whole` unless it is `whole` itself.
void WriteBack(const at::Tensor& whole, const at::Tensor& r, const char* op) {
  if (!r.defined() || r.is_same(whole)) return;
  whole.copy_(FlatResult(r, whole, op));
}

}  // namespace

TensorDict clone(const TensorDict& td) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b) return td.clone();
  at::Tensor src = WholeBuffer(*b, at::kByte);
  at::Tensor dst = src.device().is_cpu()
                       ? consolidate_internal::AllocateHost(src.numel(), at::kByte)
                       : at::empty({src.numel()}, src.options());
  if (const at::MapAllocator* file =
          src.device().is_cpu() ? at::MapAllocator::fromDataPtr(src.storage().data_ptr())
                                : nullptr) {
    // A buffer mapped from a file (load_consolidated, consolidate(filename)): copied in chunks
    // under the SIGBUS guard (NOTE [ SIGBUS guard ] in td/core/mapped_copy.h).
    const auto* from = static_cast<const char*>(src.data_ptr());
    auto* into = static_cast<char*>(dst.data_ptr());
    std::atomic<bool> faulted{false};
    at::parallel_for(0, src.numel(), kMemcpyBytes, [&](int64_t begin, int64_t end) {
      if (!internal::GuardedCopy([&] {
            std::memcpy(into + begin, from + begin, static_cast<size_t>(end - begin));
          })) {
        faulted = true;
      }
    });
    if (faulted) {
      TD_FAIL(MemmapError, "clone: reading the consolidated buffer mapped from ",
              file->filename(), " raised SIGBUS: the file is shorter than when it was mapped ",
              "(truncated by another process?)");
    }
  } else if (src.device().is_cpu() && src.numel() < kMemcpyBytes) {
    if (src.numel() > 0) std::memcpy(dst.data_ptr(), src.data_ptr(), src.numel());
  } else {
    dst.copy_(src);  // large: spread over LibTorch's threads (which also fault the pages in)
  }
  return Rebuilt(td, dst, b->ctx->layout);
}

TensorDict to(const TensorDict& td, at::ScalarType dtype) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b || !b->layout().uniform_dtype || !at::isFloatingType(*b->layout().uniform_dtype) ||
      !at::isFloatingType(dtype) || *b->layout().uniform_dtype == dtype) {
    return td.to(dtype);
  }
  at::Tensor src = WholeBuffer(*b, *b->layout().uniform_dtype);
  at::Tensor out = src.device().is_cpu() ? consolidate_internal::AllocateHost(src.numel(), dtype)
                                         : at::empty({src.numel()}, src.options().dtype(dtype));
  out.copy_(src);
  return Rebuilt(td, out, LayoutFor(*b, dtype));
}

TensorDict to(const TensorDict& td, at::Device device, bool non_blocking) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b || b->storage.device() == device) return td.to(device, non_blocking);
  at::Tensor out = WholeBuffer(*b, at::kByte).to(device, /*non_blocking=*/non_blocking);
  return Rebuilt(td, out, b->ctx->layout, std::optional<std::optional<at::Device>>(device));
}

TensorDict pin_memory(const TensorDict& td) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b || !b->storage.device().is_cpu() || !at::globalContext().hasCUDA()) {
    return td.pin_memory();
  }
  return Rebuilt(td, WholeBuffer(*b, at::kByte).pin_memory(), b->ctx->layout);
}

TensorDict& share_memory_(TensorDict& td) {
  internal::LeafTree tree(td);
  std::optional<Buffer> b = consolidate_internal::BufferOf(tree.leaves());
  if (!b || !b->storage.device().is_cpu() || td.is_shared()) return td.share_memory_();
  TensorDict holder({{"buffer", WholeBuffer(*b, at::kByte)}}, {});
  holder.share_memory_();
  at::Tensor owner = holder.get("buffer");
  std::optional<Buffer> nb = consolidate_internal::Adopt(owner, b->ctx->layout);
  std::vector<at::Tensor> views =
      nb ? consolidate_internal::SlotViews(*nb)
         : consolidate_internal::SlotViews(
               owner.storage(), owner.storage_offset() * static_cast<int64_t>(owner.element_size()),
               b->layout());
  for (size_t i = 0; i < views.size(); ++i) td.set(tree.key(i), std::move(views[i]));
  td.lock_();
  return td;
}

TensorDict apply(const TensorDict& td, const TensorDict::LeafFn& fn) {
  return Unary(td, "apply", fn, [&] { return td.apply(fn); });
}

TensorDict apply(const TensorDict& td, const TensorDict::BinaryLeafFn& fn,
                 const TensorDict& other) {
  return Binary(td, other, "apply", fn, [&] { return td.apply(fn, other); });
}

TensorDict& apply_(TensorDict& td, const TensorDict::LeafFn& fn) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b || !b->layout().uniform_dtype) return td.apply_(fn);
  at::Tensor whole = WholeBuffer(*b, *b->layout().uniform_dtype);
  WriteBack(whole, fn(whole), "apply_");
  return td;
}

TensorDict& apply_(TensorDict& td, const TensorDict::BinaryLeafFn& fn, const TensorDict& other) {
  std::optional<Pair> p = SameLayoutFast(td, other);
  if (!p) return td.apply_(fn, other);
  const at::ScalarType dtype = *p->a.layout().uniform_dtype;
  at::Tensor whole = WholeBuffer(p->a, dtype);
  WriteBack(whole, fn(whole, WholeBuffer(p->b, dtype)), "apply_");
  return td;
}

TensorDict mul(const TensorDict& td, const at::Scalar& other) {
  return Unary(
      td, "mul", [&](const at::Tensor& x) { return x.mul(other); },
      [&] { return td.mul(other); });
}

TensorDict add(const TensorDict& td, const TensorDict& other, const at::Scalar& alpha) {
  return Binary(
      td, other, "add",
      [&](const at::Tensor& x, const at::Tensor& y) { return at::add(x, y, alpha); },
      [&] { return td.add(other, alpha); });
}

TensorDict& add_(TensorDict& td, const TensorDict& other, const at::Scalar& alpha) {
  std::optional<Pair> p = SameLayoutFast(td, other);
  if (!p) return td.add_(other, alpha);
  const at::ScalarType dtype = *p->a.layout().uniform_dtype;
  WholeBuffer(p->a, dtype).add_(WholeBuffer(p->b, dtype), alpha);
  return td;
}

TensorDict& zero_(TensorDict& td) {
  std::optional<Buffer> b = consolidate_internal::BufferOfTensorDict(td);
  if (!b) return td.zero_();
  at::Tensor bytes = WholeBuffer(*b, at::kByte);
  if (bytes.device().is_cpu() && bytes.numel() < kMemcpyBytes) {
    if (bytes.numel() > 0) std::memset(bytes.data_ptr(), 0, bytes.numel());
  } else {
    bytes.zero_();
  }
  return td;
}

TensorDict clamp(const TensorDict& td, const std::optional<at::Scalar>& min,
                 const std::optional<at::Scalar>& max) {
  if (!min && !max) return td.clamp(min, max);  // the member's error
  const c10::optional<at::Scalar> lo = min ? c10::optional<at::Scalar>(*min) : c10::nullopt;
  const c10::optional<at::Scalar> hi = max ? c10::optional<at::Scalar>(*max) : c10::nullopt;
  return Unary(
      td, "clamp", [&](const at::Tensor& x) { return at::clamp(x, lo, hi); },
      [&] { return td.clamp(min, max); });
}

TensorDict exp(const TensorDict& td) {
  return Unary(
      td, "exp", [](const at::Tensor& x) { return x.exp(); }, [&] { return td.exp(); });
}

}  // namespace consolidated
}  // namespace td
