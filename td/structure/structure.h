// A TensorDict's structure read from another program's bytes, and structure::Builder, the one way
// to make it. Needs only c10's dtypes, JSON and absl, so every fuzz target links it.
//
// NOTE [ Structure codec ]
// A format reader walks its own layout (JSON fields, HDF5 groups, wire bytes) and says what it
// finds to a Builder: a level (AddLevel, then SetBatchSize), a tensor leaf (AddLeaf), non-tensor
// data (AddNonTensor). The Builder applies the rules of NOTE [ Structure validation ]
// (td/core/internal/structure_check.h) as it goes, so a Description that exists obeys them:
//  * a level is at most kMaxNestingDepth levels below the root (checked before it is made);
//  * a key names one entry of its level;
//  * batch sizes and shapes are at most kMaxStructureDims sizes in [0, 2^63-1];
//  * a sub-level's batch size starts with its TensorDict parent's (a lazy stack's members are
//    stacked, not nested: theirs need not), a leaf's shape with its level's;
//  * a leaf's dtype is a name Python writes or a ScalarType code both LibTorch lines agree on, and
//    its bytes (numel x element size) fit in int64.
// A failed rule is an InvalidArgument tagged with its Rule (RuleOf); the reader adds where it is
// and raises its own error. What the format adds (byte ranges, dim names, which classes a level
// may be) stays in the reader, next to the fields it maps. Every format reader uses a Builder.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "td/core/internal/structure_check.h"
#include "td/core/nested_key.h"

namespace td {
namespace structure {

// What a level is: a TensorDict, a LazyStackedTensorDict (its sub-levels are its members, in
// stack order), a NonTensorStack (its values are in LevelInfo::data) or a tensorclass.
enum class LevelKind { kTensorDict, kLazyStack, kNonTensorStack, kTensorClass };
enum class EntryKind { kLeaf, kLevel, kNonTensor };
// What non-tensor data is (td::NonTensorData::Kind): one value for the level (NonTensorData,
// MetaData) or one per batch element, nested as the batch size (internal::StackFromFile checks).
enum class NonTensorKind { kData, kMetaData, kStack };

// The kind a non-tensor entry's "cls" field names, as Python spells its classes: none (nullptr)
// is kData, "MetaData" kMetaData, "NonTensorStack" kStack; any other is InvalidArgument, named.
absl::StatusOr<NonTensorKind> NonTensorKindOf(const nlohmann::json* cls);

// The rule a status of this file reports (RuleOf); kNone for an OK status or another one.
enum class Rule {
  kNone,
  kJsonDepth,     // ParseJson: [ and { nested past kMaxStructureJsonDepth
  kJsonSyntax,    // ParseJson: not JSON (the message is the parser's)
  kJsonKey,       // ParseJson with unique keys: an object names a key twice
  kNestingDepth,  // AddLevel: deeper than kMaxNestingDepth
  kKey,           // a key its level already has
  kBatchSize,     // SetBatchSize: not a list of sizes
  kSubBatch,      // SetBatchSize: does not start with the parent's batch size
  kDtype,         // AddLeaf: a dtype name or code this LibTorch has not
  kShape,         // AddLeaf: not a list of sizes
  kStartsWith,    // AddLeaf: the shape does not start with the level's batch size
  kBytes,         // AddLeaf: numel x element size past 2^63-1
};
Rule RuleOf(const absl::Status& status);

// `text` parsed as untrusted JSON (NOTE [ Untrusted JSON ] in td/core/internal/structure_check.h);
// with `unique_keys`, an object naming a key twice is refused (nlohmann/json would keep the last).
//   absl::StatusOr<nlohmann::ordered_json> j = ParseJson<nlohmann::ordered_json>(text, true);
template <class Json>
absl::StatusOr<Json> ParseJson(std::string_view text, bool unique_keys = false);

// A shape or batch size as a format holds it (a JSON list or sizes it read), checked alike.
class Sizes {
 public:
  Sizes(const nlohmann::json& j) : v_(&j) {}          // NOLINT(runtime/explicit)
  Sizes(const nlohmann::ordered_json& j) : v_(&j) {}  // NOLINT(runtime/explicit)
  Sizes(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT(runtime/explicit)
  absl::StatusOr<std::vector<int64_t>> Read() const;

 private:
  std::variant<const nlohmann::json*, const nlohmann::ordered_json*, std::vector<int64_t>> v_;
};

// A dtype as a format spells it: a name as Python writes it ("torch.float32"), a ScalarType code
// (td::distributed's wire), or a dtype the format mapped itself (HDF5, Zarr).
class Dtype {
 public:
  static Dtype Name(std::string_view name) { return Dtype(std::string(name)); }
  static Dtype Code(int64_t code) { return Dtype(code); }
  Dtype(c10::ScalarType type) : v_(type) {}  // NOLINT(runtime/explicit)
  absl::StatusOr<c10::ScalarType> Read() const;

