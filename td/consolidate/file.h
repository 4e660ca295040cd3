// The consolidated file: a consolidated TensorDict on disk as ONE file that loading maps once.
// The format is Python tensordict's `consolidate(filename)` / `TensorDict.from_consolidated`
// (unchanged from release 0.6 to 0.14), so each side reads the other's files.
//
// NOTE [ Consolidated file format ]
// - The file is [data | metadata | n], where n is the metadata's length in bytes as a
//   little-endian int64 (the last 8 bytes) and the metadata is UTF-8 JSON. The data is the
//   buffer: leaves at the byte ranges the metadata gives.
// - Metadata, one object per TensorDict level:
//     {"cls": "TensorDict",
//      "non_tensors": {"<key>": [<JSON value>, <batch size>, <device or null>], ...},
//      "leaves": {"<key>": ["torch.float32", [<shape>], start, stop, pad], ...},
//      "cls_metadata": {"device": "cpu" | null, "names": ["env" | null, ...],
//                       "batch_size": [...], "is_locked": false},
//      "<sub-TensorDict key>": {<the same, for that level>}, ...}
//   "names" holds the level's dim names, one string or null per batch dim (a nested level's
//   leading ones are its parent's); both sides write and read them.
//   A leaf is data[start:stop] viewed as its dtype, cut to its element count when pad != 0,
//   viewed as its shape. Python pads every leaf to a multiple of 8 bytes and stores them in
//   insertion order; we write our own placement (NOTE [ Consolidated buffer layout ]) with
//   stop = start + the leaf's bytes and pad = 0, which Python reads the same way.
// - Python tensordict before 0.8 wrote non-tensor entries as [data, batch size]; both forms are
//   read, the three-element one is written (releases 0.6 and 0.7 cannot read non-tensor data from
//   our files; tensors are fine).
// - Python also writes, and we read, two other level classes:
//     {"cls": "LazyStackedTensorDict", "non_tensors": {}, "leaves": {},
//      "cls_metadata": {"stack_dim": 1, "stack_dim_name": "env" | null, "is_locked": false},
//      "0": {<member 0's level>}, "1": {...}, ...}
//   loads as td::lazy_stack(members, stack_dim) (members may be ragged), its stack dim named;
//     {"cls": "NonTensorStack", "non_tensors": {"0": [<data>, <batch size>, <device>], ...},
//      "leaves": {}, "cls_metadata": {"stack_dim": 0, ...}, "1": {<a NonTensorStack>}, ...}
//   loads as a td::NonTensorData::stack over the batch size of the level holding it (its values
//   nested as Python's tolist(); dims past the level's stay lists inside each value; NOTE
//   [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h), and a NonTensorStack entry is
//   written in that form (stack_dim 0, NonTensorData members for the last dim). A lazy stack is
//   written as a TensorDict of its stacked leaves (a ragged one cannot be written). MetaData is
//   written and read as NonTensorData, as upstream's consolidate does. Nested jagged tensors
//   (keys "<NJT...>") and tensorclasses are refused with a MemmapError naming them.
// - Level keys "cls", "non_tensors", "leaves", "cls_metadata" and "size" are the format's own: a
//   sub-TensorDict with one of these names cannot be written (ValueError), nor can a leaf whose
//   name starts with "<NJT" (Python would read it as a nested tensor part).
#pragma once

#include <string>

#include "td/core/tensordict.h"

namespace td {

// Writes `td` as a consolidated file at `filename` (NOTE [ Consolidated file format ]): a
// consolidated TensorDict's buffer is written with one copy; any other TensorDict is consolidated
// into the file (as consolidate(td, ConsolidateOptions().filename(filename))). The file is
// written under a temporary name and renamed into place, so `filename` is either the old file or
// the complete new one. Not fsynced. Throws ValueError for keys the format cannot hold,
// MemmapError when a file operation fails.
//   td::save_consolidated(params, "/ckpt/params.td");
void save_consolidated(const TensorDict& td, const std::string& filename);

// Opens a consolidated file written by save_consolidated(), consolidate(filename) or Python
// tensordict (0.6-0.14): the file is mapped once (private, copy-on-write mapping: writes to the
// leaves stay in memory) and every leaf is a view into the mapping, so the result is consolidated.
// Everything is validated first (td/consolidate/metadata.h): MemmapError names the file and the
// problem (too short, bad metadata length, malformed JSON, nesting deeper than
// td::kMaxNestingDepth, a key repeated in one object or empty, a name shared by two entries of a
// level, wrong types, integers outside int64, unknown dtype, a byte range outside the data or too
// small for the shape, a leaf that does not fit its level's batch size, bad dim names, a lazy
// stack or NonTensorStack with bad members, an unsupported class). Leaves are on the CPU; dim
// names are restored; a level locked when written is locked. A lazy stack in the file loads as
// td::lazy_stack, and then the result is not consolidated (its leaves are stacked when read).
//   td::TensorDict params = td::load_consolidated("/ckpt/params.td");
TensorDict load_consolidated(const std::string& filename);

}  // namespace td
