// The metadata of a consolidated file (NOTE [ Consolidated file format ] in file.h), parsed and
// validated before any tensor is made: load_consolidated() builds its TensorDict from what
// ParseFileMetadata returns, and //tests/fuzz:consolidated_meta_replay_test (metadata_fuzzer.cc)
// feeds it arbitrary bytes. Needs no TensorDict and no tensor, only c10's dtypes and JSON.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
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

struct LevelMeta {
  std::string key;  // empty for the root
  std::vector<int64_t> batch_size;
  bool cpu = false;  // cls_metadata's device is "cpu"
  bool locked = false;
  std::vector<NonTensorMeta> non_tensors;
  std::vector<LeafMeta> leaves;
  std::vector<LevelMeta> subs;
};

// Parses and validates the metadata `text` of the consolidated file `file` whose data part has
// `data_bytes` bytes. Throws td::MemmapError naming the file, the level or key and the problem:
// JSON nested deeper than kMaxMetadataJsonDepth or TensorDicts deeper than td::kMaxNestingDepth
// (checked before descending), a key given twice in one JSON object, an empty key, a name used
// by two entries of one level (leaf, non-tensor, sub-TensorDict), wrong types, integers out of
// int64's range, an unknown dtype, a byte range outside the data or too small for the shape, a
// leaf or sub-TensorDict whose shape does not start with its level's batch size, an unsupported
// class or nested tensor. What it returns makes valid tensors and TensorDicts.
LevelMeta ParseFileMetadata(std::string_view text, const std::string& file, int64_t data_bytes);

}  // namespace internal
}  // namespace td
