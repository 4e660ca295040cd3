// The packed layout of a TensorDict's tensor leaves: every leaf in one contiguous byte buffer,
// grouped by dtype, plus the compact structure signature that is checked before any data is
// used. The one place that defines how td::distributed maps leaves to bytes.
//
// NOTE [ Packed layout ]
// - Leaves: every tensor leaf, nested ones included, sorted by full key (so two TensorDicts with
//   the same entries inserted in a different order pack alike). Non-tensor data is not packed.
// - Large leaves: a leaf of at least kAloneMinBytes bytes is large; the others are small.
// - Groups: the small leaves of one dtype form a group, in order of the dtype's first small leaf;
//   then the large leaves of one dtype form a group, in order of the dtype's first large leaf
//   (a dtype may thus have two groups). Inside a group leaves follow each other, flattened,
//   without padding. Each group starts at a multiple of kAlign bytes from the start of the data,
//   so `buffer.narrow(...).view(dtype)` is legal. The small groups come first: the data is
//   [small groups | large groups], and inline_nbytes() is where the large groups start.
// - Signature: one line per leaf, "<key parts joined by \x1f>\t<dtype>\t<d0,d1,...>\n"; equal
//   signatures <=> equal layouts. The fingerprint is its 64-bit FNV-1a hash.
// - A point-to-point message (send/recv, init_remote) is a header of kHeaderWords int64 (magic,
//   kind, fingerprint, description bytes, bytes that follow the description, flags) sent alone
//   on tag 2 * tag, then on tag 2 * tag + 1 one byte buffer, the payload:
//     [description | padding to kAlign | table | inline data]
//   and then one message per leaf that travels alone, its bytes contiguous, in data order, on
//   the payload's tag. The description is the signature for send, the full structure (JSON, see
//   StructureToJson) for init_remote.
// - Which leaves travel alone (OwnMessages): WireFormat::kPacked (the default), the large ones,
//   sent straight from their memory; kPerLeaf (header word 5 bit 1), every non-empty leaf;
//   init_remote, none. The inline data is the data's first inline_nbytes() bytes (kPacked), all
//   of it (init_remote), nothing (kPerLeaf).
// - The table (send only, init_remote has none) is int64 words, padded to kAlign: the number n
//   of leaves that travel alone, then the byte count of each, so that a receiver that refuses
//   them can still drain them.
// - A receiver reads the header and the structure as untrusted input (wire.h: ParseHeader,
//   ValidateStructure) and allocates no more than its limit for what a header announces (NOTE
//   [ Bounded receives ] in p2p.cc). A kPacked receiver takes every byte, inline data and lone
//   leaves, into a staging buffer laid out as the data (NOTE [ Scratch buffers ]) and writes its
//   leaves only once all of it has arrived; a kPerLeaf receiver takes each lone leaf straight
//   into its leaf.
// - After init_remote agreed on a structure (NOTE [ Agreed structures ] in p2p.cc), a send of that
//   structure sets bit 2 of header word 5 and neither description nor table travels: kPacked is
//   ONE message [header | padding to kAlign | inline data] (header word 4: the inline bytes),
//   then its large leaves if any (none for a TensorDict of small leaves: one message in all);
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
// Leaves of at least this many bytes are large (NOTE [ Packed layout ]): a kPacked send sends
// them from their own memory, each as a message of its own, instead of copying them into the
// payload. Below it, the copy costs less than a message.
constexpr int64_t kAloneMinBytes = int64_t{1} << 20;

constexpr int64_t AlignUp(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// True when writing into the tensors `td` hands out writes `td` itself, so that received bytes
// may land straight in its leaves: every level (the root and each nested TensorDict) holds its
// entries (no Capability::kLazy, whose get() may compute a fresh tensor: NOTE [ Storage
// interface ]) and writes them in place (Capability::kInPlaceWrite). Otherwise writes go
// through update_(), which hands them to each storage.
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
  // A uint8 buffer of `prefix + nbytes()` bytes (prefix a multiple of kAlign) holding the leaves
  // from byte `prefix` on; the first `prefix` bytes are left for the caller. One cat per group.
  // `inline_only`: the small groups alone, `prefix + inline_nbytes()` bytes.
  at::Tensor Pack(int64_t prefix = 0, bool inline_only = false) const;
  // An uninitialised buffer of the same size, on the leaves' device.
  at::Tensor Allocate(int64_t prefix = 0) const;
  // Writes the packed data (uint8, nbytes() bytes) into the leaves of `td` (the TensorDict this
  // layout was made from): in place when LeavesWriteThrough(td), through update_ otherwise.
  // Writes happen under no-grad, as load_state_dict's do: a leaf that requires grad (a module's
  // parameter from td::nn::from_module) is written in place, with no autograd history. Call
  // CheckWritable first: a leaf that cannot be written would otherwise fail half way.
  void Unpack(const at::Tensor& data, TensorDict& td) const;
  // The same with the data in two pieces: its first inline_nbytes() bytes in `inline_data`, the
  // rest (the large groups) in `large_data`.
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
// Every packed message needs a byte buffer on each side. A fresh allocation of a large buffer
// comes straight from mmap and takes one page fault per 4 KiB page as it is filled, which on a
// virtual machine costs more than the copy itself (40 MiB: ~0.2 s of faults, against ~10 ms to
// copy). The buffers of sends, receives and collectives therefore come from a small per-process
// pool: a CPU buffer is reused by the next message when nothing holds it any more (the pool's
// reference is the only one left), and new ones are 2 MiB aligned and advised as transparent huge
// pages. The pool keeps at most kScratchSlots buffers of at most kScratchMaxBytes each (larger
// buffers are allocated per message and freed after it), so it holds at most the size of the
// largest recent messages. No buffer escapes a call: receivers copy out of it. Other devices
// allocate per message (their caching allocators already reuse memory).
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
