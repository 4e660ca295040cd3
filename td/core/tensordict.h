// TensorDict: a dictionary of tensors that behaves like one tensor.
//
// Every entry shares the leading batch dimensions (`batch_size()`), so one call indexes, reshapes,
// stacks, moves or saves them all. Keys nest (`td::NestedKey`): an entry can be a tensor, a nested
// TensorDict whose batch size starts with its parent's, or non-tensor data (a JSON value: strings,
// numbers, bools, lists, objects).
//
//   td::TensorDict data({{"key 1", torch::ones({3, 4, 5})},
//                        {"key 2", torch::zeros({3, 4, 5}, torch::kBool)}},
//                       {3, 4});
//   data.set({"nested", "key"}, torch::zeros({3, 4}));   // creates the sub-TensorDict "nested"
//   at::Tensor k1 = data.get("key 1");
//   std::cout << data;                                  // Python tensordict's layout
//
// TensorDict is a handle, like torch::Tensor: copying it shares the entries; `clone()` makes an
// independent deep copy and `copy()` a shallow one. Reading from several threads at once is safe;
// writing needs the caller's synchronisation, as with tensors. Storage is pluggable (see
// td/core/storage.h); a TensorDict built by the constructors below lives on the "dense" backend.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <torch/arg.h>
#include <torch/ordered_dict.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "nlohmann/json.hpp"
#include "td/core/dict_options.h"
#include "td/core/errors.h"
#include "td/core/memmap_options.h"
#include "td/core/nested_key.h"
#include "td/core/options.h"
#include "td/core/print_options.h"
#include "td/executor/executor.h"

namespace td {

class Storage;
class Value;

// The per-level metadata entries of to_ivalue() / from_ivalue().
inline constexpr std::string_view kIValueBatchSizeKey = "__batch_size";
inline constexpr std::string_view kIValueDeviceKey = "__device";
class Operand;
struct ValuesIndices;

// The names of the batch dims (Python's td.names): one entry per batch dim, nullopt for an
// unnamed dim. See NOTE [ Dim names ] in td/core/names.cc.
using DimNames = std::vector<std::optional<std::string>>;
// A mapping old name -> new name (nullopt unnames the dim), for rename() / rename_(): Python's
// td.rename(old="new"). Written as a braced list of pairs:
//   td.rename({{"time", "t"}, {"env", std::nullopt}});
struct DimRenames {
  using Pair = std::pair<std::string, std::optional<std::string>>;
  DimRenames(std::initializer_list<Pair> pairs) : pairs(pairs) {}  // NOLINT
  explicit DimRenames(std::vector<Pair> pairs) : pairs(std::move(pairs)) {}
  std::vector<Pair> pairs;
};

// A flat state dict: "a.b.c" -> tensor, as Module::named_parameters() gives.
using TensorMap = torch::OrderedDict<std::string, at::Tensor>;

// A non-tensor entry: any JSON value (the memmap format stores these as JSON), of one of Python
// tensordict's three kinds (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h):
//   kData      NonTensorData: one value for the whole batch; batch ops carry it as it is.
//   kMetaData  MetaData: the same, under the name Python gives metadata (td::NonTensorData::meta).
//   kStack     NonTensorStack: one value per batch element, `data` a list nested as the level's
//              batch size ([3, 2]: 3 lists of 2 values); indexing, reshaping, stacking... move
//              the values as they move a tensor's elements (td::NonTensorData::stack).
//   td.set("episode", "walk-7");                                      // kData
//   td.set("task", td::NonTensorData::stack({"walk", "run", "jump"}));  // batch size [3]
//   td.index({1}).get_non_tensor("task") == "run";
struct NonTensorData {
  enum class Kind : uint8_t { kData, kMetaData, kStack };
  explicit NonTensorData(nlohmann::json d, Kind k = Kind::kData)
      : data(std::move(d)), kind(k) {}
  // One value per batch element: `values` nested as the batch size of the level it is set in
  // (checked there: a BatchSizeError naming the key otherwise).
  static NonTensorData stack(nlohmann::json values) {
    return NonTensorData(std::move(values), Kind::kStack);
  }
  // Python's MetaData: written and read under that name; otherwise as kData.
  static NonTensorData meta(nlohmann::json d) { return NonTensorData(std::move(d), Kind::kMetaData); }
  bool is_stack() const { return kind == Kind::kStack; }
  nlohmann::json data;
  Kind kind = Kind::kData;
  // std::equal_to: only nlohmann's own operator is a candidate (not td's TensorDict ones, which
  // would ask whether JSON converts to a TensorDict that is not complete here).
  friend bool operator==(const NonTensorData& a, const NonTensorData& b) {
    return a.kind == b.kind && std::equal_to<nlohmann::json>()(a.data, b.data);
  }
  friend bool operator!=(const NonTensorData& a, const NonTensorData& b) { return !(a == b); }
};

class TensorDict {
 public:
  using Item = std::pair<NestedKey, Value>;
  // Functions over leaves: return the new leaf, or an undefined tensor to drop the entry.
  using LeafFn = std::function<at::Tensor(const at::Tensor&)>;
  using BinaryLeafFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;
  // Called with {leaf, leaf of others[0], leaf of others[1], ...}.
  using NaryLeafFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
  using NamedLeafFn = std::function<at::Tensor(const NestedKey&, const at::Tensor&)>;
  using NamedNaryLeafFn =
      std::function<at::Tensor(const NestedKey&, const std::vector<at::Tensor>&)>;

