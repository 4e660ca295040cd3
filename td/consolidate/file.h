// The consolidated file: a consolidated TensorDict on disk as ONE file that loading maps once.
// The format is Python tensordict's `consolidate(filename)` / `TensorDict.from_consolidated`
// (unchanged from release 0.6 to 0.14), so each side reads the other's files.
//
// NOTE [ Consolidated file format ]
// - The file is [data | metadata | n]: n is the metadata's length in bytes as a little-endian
//   int64 (the last 8 bytes), the metadata UTF-8 JSON giving the leaves' byte ranges in data.
// - Metadata, one object per TensorDict level:
//     {"cls": "TensorDict",
//      "non_tensors": {"<key>": [<JSON value>, <batch size>, <device or null>], ...},
//      "leaves": {"<key>": ["torch.float32", [<shape>], start, stop, pad], ...},
//      "cls_metadata": {"device": "cpu" | null, "names": ["env" | null, ...],
//                       "batch_size": [...], "is_locked": false},
//      "<sub-TensorDict key>": {<the same, for that level>}, ...}
//   "names": one string or null per batch dim (a nested level's leading ones are its parent's).
//   A leaf is data[start:stop] viewed as its dtype, cut to its element count when pad != 0,
//   viewed as its shape. Python pads every leaf to 8 bytes, in insertion order; we write our
//   placement (NOTE [ Consolidated buffer layout ]) with stop = start + bytes and pad = 0.
// - Python before 0.8 wrote non-tensors as [data, batch size]; both forms are read, three
//   elements written (0.6 and 0.7 cannot read our non-tensor data; tensors are fine).
// - Python also writes, and we read, two other level classes:
//     {"cls": "LazyStackedTensorDict", "non_tensors": {}, "leaves": {},
//      "cls_metadata": {"stack_dim": 1, "stack_dim_name": "env" | null, "is_locked": false},
//      "0": {<member 0's level>}, "1": {...}, ...}
//   loads as td::lazy_stack(members, stack_dim) (members may be ragged), its stack dim named;
//     {"cls": "NonTensorStack", "non_tensors": {"0": [<data>, <batch size>, <device>], ...},
//      "leaves": {}, "cls_metadata": {"stack_dim": 0, ...}, "1": {<a NonTensorStack>}, ...}
//   loads as a td::NonTensorData::stack over the holding level's batch size
//   (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h), written in that form
//   (stack_dim 0). A lazy stack is written as a TensorDict of its stacked leaves (not ragged);
//   MetaData as NonTensorData, as upstream. Nested jagged tensors, tensorclasses: MemmapError.
// - Level keys "cls", "non_tensors", "leaves", "cls_metadata" and "size" are the format's own: a
//   sub-level with one of these names cannot be written (ValueError), nor a leaf whose name starts
//   with "<NJT" (Python would read it as a nested tensor part).
#pragma once

#include <string>

#include "td/core/tensordict.h"

namespace td {

// Writes `td` as a consolidated file at `filename` (NOTE [ Consolidated file format ]): a
// consolidated TensorDict's buffer in one copy, any other as consolidate(td, filename) would.
// Written under a temporary name and renamed into place, so `filename` is either the old file or
// the complete new one; not fsynced. Throws ValueError for keys the format cannot hold,
// TypeError for float8 leaves, MemmapError when a file operation fails.
//   td::save_consolidated(params, "/ckpt/params.td");
void save_consolidated(const TensorDict& td, const std::string& filename);

// Opens a consolidated file written by save_consolidated(), consolidate(filename) or Python
// tensordict (0.6-0.14): mapped once (private copy-on-write), every leaf a view into it, so the
// result is consolidated. Everything is validated first: MemmapError names the file and the
// problem (too short, bad metadata length, malformed JSON, nesting deeper than
// td::kMaxNestingDepth, repeated or empty keys, wrong types, integers outside int64, unknown
// dtype, a byte range outside the data or too small for the shape, a leaf that does not fit its
// batch size, bad dim names, bad stack members, an unsupported class). Leaves are on the CPU; dim
// names and locks are restored. A lazy stack loads as td::lazy_stack (then not consolidated).
//   td::TensorDict params = td::load_consolidated("/ckpt/params.td");
TensorDict load_consolidated(const std::string& filename);

}  // namespace td
