// init_remote messages as bytes (NOTE [ Packed layout ] in packing.h), the "wire" format driver
// (NOTE [ Format drivers ] in td/format/format.h) and the one reader of received structures.
#pragma once

#include <cstdint>
#include <string>

#include "td/core/tensordict.h"

namespace td {
namespace distributed {
namespace internal {

// The TensorDict, leaves uninitialised, that a structure from another process describes (`desc`:
// StructureToJson's text, from init_remote or scatter). Checked before anything is allocated:
// its JSON depth, then ValidateStructure (wire.h) with `max_leaf_bytes`. Throws ValueError
// "<what>: ..." naming `sender` ("rank 1") and what is wrong.
TensorDict ReadStructure(const std::string& desc, int64_t max_leaf_bytes, const std::string& what,
                         const std::string& sender);
// ReadStructure of an init_remote message's structure, whose leaves must take exactly the
// `data_bytes` that came with it, in a packed layout of the header's `fingerprint`.
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
