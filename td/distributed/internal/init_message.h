// An init_remote message (NOTE [ Packed layout ] in packing.h) as one string of bytes: the "wire"
// format driver (NOTE [ Format drivers ] in td/format/format.h), and the one reader of the
// structure such a message carries, which from_remote_init (p2p.cc) uses too.
#pragma once

#include <cstdint>
#include <string>

#include "td/core/tensordict.h"

namespace td {
namespace distributed {
namespace internal {

// The TensorDict that the structure `desc` of an init_remote message describes, with
// uninitialised leaves. Checked before anything is allocated for it: its JSON depth, then
// ValidateStructure (wire.h) with `data_bytes`, the bytes of data that came with it, and
// finally that its packed layout has that many bytes and the header's `fingerprint`. Throws
// ValueError "<what>: ..." naming `sender` ("rank 1") and what is wrong.
TensorDict InitStructure(const std::string& desc, int64_t data_bytes, uint64_t fingerprint,
                         const std::string& what, const std::string& sender);

// The bytes init_remote(pg, td, dst) sends: its header's kHeaderWords words, then its payload,
// [structure JSON | padding to kAlign | data].
std::string EncodeInitMessage(const TensorDict& td);
// The TensorDict such bytes describe, leaves filled; ValueError naming what is wrong for bytes
// that are not one whole init_remote message.
TensorDict DecodeInitMessage(const std::string& bytes);

}  // namespace internal
}  // namespace distributed
}  // namespace td
