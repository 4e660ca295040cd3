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
// What older and newer Python writers put on disk and what the reader accepts (ParseDirMeta,
// ResolveEntryFiles) is the table "Compatibility with Python tensordict releases" in
// docs/memmap.md: raw pre-0.13 file names, zero-element tensors without a file, lazy stacks,
// NonTensorData / MetaData / NonTensorStack, tensorclasses, nested tensors, unknown fields.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {
namespace memmap {

inline constexpr std::string_view kMetaFile = "meta.json";
inline constexpr std::string_view kTensorSuffix = ".memmap";
// Temporaries of the writer (files and directories); the loader skips them.
inline constexpr std::string_view kTempPrefix = ".td-tmp-";
inline bool IsTempName(std::string_view name) {
  return name.substr(0, kTempPrefix.size()) == kTempPrefix;
}
// The sub-directory of a non-tensor entry that holds its batch shape.
inline constexpr std::string_view kNonTensorInner = "_tensordict";
inline constexpr std::string_view kTensorDictType = "<class 'tensordict._td.TensorDict'>";
inline constexpr std::string_view kNonTensorType = "<class 'tensordict.tensorclass.NonTensorData'>";
inline constexpr std::string_view kMetaDataType = "<class 'tensordict.tensorclass.MetaData'>";
inline constexpr std::string_view kNonTensorStackType =
    "<class 'tensordict.tensorclass.NonTensorStack'>";
inline constexpr std::string_view kLazyStackType =
    "<class 'tensordict._lazy.LazyStackedTensorDict'>";
// Limits of the reader: a meta.json larger than this, JSON nested deeper, or a shape with more
// dims is refused with an error rather than read.
inline constexpr size_t kMaxMetaBytes = size_t{64} << 20;
// The depth and dims limits are every structure reader's (NOTE [ Structure validation ] in
// td/core/internal/structure_check.h).
inline constexpr int kMaxJsonDepth = internal::kMaxStructureJsonDepth;
inline constexpr size_t kMaxDims = internal::kMaxStructureDims;

// The file-system name of `key` (without the ".memmap" suffix of tensor files).
//   EscapeKey("a/b") == "a%2Fb";  EscapeKey("..") == "%2E%2E";  EscapeKey("") == "%"
std::string EscapeKey(std::string_view key);
// Inverse of EscapeKey; nullopt for a name EscapeKey cannot produce.
std::optional<std::string> UnescapeKey(std::string_view name);

// kTensorDict: any sub-directory whose own meta.json says what it holds (TensorDict, lazy stack,
// tensorclass); kNonTensor: NonTensorData, NonTensorStack or MetaData.
enum class EntryKind { kTensor, kTensorDict, kNonTensor };

// What a directory's meta.json "_type" names.
enum class DirType { kTensorDict, kLazyStack, kNonTensorData, kNonTensorStack, kTensorClass };

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
  // The name a writer before 0.13 used (the raw key), when it is safe and differs from
  // file_name; empty otherwise. See LegacyFileName.
  std::string legacy_file_name;
  // Sub-directories: the "type" meta.json gives (Python's class name: "TensorDict",
  // "LazyStackedTensorDict", "NonTensorStack", a tensorclass's name, ...).
  std::string type_name;
  // Tensors: a nested (jagged) tensor. `shape` is then the shape [n, ndim] of its sizes tensor
  // and `nbytes` the size of the sizes file (NestedShapeFileName); the elements are known once
  // the sizes are read.
  bool is_nested = false;
};

// One level's meta.json.
struct LevelMeta {
  std::vector<int64_t> batch_size;
  std::vector<EntryMeta> entries;  // in the file's order
};