 private:
  explicit Dtype(std::variant<std::string, int64_t, c10::ScalarType> v) : v_(std::move(v)) {}
  std::variant<std::string, int64_t, c10::ScalarType> v_;
};

// Where a leaf's bytes are, in its format's terms; each format uses the fields it has.
struct Location {
  std::string name;               // memmap: the file; HDF5: the dataset; Zarr: the array
  int64_t index = 0;              // shared memory: the segment
  int64_t start = 0, stop = 0;    // consolidated: the byte range; shared memory: start = offset
  int64_t pad = 0;                // consolidated: padding bytes at the range's end
  std::vector<int64_t> strides;   // shared memory
};

class Level;

// One key of a level.
struct Entry {
  std::string key;
  EntryKind kind = EntryKind::kLeaf;
  c10::ScalarType dtype = c10::ScalarType::Byte;  // kLeaf
  std::vector<int64_t> shape;                     // kLeaf
  int64_t nbytes = 0;                             // kLeaf: numel x element size
  Location location;                              // kLeaf
  std::unique_ptr<Level> level;                   // kLevel
  nlohmann::json data;                            // kNonTensor
  NonTensorKind non_tensor = NonTensorKind::kData;  // kNonTensor
};

// What of a level no structure rule covers: the reader sets what its format has.
struct LevelInfo {
  std::optional<std::string> device;              // as the format names it
  std::vector<std::optional<std::string>> names;  // one per batch dim, or none
  bool locked = false;
  int64_t stack_dim = 0;                          // kLazyStack, kNonTensorStack
  std::optional<std::string> stack_dim_name;      // kLazyStack
  std::string class_name;                         // the class the format names, if any
  nlohmann::json data;                            // kNonTensorStack: nested lists of values
};

// A level: its rule-bound parts are read-only; a Builder sets them.
class Level {
 public:
  LevelKind kind() const { return kind_; }
  const std::string& key() const { return key_; }  // "" for the root
  int depth() const { return depth_; }             // 0 for the root
  const Level* parent() const { return parent_; }  // nullptr for the root
  const std::vector<int64_t>& batch_size() const { return batch_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // The entry `key`, or nullptr.
  const Entry* Find(std::string_view key) const;

  LevelInfo info;

 private:
  friend class Builder;
  Level(LevelKind kind, std::string key, const Level* parent, int depth)
      : kind_(kind), key_(std::move(key)), parent_(parent), depth_(depth) {}
  LevelKind kind_;
  std::string key_;
  const Level* parent_;
  int depth_;
  bool batch_set_ = false;
  std::vector<int64_t> batch_;
  std::vector<Entry> entries_;
  absl::flat_hash_map<std::string, size_t> index_;  // key -> entries_ position
};

// A finished structure: every level has a batch size and obeys NOTE [ Structure codec ].
class Description {
 public:
  const Level& root() const { return *root_; }

 private:
  friend class Builder;
  explicit Description(std::unique_ptr<Level> root) : root_(std::move(root)) {}
  std::unique_ptr<Level> root_;
};

// Makes a Description; each call applies the rules of NOTE [ Structure codec ] to what it adds
// and returns a status tagged with the one that fails. A level's batch size is set before its
// leaves and sub-levels are added (a lazy stack's: once its members are, as it follows from them).
//   structure::Builder b;
//   structure::Level& root = b.Root(structure::LevelKind::kTensorDict);
//   if (absl::Status s = b.SetBatchSize(root, json["batch_size"]); !s.ok()) ...
//   absl::StatusOr<const structure::Entry*> leaf =
//       b.AddLeaf(root, "a", structure::Dtype::Name("torch.float32"), json["shape"]);
//   absl::StatusOr<structure::Description> d = std::move(b).Finish();
class Builder {
 public:
  // The root level (made once).
  Level& Root(LevelKind kind);
  // The sub-level `key` of `parent`: its depth is checked before it is made, then its key.
  absl::StatusOr<Level*> AddLevel(Level& parent, std::string_view key, LevelKind kind);
  // `level`'s batch size (once), checked by the batch-size rules of NOTE [ Structure codec ].
  absl::Status SetBatchSize(Level& level, const Sizes& batch);
  // The leaf `key` of `level`, checked by the key and leaf rules of NOTE [ Structure codec ].
  absl::StatusOr<const Entry*> AddLeaf(Level& level, std::string_view key, const Dtype& dtype,
                                       const Sizes& shape, Location location = {});
  // Where `leaf` (made by this builder) lies, for a format that reads it after the leaf's rules.
  void SetLocation(const Entry& leaf, Location location);
  // The non-tensor data `key` of `level`.
  absl::StatusOr<const Entry*> AddNonTensor(Level& level, std::string_view key,
                                            nlohmann::json data,
                                            NonTensorKind kind = NonTensorKind::kData);
  // The Description; FailedPrecondition when no root was made or a level has no batch size.
  absl::StatusOr<Description> Finish() &&;

 private:
  absl::Status CheckKey(const Level& level, std::string_view key) const;
  static Entry& NewEntry(Level& level, std::string_view key, EntryKind kind);
  std::unique_ptr<Level> root_;
  int unset_ = 0;  // levels made without a batch size yet
};

}  // namespace structure
}  // namespace td