  // An empty TensorDict with batch size [] and no device.
  TensorDict();
  // Entries in order; a braced list of items as a value becomes a sub-TensorDict with this batch
  // size and device. Throws BatchSizeError when a value's leading dims are not `batch_size`.
  // `names` names the batch dims (Python's names=; empty: unnamed), with set_names()'s rules.
  //   td::TensorDict td({{"a", torch::zeros({3, 4, 5})}, {"n", {{"x", torch::ones({3, 4})}}}},
  //                     {3, 4});
  //   td::TensorDict named({{"obs", obs}}, {8, 100}, std::nullopt, {"env", "time"});
  TensorDict(std::initializer_list<Item> items, at::IntArrayRef batch_size,
             std::optional<at::Device> device = std::nullopt, const DimNames& names = {});
  TensorDict(const std::vector<Item>& items, at::IntArrayRef batch_size,
             std::optional<at::Device> device = std::nullopt, const DimNames& names = {});
  // From a hand-rolled map of tensors. Keys are taken in the map's iteration order.
  template <class Map, class = decltype(std::declval<const Map&>().begin()->second.defined())>
  static TensorDict from_map(const Map& map, at::IntArrayRef batch_size,
                             std::optional<at::Device> device = std::nullopt) {
    TensorDict out({}, batch_size, device);
    for (const auto& [k, v] : map) out.set(NestedKey(k), v);
    return out;
  }
  // Wraps a storage backend (see td/core/storage.h). Throws c10::Error on nullptr.
  explicit TensorDict(std::shared_ptr<Storage> storage);

  // ---- batch size, device, backend -------------------------------------------------------
  at::IntArrayRef batch_size() const;
  at::IntArrayRef shape() const { return batch_size(); }
  int64_t batch_dims() const { return static_cast<int64_t>(batch_size().size()); }
  int64_t ndim() const { return batch_dims(); }
  // Product of the batch dims (1 for batch size []).
  int64_t numel() const;
  // The device every tensor written is moved to; nullopt when the TensorDict has none.
  std::optional<at::Device> device() const;
  // The storage backend id ("dense", "lazy_stack", "memmap", ...).
  std::string_view backend() const;
  // The storage, read only (see td/core/storage.h): every write goes through the members
  // below, which validate it first. Backends that must write a level directly use
  // internal::MutableStorage (NOTE [ Mutable storage access ] in
  // td/core/internal/storage_access.h).
  const Storage& storage() const { return *storage_; }
  std::shared_ptr<const Storage> storage_ptr() const { return storage_; }
  // True when both handles share the same entries.
  bool is_same(const TensorDict& other) const { return storage_ == other.storage_; }

