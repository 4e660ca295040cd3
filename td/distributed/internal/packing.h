// The packed layout of a TensorDict's tensor leaves: every leaf in one contiguous byte buffer,
// grouped by dtype, plus the compact structure signature that is checked before any data is
// used. The one place that defines how td::distributed maps leaves to bytes.
//
// NOTE [ Packed layout ]
// - Leaves: every tensor leaf, nested ones included, sorted by full key (insertion order does not
//   change the layout). Non-tensor data is not packed.
// - Groups: a leaf of at least kAloneMinBytes bytes is large. The small leaves of one dtype form a
//   group, in order of the dtype's first small leaf; then the large ones likewise (a dtype may
//   have two groups). In a group, leaves follow each other flattened, unpadded; each group starts
//   at a multiple of kAlign bytes, so `buffer.narrow(...).view(dtype)` is legal. The data is
//   [small groups | large groups]; inline_nbytes() is where the large groups start.
// - Signature: one line per leaf, "<key parts joined by \x1f>\t<dtype>\t<d0,d1,...>\n"; equal
//   signatures <=> equal layouts. The fingerprint is its 64-bit FNV-1a hash.
// - A point-to-point message (send/recv, init_remote): a header of kHeaderWords int64 (magic,
//   kind, fingerprint, description bytes, bytes after the description, flags) alone on tag
//   2 * tag; on tag 2 * tag + 1 the payload [description | padding to kAlign | table | inline
//   data]; then one message per lone leaf, its bytes contiguous, in data order, on the payload's
//   tag. The description is the signature (send) or StructureToJson's JSON (init_remote).
// - Lone leaves (OwnMessages): kPacked (the default), the large ones, sent from their memory;
//   kPerLeaf (header word 5 bit 1), every non-empty leaf; init_remote, none. The inline data is
//   the data's first inline_nbytes() bytes (kPacked), all of it (init_remote), none (kPerLeaf).
// - The table (send only) is int64 words, padded to kAlign: the number n of lone leaves, then the
//   byte count of each, so that a receiver that refuses them can still drain them.
// - A receiver parses header and structure as untrusted input (wire.h) and allocates at most its
//   limit (NOTE [ Bounded receives ] in p2p.cc). kPacked stages every byte in a buffer laid out as
//   the data (NOTE [ Scratch buffers ]) and writes the leaves once all of it arrived; kPerLeaf
//   takes each lone leaf straight into its leaf.
// - After init_remote agreed on a structure (NOTE [ Agreed structures ] in p2p.cc), a send of it
//   sets bit 2 of header word 5 and sends neither description nor table: kPacked is ONE message
//   [header | padding to kAlign | inline data] (word 4: the inline bytes), then its large leaves;
//   kPerLeaf is the header alone, then the leaves.

#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "td/core/tensordict.h"
#include "td/distributed/internal/wire.h"  // kHeaderWords, kMagic, the header's flags

namespace td {
namespace distributed {
namespace internal {

constexpr int64_t kAlign = 64;
// Leaves of at least this many bytes are large (NOTE [ Packed layout ]) and travel alone in a
// kPacked send, from their own memory; below it, copying into the payload costs less.
constexpr int64_t kAloneMinBytes = int64_t{1} << 20;

constexpr int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// True when writing the tensors `td` hands out writes `td` itself: every level holds its entries
// (no Capability::kLazy, whose get() may compute a fresh tensor: NOTE [ Storage interface ]) and
// writes them in place (Capability::kInPlaceWrite). Otherwise writes go through update_().
bool LeavesWriteThrough(const TensorDict& td);

class PackedLayout {
 public:
  struct Leaf {
    NestedKey key;
    at::Tensor tensor;
    int64_t offset = 0;  // bytes from the start of the data
  };
  struct Group {
    at::ScalarType dtype;
    bool large;
    int64_t offset;  // bytes from the start of the data
    int64_t numel;
    std::vector<size_t> leaves;
  };

  explicit PackedLayout(const TensorDict& td);

  const std::vector<Leaf>& leaves() const { return leaves_; }
  const std::vector<Group>& groups() const { return groups_; }
  // Bytes of data (a multiple of kAlign, 0 without leaves).
  int64_t nbytes() const { return nbytes_; }
  // Bytes of the small groups (a multiple of kAlign): the large groups start there.
  int64_t inline_nbytes() const { return inline_nbytes_; }
  // The leaves that travel as messages of their own, in data order (NOTE [ Packed layout ]):
  // every non-empty leaf when `every_leaf` (kPerLeaf), else the large ones (kPacked).
  std::vector<size_t> OwnMessages(bool every_leaf) const;
  const std::string& signature() const { return signature_; }
  uint64_t fingerprint() const { return fingerprint_; }

