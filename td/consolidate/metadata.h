// The metadata of a consolidated file (NOTE [ Consolidated file format ] in file.h), parsed and
// validated before any tensor is made: load_consolidated() builds its TensorDict from what
// ParseFileMetadata returns, and //tests/fuzz:consolidated_meta_replay_test (metadata_fuzzer.cc)
// feeds it arbitrary bytes. Needs no TensorDict and no tensor, only c10's dtypes and JSON.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"

namespace td {
namespace internal {

// How deep [ and { may nest in the metadata: every structure reader's limit (NOTE [ Structure
// validation ] in td/core/internal/structure_check.h), checked on the text before parsing.
inline constexpr int kMaxMetadataJsonDepth = internal::kMaxStructureJsonDepth;

struct LeafMeta {
  std::string key;
  at::ScalarType dtype = at::kByte;
  std::vector<int64_t> shape;
  int64_t start = 0, stop = 0, pad = 0;
  int64_t nbytes = 0;  // shape's element count * the dtype's size
};

struct NonTensorMeta {
  std::string key;
  nlohmann::ordered_json data;
};

// What a level of the metadata is ("cls"): a TensorDict, a LazyStackedTensorDict (its members
// are `subs`, in stack order) or a NonTensorStack (its values are `data`).
enum class LevelKind { kTensorDict, kLazyStack, kNonTensorStack };

struct LevelMeta {
  std::string key;  // empty for the root
  LevelKind kind = LevelKind::kTensorDict;
  // kLazyStack: the members' batch size with the member count inserted at stack_dim;
  // kNonTensorStack: the same for its values.
  std::vector<int64_t> batch_size;
  // kTensorDict: cls_metadata's names, one per batch dim (nullopt: unnamed), or empty when the
  // file has none or all are null. Valid for td::TensorDict::set_names (NOTE [ Dim names ] in
  // td/core/names.cc), also under the parent's names.
  std::vector<std::optional<std::string>> names;
  bool cpu = false;  // cls_metadata's device is "cpu"
  bool locked = false;
  int64_t stack_dim = 0;                      // kLazyStack
  std::optional<std::string> stack_dim_name;  // kLazyStack: the name of the stacked dim
  // kNonTensorStack: one value per element of batch_size, as nested JSON lists (Python's
  // NonTensorStack.tolist()).
  nlohmann::ordered_json data;
  std::vector<NonTensorMeta> non_tensors;
  std::vector<LeafMeta> leaves;
  std::vector<LevelMeta> subs;  // sub-TensorDicts, lazy stacks and NonTensorStacks, in file order
};

// The most values the NonTensorStacks of one file may expand to (a member NonTensorData covers
// every element of its batch size), and the most bytes of JSON text they may copy: a few bytes
// of metadata cannot ask for gigabytes.
inline constexpr int64_t kMaxNonTensorStackValues = int64_t{1} << 22;
inline constexpr int64_t kMaxNonTensorStackBytes = int64_t{1} << 28;

// Parses and validates the metadata `text` of the consolidated file `file` whose data part has
// `data_bytes` bytes. Throws td::MemmapError naming the file, the level or key and the problem:
// JSON nested deeper than kMaxMetadataJsonDepth or TensorDicts deeper than td::kMaxNestingDepth
// (checked before descending), a key given twice in one JSON object, an empty key, a name used
// by two entries of one level (leaf, non-tensor, sub-TensorDict), wrong types, integers out of
// int64's range, an unknown dtype, a byte range outside the data or too small for the shape, a
// leaf or sub-TensorDict whose shape does not start with its level's batch size, bad dim names
// (not a list of strings or nulls, one per batch dim, unique, also with the parent's names on
// the leading dims), a lazy stack or NonTensorStack whose members are not "0".."n-1" or differ in
// batch size, NonTensorStacks past kMaxNonTensorStackValues / kMaxNonTensorStackBytes, an
// unsupported class or nested tensor. What it returns makes valid tensors and TensorDicts.
LevelMeta ParseFileMetadata(std::string_view text, const std::string& file, int64_t data_bytes);

}  // namespace internal
}  // namespace td