  // ---- every operation: the op table (NOTE [ The op table ] in td/core/ops.def) -------------
#define TD_OP(kind, ret, name, params, args, sample) TD_OP_DECLARE_##kind(ret, name, params)
#define TD_OP_DECLARE_OUT(ret, name, params) ret name params const;
#define TD_OP_DECLARE_CHECKED(ret, name, params) ret name params const;
#define TD_OP_DECLARE_CUSTOM_CONST(ret, name, params) ret name params const;
#define TD_OP_DECLARE_LIST(ret, name, params) ret name params const;
#define TD_OP_DECLARE_PAIR(ret, name, params) ret name params const;
#define TD_OP_DECLARE_QUERY(ret, name, params) ret name params const;
#define TD_OP_DECLARE_DICT_CONST(ret, name, params) ret name params const;
#define TD_OP_DECLARE_IN(ret, name, params) ret name params;
#define TD_OP_DECLARE_IN_FIELDS(ret, name, params) ret name params;
#define TD_OP_DECLARE_CUSTOM(ret, name, params) ret name params;
#define TD_OP_DECLARE_DICT(ret, name, params) ret name params;
#define TD_UNARY(name, kernel) \
  TensorDict name() const;     \
  TensorDict& name##_();
#include "td/core/ops.def"  // IWYU pragma: export
#undef TD_OP_DECLARE_OUT
#undef TD_OP_DECLARE_CHECKED
#undef TD_OP_DECLARE_CUSTOM_CONST
#undef TD_OP_DECLARE_LIST
#undef TD_OP_DECLARE_PAIR
#undef TD_OP_DECLARE_QUERY
#undef TD_OP_DECLARE_DICT_CONST
#undef TD_OP_DECLARE_IN
#undef TD_OP_DECLARE_IN_FIELDS
#undef TD_OP_DECLARE_CUSTOM
#undef TD_OP_DECLARE_DICT

  TensorDict operator-() const { return neg(); }
  // Entry-wise `==`: a TensorDict of bool tensors with the same keys. Throws KeyError when the
  // key sets differ (naming the keys only on one side).
  TensorDict operator==(const TensorDict& other) const;
  TensorDict operator!=(const TensorDict& other) const;

  // ---- building TensorDicts from files and dicts ---------------------------------------------
  // Opens a memmap directory (written by memmap() or by Python tensordict) as a locked
  // TensorDict on the "memmap" backend; `options.sub_path` opens one sub-TensorDict only,
  // `options.mode` read-write or read-only. Everything is validated before use: MemmapError
  // names the file and the problem (missing or unexpected file, size that does not match
  // shape x dtype, malformed JSON, unknown dtype, wrong JSON types, symlinks). Link
  // //td/backends/memmap (NOTE [ Backend entry points ] in td/core/internal/backend_hooks.h).
  //   auto params = td::TensorDict::load_memmap("/ckpt", td::LoadMemmapOptions().sub_path("0"));
  static TensorDict load_memmap(const std::string& prefix, const LoadMemmapOptions& options = {});
  // Inverse of to_ivalue(): a (nested) dict of tensors / dicts / strings / numbers. With an
  // empty `batch_size`, each level takes the "__batch_size" / "__device" to_ivalue recorded
  // (batch [] without them); a given `batch_size` is used for every level, as before.
  //   td::TensorDict back = td::TensorDict::from_ivalue(td.to_ivalue());   // same batch size
  static TensorDict from_ivalue(const c10::IValue& value, at::IntArrayRef batch_size = {},
                                std::optional<at::Device> device = std::nullopt);
  // A new TensorDict holding `state` with its recorded batch sizes and device.
  //   td::TensorDict copy = td::TensorDict::from_state_dict(td.state_dict_with_metadata());
  static TensorDict from_state_dict(const StateDict& state, std::string_view separator = ".");
  // Python's TensorDict.fromkeys(keys, value): batch size [], `value` under every key (nested
  // keys create their levels; a tensor is shared by the keys, not copied).
  //   auto zeros = td::TensorDict::fromkeys({"a", {"b", "c"}}, at::zeros({}));
  static TensorDict fromkeys(const std::vector<NestedKey>& keys, const Value& value);
 private:
  // The TensorDict holding the entry `key` (creating intermediate levels when `create`); the
  // returned string_view points into `key`.
  std::pair<TensorDict, std::string_view> parent_of(const KeyRef& key, bool create) const;
  [[noreturn]] void fail_missing(const KeyRef& key, size_t depth) const;
  // Writes a validated `value` under `key` of this level (lock and backend rules).
  void set_at_level(std::string_view key, Value&& value, const KeyRef& full_key);
  // Checks `value` against this level (batch size, kind, nesting) and puts it in the form it is
  // stored in (moved to the device, a plain dict made a TensorDict), in place.
  void validate(Value& value, const KeyRef& full_key) const;

