// The on-disk memmap directory format shared with Python tensordict: file names for keys, and
// reading / writing `meta.json`. Pure functions over strings (no files, no tensors), so the
// metadata reader is fuzzed on its own (format_fuzzer.cc).
//
// NOTE [ Memmap directory format ]
// One directory per TensorDict level (the format of ../shared/DESIGN.md, which Python
// tensordict 0.4-0.14 reads and writes):
//   meta.json            {"<key>": {entry}, ..., "shape": [batch], "device": "cpu",
//                         "_type": "<class 'tensordict._td.TensorDict'>"}
//   <esc(key)>.memmap    a tensor leaf: its C-order little-endian bytes, nothing else;
//                        entry {"device": "cpu", "shape": [...], "dtype": "torch.float32",
//                        "is_nested": false}
//   <esc(key)>/          a sub-TensorDict (entry {"type": "TensorDict"}), same layout inside;
//                        or non-tensor data (entry {"type": "NonTensorData"}) whose meta.json is
//                        {"_type": "<class 'tensordict.tensorclass.NonTensorData'>",
//                         "data": <JSON>, "_metadata": null, "_is_non_tensor": true}, plus
//                        _tensordict/meta.json holding the batch shape.
// Rules this implementation adds, all compatible with Python's reader:
//   * meta.json holds the raw key; only file and directory names are escaped (EscapeKey): the
//     bytes / < > : " | ? * \ space % NUL and control bytes become %XX, "" becomes "%", "." and
//     ".." become "%2E" and "%2E%2E". An escaped name can never leave its directory.
//   * Keys "shape", "device" and "_type" collide with the level's own fields in meta.json and
//     are refused on write (Python would silently lose them).
//   * Reading validates everything: JSON syntax, every field's type, known dtype strings, shapes
//     that start with the batch size, sizes that do not overflow, and (in the loader) that the
//     files present are exactly the ones meta.json names with exactly shape x itemsize bytes.
//     Names starting with kTempPrefix are the writer's own temporaries and are ignored.
//   * Nothing is ever executed: pickled non-tensor data (Python's other.pickle) is refused.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace td {
namespace memmap_format {

inline constexpr std::string_view kMetaFile = "meta.json";
inline constexpr std::string_view kTensorSuffix = ".memmap";
// Temporaries of the writer (files and directories); the loader skips them.
inline constexpr std::string_view kTempPrefix = ".td-tmp-";
// The sub-directory of a non-tensor entry that holds its batch shape.
inline constexpr std::string_view kNonTensorInner = "_tensordict";
inline constexpr std::string_view kTensorDictType = "<class 'tensordict._td.TensorDict'>";
inline constexpr std::string_view kNonTensorType = "<class 'tensordict.tensorclass.NonTensorData'>";
// Limits of the reader: a meta.json larger than this, JSON nested deeper, or a shape with more
// dims is refused with an error rather than read.
inline constexpr size_t kMaxMetaBytes = size_t{64} << 20;
inline constexpr int kMaxJsonDepth = 200;
inline constexpr size_t kMaxDims = 64;

// The file-system name of `key` (without the ".memmap" suffix of tensor files).
//   EscapeKey("a/b") == "a%2Fb";  EscapeKey("..") == "%2E%2E";  EscapeKey("") == "%"
std::string EscapeKey(std::string_view key);
// Inverse of EscapeKey; nullopt for a name EscapeKey cannot produce.
std::optional<std::string> UnescapeKey(std::string_view name);
// True for "shape", "device" and "_type", which cannot be keys in meta.json.
bool IsReservedKey(std::string_view key);

enum class EntryKind { kTensor, kTensorDict, kNonTensor };

// One key of a level, as meta.json describes it.
struct EntryMeta {
  std::string key;
  EntryKind kind = EntryKind::kTensor;
  // Tensors only.
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  int64_t nbytes = 0;  // numel x element size, overflow-checked
  // "<esc(key)>.memmap" for tensors, "<esc(key)>" for the other kinds.
  std::string file_name;
};

// One level's meta.json.
struct LevelMeta {
  std::vector<int64_t> batch_size;
  std::vector<EntryMeta> entries;  // in the file's order
};

// File name of an entry of the given kind.
std::string EntryFileName(std::string_view key, EntryKind kind);
// numel x element size of a tensor of `shape` and `dtype`; an error (naming `what`) on negative
// dims, more than kMaxDims dims, or overflow of int64.
absl::StatusOr<int64_t> TensorBytes(const std::vector<int64_t>& shape, c10::ScalarType dtype,
                                    std::string_view what);

// Parses and validates a level's meta.json. `path` only appears in error messages. Errors are
// InvalidArgument / DataLoss statuses naming the file, the key and the problem.
//   auto meta = ParseLevelMeta(R"({"a": {"shape": [3], "dtype": "torch.int64"}, "shape": [3]})",
//                              "/data/meta.json");
absl::StatusOr<LevelMeta> ParseLevelMeta(std::string_view text, std::string_view path);
// Parses a non-tensor entry's meta.json and returns its "data". Refuses pickled data.
absl::StatusOr<nlohmann::json> ParseNonTensorMeta(std::string_view text, std::string_view path);

// meta.json text for a level (entries in order, then shape, device "cpu" and _type).
std::string LevelMetaJson(const LevelMeta& meta);
// meta.json text of a non-tensor entry holding `data`.
std::string NonTensorMetaJson(const nlohmann::json& data);

// OK when `data` can be written and read back unchanged: finite numbers, valid UTF-8, nesting
// within kMaxJsonDepth. The error names `what`.
absl::Status CheckWritableJson(const nlohmann::json& data, std::string_view what);
// OK when `key` is valid UTF-8 (meta.json is JSON text) and not reserved.
absl::Status CheckWritableKey(std::string_view key, std::string_view what);

}  // namespace memmap_format
}  // namespace td
