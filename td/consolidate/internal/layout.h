// Where the leaves of a consolidated TensorDict live inside its one buffer, and how a TensorDict
// is recognised as consolidated. Shared by consolidate() and the
// consolidated file format (td/consolidate/file.h).
//
// NOTE [ Consolidated buffer layout ]
// - A consolidated TensorDict's tensor leaves (nested ones included) are contiguous views into one
//   byte buffer. Slot i describes leaf i in depth-first insertion order (the order of
//   td::internal::LeafTree and of keys(include_nested, leaves_only)): dtype, shape, byte offset,
//   byte size. Keys are not part of the layout: they are read from the TensorDict when needed
//   (saving), so renaming a key keeps the TensorDict consolidated.
// - Plan(): leaves are grouped by dtype (groups in order of each dtype's first leaf, leaves of a
//   group in leaf order); every leaf starts at a multiple of kAlign (64) bytes and the bytes
//   between leaves are zero. When every leaf has one dtype, the whole buffer is therefore one
//   array of that dtype, and the TensorDict members run element-wise ops, casts and copies as
//   one kernel over it (NOTE [ One buffer, one kernel ] in td/core/leafwise.cc); the zero gaps
//   are computed too and never read back.
// - Recognition: consolidate() registers the buffer's c10::Storage (whatever allocated it: the
//   CPU or CUDA allocator, pinned memory, a shared-memory segment, a file mapping — so is_shared()
//   and friends keep working) with its layout and the byte offset of the buffer in that storage,
//   in a process-wide registry holding a weak reference to the storage (the entry goes away with
//   the storage, and a weak reference keeps its address from being reused meanwhile). A
//   TensorDict is consolidated exactly when it has at least one tensor leaf and leaf i is, for
//   every i, a contiguous tensor of slot i's dtype and shape in one registered storage at slot
//   i's offset, with as many leaves as slots. Anything else (a new key, a removed key, a leaf
//   replaced by a tensor of another shape or by memory outside the buffer, an index view) makes
//   the test fail: the TensorDict stays correct, and its operations still run one kernel over
//   whatever part of it stays one buffer (td/core/leafwise.cc decides from the leaves alone).
//   In-place writes into leaves (set_, apply_, math_) keep it consolidated. The results of
//   operations are one new buffer each but not registered: consolidate() them again for
//   consolidated_buffer() or a file. A storage holds at most one layout.
// - Files written from a layout (td/consolidate/file.h) list each leaf's [start, stop) byte range,
//   so a reader does not depend on Plan()'s placement; files written by Python tensordict (each
//   leaf padded to 8 bytes, in insertion order) load with their own offsets.
// - td/distributed's PackedLayout (NOTE [ Packed layout ]) packs leaves sorted by key, grouped by
//   dtype, without per-leaf alignment. Plan() over the key-sorted leaf list gives the same
//   grouping with aligned leaves, so the packing can move onto this struct (see
//   docs/consolidate.md, "Distributed").
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace td {
class TensorDict;

namespace internal {

inline constexpr int64_t kAlign = 64;
inline int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// See NOTE [ Consolidated buffer layout ].
struct BufferLayout {
  struct Slot {
    at::ScalarType dtype;
    c10::SmallVector<int64_t, 6> shape;
    int64_t offset = 0;  // bytes from the start of the buffer
    int64_t nbytes = 0;
    int64_t numel() const { return nbytes / static_cast<int64_t>(c10::elementSize(dtype)); }
    bool operator==(const Slot& o) const {
      return dtype == o.dtype && offset == o.offset && nbytes == o.nbytes && shape == o.shape;
    }
  };
  std::vector<Slot> slots;
  int64_t nbytes = 0;  // the whole buffer

  // The placement of Plan() for these leaves (their dtypes and shapes only).
  static BufferLayout Plan(const std::vector<at::Tensor>& leaves);
};

// An uninitialised contiguous CPU tensor of `numel` elements of `dtype` for a buffer. Large
// buffers (4 MiB and more) are 2 MiB aligned and advised as transparent huge pages, so that
// filling a fresh buffer does not take one page fault per 4 KiB (glibc hands such sizes straight
// from mmap every time, where the many smaller tensors of a by-hand loop reuse its heap).
at::Tensor AllocateHost(int64_t numel, at::ScalarType dtype);

// A registered buffer (NOTE [ Consolidated buffer layout ]): its storage and layout.
struct Buffer {
  c10::Storage storage;
  std::shared_ptr<const BufferLayout> plan;
  int64_t base = 0;  // byte offset of the buffer's start in its storage
  const BufferLayout& layout() const { return *plan; }
};

// Registers `owner`'s memory (a contiguous tensor of any dtype, starting where the buffer starts
// and holding at least layout->nbytes bytes) as a buffer of `layout`. nullopt when its storage
// already holds another layout (the caller then has views that are not consolidated).
std::optional<Buffer> Adopt(const at::Tensor& owner, std::shared_ptr<const BufferLayout> layout);
// A contiguous tensor of `dtype` and `shape` at byte `offset` of `storage` (absolute, not
// relative to a buffer; no dispatcher call).
at::Tensor ViewInto(const c10::Storage& storage, at::ScalarType dtype, at::IntArrayRef shape,
                    int64_t offset);
// The whole buffer as a 1-D uint8 tensor.
at::Tensor WholeBuffer(const Buffer& buffer);
// One view per slot of the buffer's layout.
std::vector<at::Tensor> SlotViews(const Buffer& b);

// The buffer of a consolidated set of leaves (depth-first order), or nullopt when they are not
// (NOTE [ Consolidated buffer layout ], "Recognition").
std::optional<Buffer> BufferOf(const std::vector<at::Tensor>& leaves);
// BufferOf(the leaves of `td` in depth-first insertion order), matched straight from the
// levels' entries (no leaf list, no key or tensor copies); nullopt when some level does not hold
// its entries (lazy backends: never consolidated).
std::optional<Buffer> BufferOfTensorDict(const TensorDict& td);

}  // namespace internal
}  // namespace td
