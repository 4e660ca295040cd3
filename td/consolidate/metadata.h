// The metadata of a consolidated file (NOTE [ Consolidated file format ] in file.h), parsed and
// validated before any tensor is made: load_consolidated() builds its TensorDict from what
// ParseFileMetadata returns, and //tests/fuzz:consolidated_meta_replay_test (metadata_fuzzer.cc)
// feeds it arbitrary bytes. Needs no TensorDict and no tensor, only c10's dtypes and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {

// The most values the NonTensorStacks of one file may expand to (a member NonTensorData covers
// every element of its batch size), and the most bytes of JSON text they may copy: a few bytes
// of metadata cannot ask for gigabytes.
inline constexpr int64_t kMaxNonTensorStackValues = int64_t{1} << 22;
inline constexpr int64_t kMaxNonTensorStackBytes = int64_t{1} << 28;

// The level keys the format uses for its own fields (NOTE [ Consolidated file format ]).
inline bool IsReservedLevelKey(std::string_view k) {
  return k == "cls" || k == "non_tensors" || k == "leaves" || k == "cls_metadata" || k == "size";
}

// Throws td::MemmapError "consolidated file <file>: <what>".
[[noreturn]] void BadConsolidatedFile(const std::string& file, const std::string& what);

// Parses and validates the metadata `text` of the consolidated file `file` whose data part has
// `data_bytes` bytes, through a structure::Builder (NOTE [ Structure codec ] in
// td/structure/structure.h). Throws td::MemmapError naming the file, the level or key and the
// problem: the metadata problems load_consolidated() lists (td/consolidate/file.h), JSON nested
// deeper than kMaxStructureJsonDepth, a nested tensor, NonTensorStacks past
// kMaxNonTensorStackValues / kMaxNonTensorStackBytes.
// What it returns makes valid tensors and TensorDicts:
//  * levels (LevelKind): kTensorDict (info: device as the file names it, names, one string or
//    null per batch dim or none; valid for td::TensorDict::set_names, also under the parent's
//    names, NOTE [ Dim names ] in td/core/names.cc), kLazyStack (info: stack_dim,
//    stack_dim_name; its sub-levels are its members "0", "1", ... in stack order; its batch size
//    theirs with the member count inserted at stack_dim) and kNonTensorStack (info.data: one
//    value per element of its batch size, as nested JSON lists, Python's
//    NonTensorStack.tolist()); info.locked from is_locked;
//  * a TensorDict level's entries in the file's order: its non-tensors (data), its leaves
//    (Location: start, stop, pad of the byte range in the data), its sub-levels.
structure::Description ParseFileMetadata(std::string_view text, const std::string& file,
                                         int64_t data_bytes);

}  // namespace internal
}  // namespace td