// File name of an entry of the given kind.
std::string EntryFileName(std::string_view key, EntryKind kind);
// The raw-key file name writers before 0.13 used, or nullopt when the raw key is not a safe
// single file name (contains / or \ or NUL, starts with a "C:"-style drive, or is "", "." or
// ".." for a directory). LegacyFileName("a b", kTensor) == "a b.memmap".
std::optional<std::string> LegacyFileName(std::string_view key, EntryKind kind);
// The sizes file of a nested tensor stored in `file_name` ("x.memmap" -> "x.shape.memmap"; as
// Python's Path.with_suffix, a name whose only dot leads gets the suffix appended).
std::string NestedShapeFileName(std::string_view file_name);
// Picks each entry's file among the names `present` in its directory (the escaped name, else the
// raw one; a level that needs one raw name takes raw names wherever they exist):
// sets file_name to the name to open, or to "" for a zero-element tensor without a file.
// Errors name `dir`, the key and the names tried.
absl::Status ResolveEntryFiles(std::vector<EntryMeta>* entries,
                               const std::function<bool(const std::string&)>& present,
                               std::string_view dir);
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

// Any directory's meta.json, by its "_type".
struct DirMeta {
  DirType type = DirType::kTensorDict;
  std::string type_name;  // "_type" as written ("" when absent)
  LevelMeta level;        // kTensorDict
  int64_t stack_dim = 0;  // kLazyStack, kNonTensorStack
  nlohmann::json data;    // kNonTensorData, kNonTensorStack (a JSON array)
  bool metadata = false;  // kNonTensorData: a MetaData ("...MetaData'>", "...MetaData[int]'>")
  // kTensorClass: the non-tensor fields of meta.json (all but "_type"), in the file's order.
  std::vector<std::pair<std::string, nlohmann::json>> fields;
  structure::Level* node = nullptr;  // the level this directory is in DirPlace's builder
};
// Where a directory is in the structure being read (NOTE [ Structure codec ] in
// td/structure/structure.h), whose `builder` applies the structure rules across directories: the
// sub-level `key` of `parent` (nullptr: the root), or `fill` (a tensorclass, for its
// _tensordict/). No builder: a root of its own (node is then nullptr).
struct DirPlace {
  structure::Builder* builder = nullptr;
  structure::Level* parent = nullptr;
  std::string key;
  structure::Level* fill = nullptr;
};
// Parses and validates a directory's meta.json whatever it holds, at `place`. Errors as
// ParseLevelMeta's; pickled data, custom-op views (permute/unsqueeze/...) and other layouts that
// cannot be read are errors naming the class; so are levels deeper than td::kMaxNestingDepth and
// batch sizes that do not start with their parent's.
//   auto m = ParseDirMeta(R"({"_type": "<class 'tensordict._lazy.LazyStackedTensorDict'>",
//                             "stack_dim": 0})", "/d/meta.json");   // m->type == kLazyStack
absl::StatusOr<DirMeta> ParseDirMeta(std::string_view text, std::string_view path,
                                     const DirPlace& place = {});
// b.SetBatchSize(level, batch), its error naming `meta_path` (and `what`) in this reader's words.
absl::Status SetBatchSize(structure::Builder& b, structure::Level& level,
                          const structure::Sizes& batch, std::string_view meta_path,
                          std::string_view what = "");

// meta.json text for a level (entries in order, then shape, device "cpu" and _type). A
// sub-directory entry's "type" is its type_name, or "TensorDict" / "NonTensorData" by kind.
std::string LevelMetaJson(const LevelMeta& meta);
// meta.json text of a stack's directory, as LazyStackedTensorDict._memmap_ (`values` nullptr:
// only "_type" and "stack_dim"; member i lives in the sub-directory "i") or
// NonTensorStack._memmap_ (holding `values` nested as its batch size, and no other file) write it
// in Python tensordict 0.5-0.14.
std::string StackMetaJson(int64_t stack_dim, const nlohmann::json* values = nullptr);
// meta.json text of a non-tensor entry holding `data` (a NonTensorData, or with `metadata` a
// MetaData: NonTensorDataBase._memmap_ in Python tensordict 0.9-0.14 writes both alike).
std::string NonTensorMetaJson(const nlohmann::json& data, bool metadata = false);

// OK when `data` can be written and read back unchanged: finite numbers, valid UTF-8, nesting
// within kMaxJsonDepth. The error names `what`.
absl::Status CheckWritableJson(const nlohmann::json& data, std::string_view what);
// OK when `key` is valid UTF-8 (meta.json is JSON text) and not reserved.
absl::Status CheckWritableKey(std::string_view key, std::string_view what);

}  // namespace memmap
}  // namespace internal
}  // namespace td