  std::shared_ptr<Storage> storage_;
};

// One entry of a TensorDict: a tensor, a nested TensorDict, or non-tensor data. Implicitly
// built from each of these (a string literal is non-tensor data; a braced list of items is a
// nested dict that becomes a sub-TensorDict when set).
class Value {
 public:
  using Items = std::vector<TensorDict::Item>;

  Value(at::Tensor tensor) : v_(std::move(tensor)) {}                // NOLINT
  Value(TensorDict tensordict) : v_(std::move(tensordict)) {}        // NOLINT
  Value(NonTensorData data) : v_(std::move(data)) {}                 // NOLINT
  Value(const char* s) : v_(NonTensorData(nlohmann::json(s))) {}     // NOLINT
  Value(std::string s) : v_(NonTensorData(nlohmann::json(std::move(s)))) {}  // NOLINT
  Value(std::initializer_list<TensorDict::Item> items);              // NOLINT

  bool is_tensor() const { return v_.index() == 0; }
  bool is_tensordict() const { return v_.index() == 1; }
  bool is_non_tensor() const { return v_.index() == 2; }
  // An unconverted braced list of items (only seen before it is set into a TensorDict).
  bool is_plain_dict() const { return v_.index() == 3; }

  // Throw TypeError naming what the entry is when it is of another kind.
  const at::Tensor& tensor() const {
    if (!is_tensor()) fail_kind("a Tensor");
    return *std::get_if<0>(&v_);
  }
  const TensorDict& tensordict() const {
    if (!is_tensordict()) fail_kind("a TensorDict");
    return *std::get_if<1>(&v_);
  }
  // The non-tensor value (its JSON data) / the whole entry with its kind.
  const nlohmann::json& non_tensor() const;
  const NonTensorData& non_tensor_data() const;
  at::Tensor& mutable_tensor() {
    if (!is_tensor()) fail_kind("a Tensor");
    return *std::get_if<0>(&v_);
  }
  const Items& plain_dict() const { return *std::get<3>(v_); }

  // "Tensor", "TensorDict", "NonTensorData", "MetaData", "NonTensorStack".
  std::string_view kind() const;

 private:
  [[noreturn]] void fail_kind(const char* expected) const;

  std::variant<at::Tensor, TensorDict, NonTensorData, std::shared_ptr<const Items>> v_;
};

std::ostream& operator<<(std::ostream& os, const TensorDict& td);

}  // namespace td

// The free functions over TensorDicts, declared once TensorDict is complete (so that overload
// resolution elsewhere in this header never meets them with an incomplete TensorDict).
#include "td/core/comparison.h"  // IWYU pragma: export
#include "td/core/operators.h"   // IWYU pragma: export
#include "td/core/stack.h"       // IWYU pragma: export  (td::stack, td::cat, td::unbind)
#include "td/core/pointwise_ops.h"  // IWYU pragma: export  (td::Operand, %, &, |, ^, ~)