  // The units of a reduction (one c10d call each, see collectives.cc): every small group whole,
  // every large leaf alone, in data order.
  struct Piece {
    size_t group;
    size_t first;  // the piece's leaves: group.leaves[first, first + count)
    size_t count;
    int64_t offset;  // bytes from the start of the data
    int64_t nbytes;
  };
  std::vector<Piece> Pieces() const;
  // Copies the leaves of `piece` into `data` (a uint8 buffer whose data starts at byte 0).
  void PackPiece(const at::Tensor& data, const Piece& piece) const;
  // The typed 1-D view of `piece` inside `data`.
  at::Tensor PieceView(const at::Tensor& data, const Piece& piece) const;
  // A uint8 buffer of `prefix + nbytes()` bytes (prefix a multiple of kAlign), the leaves from
  // byte `prefix` on, the prefix left to the caller; `inline_only`: the small groups alone.
  at::Tensor Pack(int64_t prefix = 0, bool inline_only = false) const;
  // An uninitialised buffer of the same size, on the leaves' device.
  at::Tensor Allocate(int64_t prefix = 0) const;
  // Writes the packed data (uint8, nbytes() bytes) into the leaves of `td` (the TensorDict this
  // layout was made from): in place when LeavesWriteThrough(td), else through update_; under
  // no-grad, as load_state_dict (a parameter that requires grad gets no autograd history). Call
  // CheckWritable first: a leaf that cannot be written would otherwise fail half way.
  void Unpack(const at::Tensor& data, TensorDict& td) const;
  // The same with the data split at inline_nbytes() into `inline_data` and `large_data`.
  void Unpack(const at::Tensor& inline_data, const at::Tensor& large_data, TensorDict& td) const;
  // Throws ValueError "<what>: key '<k>' of the receiving TensorDict ..." unless Unpack can write
  // every non-empty leaf: not a view whose elements share memory (expand, broadcast_to), not an
  // inference tensor outside c10::InferenceMode.
  void CheckWritable(const std::string& what) const;

 private:
  std::vector<Leaf> leaves_;
  std::vector<Group> groups_;
  int64_t nbytes_ = 0;
  int64_t inline_nbytes_ = 0;
  std::string signature_;
  uint64_t fingerprint_ = 0;
};

// NOTE [ Scratch buffers ]
// Every packed message needs a byte buffer on each side. A fresh large buffer comes from mmap and
// takes a page fault per 4 KiB as it is filled, which on a virtual machine costs more than the
// copy (40 MiB: ~0.2 s of faults, ~10 ms to copy). So sends, receives and collectives take CPU
// buffers from a small per-process pool: one is reused once the pool's reference is the only one
// left; new ones are 2 MiB aligned and advised as transparent huge pages. It keeps at most
// kScratchSlots buffers of at most kScratchMaxBytes (larger ones live for one message). No buffer
// escapes a call: receivers copy out of it. Other devices allocate per message (their caching
// allocators already reuse memory).
constexpr int kScratchSlots = 4;
constexpr int64_t kScratchMaxBytes = int64_t{1} << 30;
// A uint8 tensor of `nbytes` bytes, uninitialised, on `device` (see NOTE [ Scratch buffers ]).
at::Tensor ScratchBytes(int64_t nbytes, at::Device device);
// Bytes currently held by the pool (tests).
int64_t ScratchPoolBytes();

// The first difference between two signatures, in words: "key ('a', 'b'): shape [3] vs [4]",
// "key ('x',) is missing on the <b_name> side", "dtype Float vs Int" ...
std::string DescribeMismatch(const std::string& a, const std::string& a_name,
                             const std::string& b, const std::string& b_name);

// The full structure of `td`: keys, nesting, batch sizes, device, leaf shapes and dtypes,
// non-tensor data.
nlohmann::json StructureToJson(const TensorDict& td);
// A TensorDict of the structure `level` describes (ValidateStructure in wire.h, which bounds what
// this allocates), with uninitialised leaves on each level's device.
TensorDict EmptyFrom(const structure::Level& level);
// EmptyFrom of a structure StructureToJson wrote; ValueError ("malformed") for another.
TensorDict EmptyFromJson(const nlohmann::json& structure);

}  // namespace internal
}  // namespace distributed
}  // namespace td
