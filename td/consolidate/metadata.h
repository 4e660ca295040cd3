// The metadata of a consolidated file (NOTE [ Consolidated file format ] in file.h), parsed and
// validated before any tensor is made; metadata_fuzzer.cc feeds it arbitrary bytes. Needs no
// TensorDict and no tensor, only c10's dtypes and JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {

// Caps on one file's NonTensorStacks: values expanded to (a member covers every element of its
// batch size) and bytes of JSON copied, so a few bytes of metadata cannot ask for gigabytes.
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
// problem: those load_consolidated() lists, JSON deeper than kMaxStructureJsonDepth, a nested
// tensor, NonTensorStacks past kMaxNonTensorStackValues / kMaxNonTensorStackBytes.
// What it returns makes valid tensors and TensorDicts:
//  * levels: kTensorDict (info: device as the file names it, names valid for set_names under the
//    parent's, NOTE [ Dim names ] in td/core/names.cc), kLazyStack (info: stack_dim,
//    stack_dim_name; members "0", "1", ... in stack order) and kNonTensorStack (info.data: one
//    value per element of its batch size, nested as Python's tolist()); info.locked;
//  * a TensorDict level's entries: its non-tensors, its leaves (Location: start, stop, pad of
//    the byte range in the data), its sub-levels.
structure::Description ParseFileMetadata(std::string_view text, const std::string& file,
                                         int64_t data_bytes);

}  // namespace internal
}  // namespace td
