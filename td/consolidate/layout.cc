#include "td/consolidate/internal/layout.h"

#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/TensorOptions.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "td/core/internal/entry_list.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

BufferLayout BufferLayout::Plan(const std::vector<at::Tensor>& leaves) {
  BufferLayout layout;
  layout.slots.resize(leaves.size());
  // Groups by dtype, in order of each dtype's first leaf.
  std::vector<at::ScalarType> dtypes;
  for (const at::Tensor& t : leaves) {
    if (std::find(dtypes.begin(), dtypes.end(), t.scalar_type()) == dtypes.end()) {
      dtypes.push_back(t.scalar_type());
    }
  }
  int64_t offset = 0;
  for (at::ScalarType d : dtypes) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      const at::Tensor& t = leaves[i];
      if (t.scalar_type() != d) continue;
      Slot& s = layout.slots[i];
      s.dtype = d;
      s.shape.assign(t.sizes().begin(), t.sizes().end());
      s.offset = offset;
      s.nbytes = t.numel() * static_cast<int64_t>(c10::elementSize(d));
      offset = AlignUp(offset + s.nbytes);
    }
  }
  layout.nbytes = offset;
  return layout;
}

at::Tensor AllocateHost(int64_t numel, at::ScalarType dtype) {
  constexpr int64_t kHuge = int64_t{2} << 20;
  const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
  if (nbytes < 2 * kHuge) return at::empty({numel}, at::TensorOptions().dtype(dtype));
  void* p = nullptr;
  if (::posix_memalign(&p, kHuge, static_cast<size_t>(nbytes)) != 0 || p == nullptr) {
    return at::empty({numel}, at::TensorOptions().dtype(dtype));  // LibTorch reports OOM
  }
#ifdef MADV_HUGEPAGE
  ::madvise(p, static_cast<size_t>(nbytes), MADV_HUGEPAGE);  // advice only: failure is fine
#endif
  return at::from_blob(p, {numel}, [](void* q) { std::free(q); },
                       at::TensorOptions().dtype(dtype));
}

namespace {

struct Registry {
  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> weak;
    std::shared_ptr<const BufferLayout> layout;
    int64_t base;
  };
  // std::mutex, not absl::Mutex: Abseil 20220623 locks it only through a pointer, which 20260526
  // deprecates. Both members below are guarded by it.
  std::mutex mu;
  absl::flat_hash_map<const c10::StorageImpl*, Entry> entries;
  size_t sweep_at = 64;
};

Registry& GetRegistry() {
  static Registry* r = new Registry();  // never destroyed: used from static destructors
  return *r;
}

// The buffer `storage` holds, if registered in `r` (locked); an expired entry is dropped.
std::optional<Buffer> Find(Registry& r, const c10::Storage& storage) {
  auto it = r.entries.find(storage.unsafeGetStorageImpl());
  if (it == r.entries.end()) return std::nullopt;
  if (!it->second.weak.expired()) return Buffer{storage, it->second.layout, it->second.base};
  r.entries.erase(it);
  return std::nullopt;
}

// The registered buffer `t`'s storage holds, if any.
std::optional<Buffer> BufferHolding(const at::Tensor& t) {
  if (!t.defined() || t.layout() != at::kStrided || !t.has_storage()) return std::nullopt;
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return Find(r, t.storage());
}

// True when `t` is the contiguous view of slot `i` of `buffer`. No Storage or Tensor copies: this
// runs for every leaf of every is_consolidated() test.
bool LeafMatches(const at::Tensor& t, const Buffer& buffer, size_t i) {
  const std::vector<BufferLayout::Slot>& slots = buffer.layout().slots;
  if (i >= slots.size() || !t.defined()) return false;
  const BufferLayout::Slot& slot = slots[i];
  const c10::TensorImpl* ti = t.unsafeGetTensorImpl();
  if (ti->unsafe_storage().unsafeGetStorageImpl() != buffer.storage.unsafeGetStorageImpl() ||
      ti->layout() != at::kStrided || ti->dtype() != slot.dtype || !ti->is_contiguous()) {
    return false;
  }
  return ti->sizes().equals(slot.shape) &&
         ti->storage_offset() * static_cast<int64_t>(c10::elementSize(slot.dtype)) ==
             buffer.base + slot.offset;
}

