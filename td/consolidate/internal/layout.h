// Where the leaves of a consolidated TensorDict live inside its one buffer, and how a TensorDict
// is recognised as consolidated. Shared by consolidate() and td/consolidate/file.h.
//
// NOTE [ Consolidated buffer layout ]
// - A consolidated TensorDict's tensor leaves (nested ones included) are contiguous views into one
//   byte buffer. Slot i describes leaf i in depth-first insertion order (td::internal::LeafTree's
//   order): dtype, shape, byte offset, byte size. Keys are not part of the layout, so renaming a
//   key keeps the TensorDict consolidated.
// - Plan(): leaves are grouped by dtype (in order of each dtype's first leaf); every leaf starts
//   at a multiple of kAlign (64) bytes and the gaps are zero. With one dtype the whole buffer is
//   one array of it, and element-wise ops, casts and copies run as one kernel over it (NOTE
//   [ One buffer, one kernel ] in td/core/leafwise.cc).
// - Recognition: consolidate() registers the buffer's c10::Storage (whatever allocated it, so
//   is_shared() and friends keep working) with its layout and byte offset, in a process-wide
//   registry holding a weak reference (the entry dies with the storage, whose address is not
//   reused meanwhile). A TensorDict is consolidated exactly when it has at least one tensor leaf
//   and, as many leaves as slots, leaf i is a contiguous tensor of slot i's dtype and shape in one
//   registered storage at slot i's offset. Any other change (a new or removed key, a replaced
//   leaf, an index view) ends it; in-place writes (set_, apply_, math_) keep it. Results of
//   operations are one new buffer each but not registered. A storage holds at most one layout.
// - Files (td/consolidate/file.h) list each leaf's [start, stop) byte range, so a reader does not
//   depend on Plan()'s placement; Python's files (leaves padded to 8 bytes) load at their offsets.
// - td/distributed's PackedLayout (NOTE [ Packed layout ]) packs leaves sorted by key, grouped by
//   dtype, unaligned; Plan() over the key-sorted leaves gives the same grouping, aligned (see
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

// An uninitialised contiguous CPU tensor of `numel` elements of `dtype` for a buffer. Buffers of
// 4 MiB and more are 2 MiB aligned and advised as transparent huge pages: filling a fresh one
// then does not fault per 4 KiB (glibc mmaps such sizes afresh every time).
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
// BufferOf(the leaves of `td`), matched straight from the levels' entries (no copies); nullopt
// when some level does not hold its entries (lazy backends: never consolidated).
std::optional<Buffer> BufferOfTensorDict(const TensorDict& td);

}  // namespace internal
}  // namespace td