// Matches the leaves of `td`, depth first from slot `*next`, against `*buffer` (set from the
// first leaf when empty).
bool HeldLeavesMatch(const TensorDict& td, std::optional<Buffer>* buffer, size_t* next) {
  const EntryList* entries = td.storage().held_entries();
  if (entries == nullptr) return false;
  for (const EntryList::Entry& e : entries->entries()) {
    if (e.second.is_tensor()) {
      if (!*buffer) *buffer = BufferHolding(e.second.tensor());
      if (!*buffer || !LeafMatches(e.second.tensor(), **buffer, (*next)++)) return false;
    } else if (e.second.is_tensordict()) {
      if (!HeldLeavesMatch(e.second.tensordict(), buffer, next)) return false;
    }
  }
  return true;
}

}  // namespace

std::optional<Buffer> Adopt(const at::Tensor& owner, std::shared_ptr<const BufferLayout> layout) {
  TORCH_INTERNAL_ASSERT(owner.is_contiguous() &&
                        owner.numel() * static_cast<int64_t>(owner.element_size()) >=
                            layout->nbytes);
  const int64_t base = owner.storage_offset() * static_cast<int64_t>(owner.element_size());
  const c10::Storage& storage = owner.storage();
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (std::optional<Buffer> old = Find(r, storage)) {
    if (old->base != base || old->layout().nbytes != layout->nbytes ||
        old->layout().slots != layout->slots) {
      return std::nullopt;
    }
    return old;
  }
  if (r.entries.size() >= r.sweep_at) {
    absl::erase_if(r.entries, [](const auto& e) { return e.second.weak.expired(); });
    r.sweep_at = std::max<size_t>(64, 2 * r.entries.size());
  }
  r.entries.insert_or_assign(storage.unsafeGetStorageImpl(),
                             Registry::Entry{storage.getWeakStorageImpl(), layout, base});
  return Buffer{storage, std::move(layout), base};
}

at::Tensor ViewInto(const c10::Storage& storage, at::ScalarType dtype, at::IntArrayRef shape,
                    int64_t offset) {
  const at::Device device = storage.device();
  const c10::DispatchKey key = c10::computeDispatchKey(dtype, at::kStrided, device);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(storage), c10::DispatchKeySet(key),
                                                   caffe2::TypeMeta::fromScalarType(dtype));
  impl->set_sizes_contiguous(shape);
  impl->set_storage_offset(offset / static_cast<int64_t>(c10::elementSize(dtype)));
  return at::Tensor(std::move(impl));
}

at::Tensor WholeBuffer(const Buffer& buffer) {
  return ViewInto(buffer.storage, at::kByte, {buffer.layout().nbytes}, buffer.base);
}

std::vector<at::Tensor> SlotViews(const Buffer& b) {
  std::vector<at::Tensor> out;
  out.reserve(b.layout().slots.size());
  for (const BufferLayout::Slot& s : b.layout().slots) {
    out.push_back(ViewInto(b.storage, s.dtype, s.shape, b.base + s.offset));
  }
  return out;
}

std::optional<Buffer> BufferOfTensorDict(const TensorDict& td) {
  std::optional<Buffer> b;
  size_t matched = 0;
  if (!HeldLeavesMatch(td, &b, &matched) || !b || matched != b->layout().slots.size()) {
    return std::nullopt;
  }
  return b;
}

std::optional<Buffer> BufferOf(const std::vector<at::Tensor>& leaves) {
  std::optional<Buffer> b = leaves.empty() ? std::nullopt : BufferHolding(leaves[0]);
  if (!b || b->layout().slots.size() != leaves.size()) return std::nullopt;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!LeafMatches(leaves[i], *b, i)) return std::nullopt;
  }
  return b;
}

}  // namespace internal
}  // namespace td
