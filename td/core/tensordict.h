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
#include "td/core/unary_ops_list.h"
#include "td/executor/executor.h"

namespace td {

class Storage;
class Value;

// The per-level metadata entries of to_ivalue() / from_ivalue().
inline constexpr std::string_view kIValueBatchSizeKey = "__batch_size";
inline constexpr std::string_view kIValueDeviceKey = "__device";
class Operand;
struct ValuesIndices;

// A non-tensor entry: any JSON value (the memmap format stores these as JSON).
struct NonTensorData {
  explicit NonTensorData(nlohmann::json d) : data(std::move(d)) {}
  nlohmann::json data;
  friend bool operator==(const NonTensorData& a, const NonTensorData& b) { return a.data == b.data; }
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
  //   td::TensorDict td({{"a", torch::zeros({3, 4, 5})}, {"n", {{"x", torch::ones({3, 4})}}}},
  //                     {3, 4});
  TensorDict(std::initializer_list<Item> items, at::IntArrayRef batch_size,
             std::optional<at::Device> device = std::nullopt);
  TensorDict(const std::vector<Item>& items, at::IntArrayRef batch_size,
             std::optional<at::Device> device = std::nullopt);
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
  // Replaces the batch size after checking every leaf (nested ones included) starts with it;
  // nested TensorDicts get their batch size's leading dims replaced. Throws BatchSizeError naming
  // the first leaf that does not fit.
  TensorDict& set_batch_size(at::IntArrayRef batch_size);
  // Sets the batch size to the longest run of leading dims shared by every leaf (at most
  // `batch_dims` dims when given); recurses into nested TensorDicts first.
  TensorDict& auto_batch_size_(std::optional<int64_t> batch_dims = std::nullopt);
  // The storage backend id ("dense", "lazy_stack", "memmap", ...).
  std::string_view backend() const;
  Storage& storage() const { return *storage_; }
  const std::shared_ptr<Storage>& storage_ptr() const { return storage_; }
  // True when both handles share the same entries.
  bool is_same(const TensorDict& other) const { return storage_ == other.storage_; }

  // ---- reading ---------------------------------------------------------------------------
  // The tensor under `key`. Throws KeyError naming the key and the keys that exist, or TypeError
  // when the entry is a sub-TensorDict or non-tensor data.
  at::Tensor get(const NestedKey& key) const;
  // The same for keys written as literals, `get("obs")` and `get({"next", "obs"})`: the parts are
  // looked up as they are, without building a NestedKey (the fast path for hot loops).
  at::Tensor get(const char* key) const { return get_flat(key); }
  at::Tensor get(std::initializer_list<const char*> key) const;
  // The tensor under `key`, or `default_value` when there is no such entry.
  at::Tensor get(const NestedKey& key, const at::Tensor& default_value) const;
  // The sub-TensorDict under `key` (a handle: writing to it writes to this TensorDict).
  TensorDict get_tensordict(const NestedKey& key) const;
  // The non-tensor data under `key`.
  nlohmann::json get_non_tensor(const NestedKey& key) const;
  // Whatever is under `key`.
  Value get_value(const NestedKey& key) const;
  // Whatever is under `key`, or nullopt.
  std::optional<Value> find(const NestedKey& key) const;
  bool contains(const NestedKey& key) const;
  // Number of entries at the top level (len(td) in Python). PORTING TRAP: Python's td.size()
  // is the batch size; in C++ that is batch_size() (or shape()).
  size_t size() const;

  std::vector<NestedKey> keys(const KeysOptions& options = {}) const;
  std::vector<Value> values(const KeysOptions& options = {}) const;
  std::vector<Item> items(const KeysOptions& options = {}) const;
  // Calls fn(key, value) for each entry of this level, in key order, nested TensorDicts as
  // values (recurse through value.tensordict()): the one way to walk a level without building
  // NestedKeys or a vector. On a lazy level, tensor values are computed as get() computes them.
  //   td.for_each_entry([&](const std::string& k, const td::Value& v) { ... });
  void for_each_entry(absl::FunctionRef<void(const std::string& key, const Value& value)> fn) const;

  // ---- writing ---------------------------------------------------------------------------
  // Inserts or replaces the entry; missing intermediate TensorDicts of a nested key are created.
  // Tensors are moved to device() when set. Throws BatchSizeError when the value's leading dims
  // are not the batch size (naming the key, the shape and the batch size), LockedError when the
  // key is new and the TensorDict is locked.
  TensorDict& set(const NestedKey& key, Value value);
  // The same for a flat literal key, `set("obs", t)`, without building a NestedKey.
  TensorDict& set(const char* key, Value value);
  TensorDict& set_non_tensor(const NestedKey& key, nlohmann::json data);
  // Copies `value` into the existing tensor under `key`. The value must have exactly the
  // tensor's shape: set_ does not broadcast (ones({5}) into a [3, 4, 5] tensor is an error; pass
  // `value.expand(shape)` to broadcast on purpose); dtype and device are converted as by
  // Tensor::copy_. The same rule holds for apply_ results. Throws KeyError when missing,
  // TypeError when the entry is not a tensor, ValueError naming the key and both shapes when they
  // differ or when the tensor cannot be written (a meta tensor; a value overlapping it); other
  // copy failures are rethrown with the key.
  //   td.set_("a", at::ones({3, 4, 5}));                          // td["a"] is [3, 4, 5]
  //   td.set_("a", at::ones({5}).expand({3, 4, 5}));              // explicit broadcast
  TensorDict& set_(const NestedKey& key, const at::Tensor& value);
  // set() for each entry of `other` (nested TensorDicts are merged, not replaced).
  TensorDict& update(const TensorDict& other);
  TensorDict& update(std::initializer_list<Item> items);
  // set_() for each leaf of `other`; every key must exist and every shape match, checked before
  // anything is written.
  TensorDict& update_(const TensorDict& other);
  // Removes the entry. Throws KeyError when missing, LockedError when locked.
  TensorDict& del_(const NestedKey& key);
  TensorDict& erase(const NestedKey& key) { return del_(key); }
  // Removes and returns the entry (KeyError when missing); the second form returns
  // `default_value` instead.
  Value pop(const NestedKey& key);
  Value pop(const NestedKey& key, Value default_value);
  // Moves the entry to `new_key` (which must not exist unless `safe` is false).
  TensorDict& rename_key_(const NestedKey& old_key, const NestedKey& new_key, bool safe = true);

  // ---- structure -------------------------------------------------------------------------
  // A new TensorDict (same batch size and device) holding only `keys` (sharing the values).
  // Throws KeyError for a missing key unless `strict` is false.
  TensorDict select(const std::vector<NestedKey>& keys, bool strict = true) const;
  // A new TensorDict without `keys` (missing keys are ignored).
  TensorDict exclude(const std::vector<NestedKey>& keys) const;
  // One TensorDict per key group, plus (last) one with every other key.
  std::vector<TensorDict> split_keys(const std::vector<std::vector<NestedKey>>& groups) const;
  // {"a": {"b": t}} -> {"a.b": t}. Throws ValueError when two keys collide.
  TensorDict flatten_keys(std::string_view separator = ".") const;
  // {"a.b": t} -> {"a": {"b": t}}. Throws ValueError when two keys collide.
  TensorDict unflatten_keys(std::string_view separator = ".") const;
  // Same batch size and device, no entries; with `recurse`, keeps the nested TensorDicts (empty).
  TensorDict empty(bool recurse = false) const;
  // Deep copy: new tensors, new nested TensorDicts.
  TensorDict clone() const;
  // Shallow copy: a new dict (and new nested dicts) sharing the tensors.
  TensorDict copy() const;

  // No keys may be added, removed or renamed while locked (nested TensorDicts included);
  // in-place writes (set_, set of an existing key) still work.
  TensorDict& lock_();
  TensorDict& unlock_();
  bool is_locked() const;

  // ---- apply (td/core/tensordict.cc) -----------------------------------------------------
  // fn is called on every tensor leaf, nested ones included, in depth-first insertion order
  // (see NOTE [ Leaf maps ] in td/core/internal/leaves.h). The result is a new dense TensorDict with the
  // same structure: an undefined tensor returned by fn drops that entry, non-tensor entries are
  // carried as they are. An exception from fn is rethrown (same type for c10::Error subclasses)
  // with the key it happened on. Zipped TensorDicts (`others`) are matched by key: a leaf
  // missing in one of them is a KeyError listing the missing keys unless
  // `ApplyOptions::default_value` is given; their extra keys are ignored. With
  // `ApplyOptions::batch_size` the result gets that batch size (nested TensorDicts keep their
  // extra dims after it); every result leaf must start with it (BatchSizeError naming the key).
  // Large TensorDicts (ApplyOptions::min_parallel_numel elements) run fn on several leaves at
  // once, on td::parallel's threads, so fn must then be safe to call concurrently — as LibTorch
  // ops are — or the call must pass ApplyOptions().parallel(false). When fn throws for several
  // leaves, the error of the first in key order is rethrown, as in the serial loop.

  //   td::TensorDict doubled = td.apply([](const at::Tensor& x) { return x * 2; });
  //   td::TensorDict floats = td.apply([](const at::Tensor& x) {
  //     return x.is_floating_point() ? x : at::Tensor();   // drops the other entries
  //   });
  TensorDict apply(const LeafFn& fn,
                   std::optional<std::vector<int64_t>> batch_size = std::nullopt) const;
  TensorDict apply(const LeafFn& fn, const ApplyOptions& options) const;
  // fn(leaf, other's leaf under the same key).
  //   td::TensorDict sum = a.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; },
  //                                b);
  TensorDict apply(const BinaryLeafFn& fn, const TensorDict& other,
                   const ApplyOptions& options = {}) const;
  // fn({leaf, others[0]'s leaf, others[1]'s leaf, ...}).
  TensorDict apply(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                   const ApplyOptions& options = {}) const;
  // fn(full key, leaf).
  //   td.named_apply([](const td::NestedKey& k, const at::Tensor& x) {
  //     return k.back() == "mask" ? at::Tensor() : x;
  //   });
  TensorDict named_apply(const NamedLeafFn& fn, const ApplyOptions& options = {}) const;
  // fn(full key, {leaf, others' leaves...}).
  TensorDict named_apply(const NamedNaryLeafFn& fn, const std::vector<TensorDict>& others,
                         const ApplyOptions& options = {}) const;

  // In place: fn(leaf) for every tensor leaf; a defined return value that is not the leaf
  // itself is copied into the leaf (so fn may either modify its argument or return new values).
  // Like set_, a result must have exactly the leaf's shape (no broadcasting: a scalar such as
  // x.sum() is an error), must not overlap the leaf's memory unless it is the leaf itself, and
  // the leaf must be writable (not a meta tensor); ValueError names the key, both shapes and what
  // was expected, checked for every leaf before anything is written.
  // Return values are all computed first and then copied, so an exception from fn (rethrown
  // with its key) leaves this TensorDict unchanged unless fn itself modified a leaf.
  //   td.apply_([](const at::Tensor& x) { return x.clamp_(0, 1); });
  TensorDict& apply_(const LeafFn& fn);
  //   td.apply_([](const at::Tensor& x) { return x.clamp_(0, 1); },
  //             td::ApplyOptions().parallel(false));
  TensorDict& apply_(const LeafFn& fn, const ApplyOptions& options);
  TensorDict& apply_(const BinaryLeafFn& fn, const TensorDict& other,
                     const ApplyOptions& options = {});
  TensorDict& apply_(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                     const ApplyOptions& options = {});

  // ---- devices, dtypes, memory (td/core/math_ops.cc) --------------------------------------
  // Moves every tensor; device() becomes `device`. With `non_blocking`, copies may be
  // asynchronous (as Tensor::to).
  //   td::TensorDict gpu = td.to(at::Device("cuda:0"));
  TensorDict to(at::Device device, bool non_blocking = false) const;
  // A floating `dtype` casts the floating-point leaves (other leaves are kept, as
  // torch.nn.Module::to does); an integer, bool or complex `dtype` casts every leaf, as Python's
  // td.to(dtype) does. Casting errors come with the key.
  //   td::TensorDict masks = td.to(at::kBool);
  TensorDict to(at::ScalarType dtype) const;
  // Both at once.
  TensorDict to(at::Device device, at::ScalarType dtype, bool non_blocking = false) const;
  // to(kCPU).
  TensorDict cpu() const;
  // The same entries on the dense backend at every level: lazy entries are computed (a lazy
  // stack stacks each key once), stored tensors are shared, not copied. Throws KeyError naming
  // the keys that only some members of a lazy stack hold, and the lazy stack's ValueError for a
  // key whose members disagree on a shape.
  //   td::TensorDict s = td::lazy_stack({x, y}, 0);
  //   td::TensorDict d = s.to_dense();        // d.backend() == "dense"
  TensorDict to_dense() const;
  // to_dense() with every leaf made contiguous (leaves that already are are shared). Same
  // errors as to_dense().
  TensorDict contiguous() const;
  // Leaves detached from the autograd graph (sharing memory).
  TensorDict detach() const;
  TensorDict& detach_();
  // Sets requires_grad on the floating-point and complex leaves (integer and bool tensors cannot
  // require gradients and are left alone).
  TensorDict& requires_grad_(bool requires_grad = true);
  // Every leaf copied to pinned memory (needs an accelerator; otherwise LibTorch's error is
  // rethrown with the key).
  TensorDict pin_memory() const;
  // Zeroes / fills every tensor leaf in place (at::_foreach_zero_ for zero_). Python's
  // td.fill_(key, value) fills one key: fill_(key, value) in td/core/dict_members.inc.
  TensorDict& zero_();
  TensorDict& fill_(const at::Scalar& value);

  // ---- arithmetic and math (td/core/math_ops.cc) ------------------------------------------
  // Leaf-wise over every tensor leaf (non-tensor entries carried). An operand TensorDict is
  // matched by key: it must hold every leaf of this one (KeyError listing the missing keys);
  // leaves broadcast as tensors do. Where LibTorch has a `_foreach_*` kernel the whole leaf list
  // goes through one call. In-place variants check every leaf (dtype the result can be cast to,
  // broadcast shape) before writing, so a failing call changes nothing; errors name the key.
  //   td::TensorDict c = (a + b) * 2;
  //   a.add_(b, /*alpha=*/0.5);
  TensorDict add(const TensorDict& other, const at::Scalar& alpha = 1) const;
  TensorDict add(const at::Scalar& other) const;
  TensorDict sub(const TensorDict& other, const at::Scalar& alpha = 1) const;
  TensorDict sub(const at::Scalar& other) const;
  TensorDict mul(const TensorDict& other) const;
  TensorDict mul(const at::Scalar& other) const;
  TensorDict div(const TensorDict& other) const;
  TensorDict div(const at::Scalar& other) const;
  TensorDict pow(const TensorDict& exponent) const;
  TensorDict pow(const at::Scalar& exponent) const;
  TensorDict& add_(const TensorDict& other, const at::Scalar& alpha = 1);
  TensorDict& add_(const at::Scalar& other);
  TensorDict& sub_(const TensorDict& other, const at::Scalar& alpha = 1);
  TensorDict& sub_(const at::Scalar& other);
  TensorDict& mul_(const TensorDict& other);
  TensorDict& mul_(const at::Scalar& other);
  TensorDict& div_(const TensorDict& other);
  TensorDict& div_(const at::Scalar& other);
  TensorDict& pow_(const TensorDict& exponent);
  TensorDict& pow_(const at::Scalar& exponent);
  TensorDict operator-() const { return neg(); }

  // Unary math, leaf-wise, out of place and in place.
  TensorDict abs() const;
  TensorDict neg() const;
  TensorDict exp() const;
  TensorDict log() const;
  TensorDict sqrt() const;
  TensorDict sigmoid() const;
  TensorDict tanh() const;
  TensorDict reciprocal() const;
  TensorDict sign() const;
  TensorDict floor() const;
  TensorDict ceil() const;
  TensorDict round() const;
  TensorDict& abs_();
  TensorDict& neg_();
  TensorDict& exp_();
  TensorDict& log_();
  TensorDict& sqrt_();
  TensorDict& sigmoid_();
  TensorDict& tanh_();
  TensorDict& reciprocal_();
  TensorDict& floor_();
  TensorDict& ceil_();
  TensorDict& round_();
  // Clamps every leaf to [min, max] (either bound may be absent; at least one is needed).
  TensorDict clamp(const std::optional<at::Scalar>& min,
                   const std::optional<at::Scalar>& max = std::nullopt) const;
  TensorDict& clamp_(const std::optional<at::Scalar>& min,
                     const std::optional<at::Scalar>& max = std::nullopt);

  // Comparisons: a TensorDict of bool tensors (the operand is matched by key as above).
  TensorDict eq(const at::Scalar& other) const;
  TensorDict ne(const at::Scalar& other) const;
  TensorDict lt(const TensorDict& other) const;
  TensorDict lt(const at::Scalar& other) const;
  TensorDict le(const TensorDict& other) const;
  TensorDict le(const at::Scalar& other) const;
  TensorDict gt(const TensorDict& other) const;
  TensorDict gt(const at::Scalar& other) const;
  TensorDict ge(const TensorDict& other) const;
  TensorDict ge(const at::Scalar& other) const;

  // Reductions. Without dims each leaf is reduced over all its elements (result batch size []);
  // with dims (batch dims; negative count from the end) each leaf is reduced over those dims
  // only (result batch size without them, or with 1s when keepdim). Dims out of range throw
  // IndexError naming the batch size; LibTorch's own errors (e.g. mean of an integer leaf)
  // come with the key.
  //   td::TensorDict per_key_total = td.sum();
  //   td::TensorDict over_time = td.mean({0});
  TensorDict sum(const ReduceOptions& options = {}) const;
  TensorDict sum(at::IntArrayRef dims, bool keepdim = false) const;
  TensorDict mean(const ReduceOptions& options = {}) const;
  TensorDict mean(at::IntArrayRef dims, bool keepdim = false) const;
  TensorDict std(const ReduceOptions& options = {}) const;
  TensorDict std(at::IntArrayRef dims, bool keepdim = false) const;
  TensorDict var(const ReduceOptions& options = {}) const;
  TensorDict var(at::IntArrayRef dims, bool keepdim = false) const;
  // Values only (amin / amax over the dims).
  TensorDict min(const ReduceOptions& options = {}) const;
  TensorDict min(at::IntArrayRef dims, bool keepdim = false) const;
  TensorDict max(const ReduceOptions& options = {}) const;
  TensorDict max(at::IntArrayRef dims, bool keepdim = false) const;
  // The p-norm of every leaf (at::_foreach_norm when reducing everything).
  TensorDict norm(const at::Scalar& p = 2, const ReduceOptions& options = {}) const;
  // Bool TensorDicts: any / all over the given batch dims (all() / any() without arguments,
  // above, reduce everything to one bool).
  TensorDict any(at::IntArrayRef dims, bool keepdim = false) const;
  TensorDict all(at::IntArrayRef dims, bool keepdim = false) const;

  // ---- batch indexing (td/core/indexing.cc) -----------------------------------------------
  // See NOTE [ Batch indexing ] in td/core/indexing.cc. Indices address the batch dims only, with
  // exactly torch's semantics for a tensor of shape batch_size(): integers (negative count from
  // the end), Slice(start, stop, step), Ellipsis, None, bool masks over one or several leading
  // dims, long index tensors, and mixes of these.

  // A TensorDict holding every leaf indexed the same way; its batch size is what indexing a
  // tensor of shape batch_size() gives. Integers, slices, None and Ellipsis give views (writing
  // into a result's tensors writes into this TensorDict), as torch's basic indexing does.
  // Non-tensor entries are carried. Throws IndexError for out-of-range integers or index tensors,
  // masks whose shape differs from the batch dims they cover, too many indices or several
  // Ellipsis, naming the index and the batch size.
  //   using namespace at::indexing;
  //   td::TensorDict row = td.index({0});                       // batch [3, 4] -> [4]
  //   td::TensorDict head = td.index({Ellipsis, Slice(None, 2)});  // -> [3, 2]
  //   td::TensorDict picked = td.index({mask});                  // mask: bool [3, 4] -> [n]
  TensorDict index(at::ArrayRef<at::indexing::TensorIndex> indices) const;
  TensorDict index(std::initializer_list<at::indexing::TensorIndex> indices) const;

  // Writes `value` into every leaf at `indices` (same rules as index()). For each leaf of
  // `value` (nested ones included) the leaf under the same key is written; keys this TensorDict
  // lacks are created first as zero tensors of shape batch_size() + the value's feature shape
  // (the value's shape after its own batch dims), with the value's dtype, on device() (or the
  // value's device) -- lazy preallocation:
  //   td::TensorDict data({}, {N});
  //   for (int64_t i = 0; i < N; ++i) data.index_put_({i}, foo());   // any order of i
  // Values are cast to the target's dtype and device and broadcast to the indexed shape.
  // Everything is checked before anything is written or created: throws IndexError for bad
  // indices, ValueError when a value cannot be broadcast to the indexed shape (naming the key and
  // both shapes) or when non-tensor data differs, TypeError when an entry is a tensor on one side
  // and a TensorDict on the other, LockedError when a key would be created in a locked
  // TensorDict.
  TensorDict& index_put_(at::ArrayRef<at::indexing::TensorIndex> indices, const TensorDict& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const TensorDict& value);
  // Writes `value` (broadcast) into every tensor leaf at `indices`.
  //   td.index_put_({Slice(0, 2)}, at::zeros({}));
  TensorDict& index_put_(at::ArrayRef<at::indexing::TensorIndex> indices, const at::Tensor& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const at::Tensor& value);
  // Fills every tensor leaf at `indices` with `value`.
  //   td.index_put_({mask}, 0);
  TensorDict& index_put_(at::ArrayRef<at::indexing::TensorIndex> indices, const at::Scalar& value);
  TensorDict& index_put_(std::initializer_list<at::indexing::TensorIndex> indices,
                         const at::Scalar& value);

  // ---- shape operations on the batch dims (td/core/shape_ops.cc) --------------------------
  // Each acts on the batch dims of every leaf at once (feature dims are untouched; nested
  // TensorDicts keep their extra batch dims after the new ones) and carries non-tensor entries.
  // Dims are batch dims: negative dims count from the end of batch_size(); an out-of-range dim
  // throws IndexError naming the batch size and the valid range. The result shares memory with
  // this TensorDict exactly when torch's op returns views.

  // Batch dims viewed as `shape` (one dim may be -1). Throws ValueError when the number of
  // elements differs; c10::Error (with the key) when a leaf cannot be viewed.
  //   td.view({-1});   // [3, 4] -> [12]
  TensorDict view(at::IntArrayRef shape) const;
  // Like view(), copying leaves that cannot be viewed.
  TensorDict reshape(at::IntArrayRef shape) const;
  // Removes every batch dim of size 1, or only `dim` (a no-op when its size is not 1).
  TensorDict squeeze(std::optional<int64_t> dim = std::nullopt) const;
  // Inserts a batch dim of size 1 at `dim` (in [-batch_dims()-1, batch_dims()]).
  TensorDict unsqueeze(int64_t dim) const;
  // Reorders the batch dims; `dims` is a permutation of 0..batch_dims()-1 (negative allowed).
  // Throws ValueError otherwise.
  TensorDict permute(at::IntArrayRef dims) const;
  TensorDict transpose(int64_t dim0, int64_t dim1) const;
  // Broadcasts the batch dims to `shape` (new leading dims allowed, -1 keeps a dim), as
  // Tensor::expand. Throws ValueError naming both sizes when a dim of size != 1 would change.
  //   td::TensorDict big = td.expand({10, 3, 4});
  TensorDict expand(at::IntArrayRef shape) const;
  // Flattens batch dims start_dim..end_dim into one.
  TensorDict flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // Splits batch dim `dim` into `sizes` (one may be -1). Throws ValueError when the product
  // differs from the dim's size.
  TensorDict unflatten(int64_t dim, at::IntArrayRef sizes) const;
  // Pieces of `split_size` along batch dim `dim` (the last may be smaller).
  std::vector<TensorDict> split(int64_t split_size, int64_t dim = 0) const;
  // Pieces of the given sizes, which must sum to the dim's size (ValueError otherwise).
  std::vector<TensorDict> split(at::IntArrayRef split_sizes, int64_t dim = 0) const;
  // `chunks` pieces (or fewer) as Tensor::chunk.
  std::vector<TensorDict> chunk(int64_t chunks, int64_t dim = 0) const;
  // The slices along batch dim `dim` (views).
  //   for (const td::TensorDict& step : td.unbind(0)) ...
  std::vector<TensorDict> unbind(int64_t dim = 0) const;
  // Reverses the order along the given batch dims.
  TensorDict flip(at::IntArrayRef dims) const;
  // Rolls along the given batch dims (one shift per dim).
  TensorDict roll(at::IntArrayRef shifts, at::IntArrayRef dims) const;
  // Entries start..start+length-1 along batch dim `dim` (a view). Throws IndexError when out of
  // range.
  TensorDict narrow(int64_t dim, int64_t start, int64_t length) const;
  // Tiles the batch dims (`repeats` has at least batch_dims() entries; extra ones add leading
  // dims), as Tensor::repeat on the batch dims.
  TensorDict repeat(at::IntArrayRef repeats) const;
  // Repeats each element along batch dim `dim` (or along the flattened batch when nullopt).
  TensorDict repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  TensorDict repeat_interleave(const at::Tensor& repeats,
                               std::optional<int64_t> dim = std::nullopt) const;
  // torch.gather along batch dim `dim`: `index` is a long tensor with batch_dims() dims (the
  // result's batch size); each leaf is gathered with `index` expanded over its feature dims.
  TensorDict gather(int64_t dim, const at::Tensor& index) const;
  // Elements from this TensorDict where `condition` is true, from `other` elsewhere. The
  // condition covers leading batch dims (broadcast like a bool mask over the batch: it is
  // expanded over the remaining dims of each leaf). `other` must have the same keys.
  TensorDict where(const at::Tensor& condition, const TensorDict& other) const;
  TensorDict where(const at::Tensor& condition, const at::Scalar& other) const;
  // Every leaf with `value` where `mask` (over leading batch dims, as for where()) is true.
  TensorDict masked_fill(const at::Tensor& mask, const at::Scalar& value) const;
  TensorDict& masked_fill_(const at::Tensor& mask, const at::Scalar& value);
  // The elements where `mask` (bool, shaped like the leading batch dims) is true; the same as
  // index({mask}): batch [number of true elements, remaining batch dims...].
  TensorDict masked_select(const at::Tensor& mask) const;
  // Pads the batch dims with `value`: `pad` holds (before, after) pairs starting from the FIRST
  // batch dim (negative values crop), as tensordict.pad in Python.
  //   td.pad({1, 2});   // [3, 4] -> [6, 4]
  TensorDict pad(at::IntArrayRef pad, const at::Scalar& value = 0) const;

  // ---- memory-mapped and shared-memory storage (td/backends/memmap, td/backends/shared_memory)
  // The work is done by the backends: link //td/backends/memmap (memmap*, load_memmap) and
  // //td/backends/shared_memory (share_memory_, is_shared). Without them these members still
  // link; memmap*, load_memmap and share_memory_ then throw c10::Error naming the target to add,
  // and is_memmap / is_shared answer false (NOTE [ Backend entry points ] in
  // td/core/backend_hooks.h). Format, guarantees and numbers: docs/memmap.md, NOTE [ Memmap
  // directory format ] and NOTE [ Crash-safe memmap writes ].

  // Writes every leaf to `prefix` in the directory format Python tensordict uses and returns a
  // new, locked TensorDict on the "memmap" backend whose tensors map those files. The write is
  // crash-safe: it goes to a temporary sibling directory that is renamed into place, so `prefix`
  // holds either the previous content or the complete new one. Throws ValueError for a key that
  // cannot be stored (reserved name, invalid UTF-8, two keys mapping to one file name), an
  // existing prefix that may not be replaced (see MemmapOptions::exists_ok), or an already
  // memory-mapped leaf without copy_existing; MemmapError when a file operation fails.
  //   td::TensorDict saved = params.memmap("/ckpt", td::MemmapOptions().num_threads(8));
  TensorDict memmap(const std::string& prefix, const MemmapOptions& options = {}) const;
  // Like memmap(), then replaces this TensorDict's tensors by the memory-mapped ones (in place:
  // every handle sees them), moves it to the CPU and locks it. Throws as memmap() does, and
  // ValueError for a TensorDict already on the memmap backend at another prefix (use memmap()).
  TensorDict& memmap_(const std::string& prefix, const MemmapOptions& options = {});
  // The same structure, dtypes and shapes at `prefix`, with zero-filled files that are created
  // sparse: nothing is allocated in RAM or written, so a dataset larger than memory can be
  // preallocated (expanded leaves are fine). Non-tensor data is copied. Throws as memmap().
  //   auto data = td::TensorDict({{"images", at::zeros({128, 128, 3}, at::kByte)}}, {})
  //                   .expand({1000000}).memmap_like("/data/ds");
  TensorDict memmap_like(const std::string& prefix, const MemmapOptions& options = {}) const;
  // Opens a memmap directory (written by memmap() or by Python tensordict) as a locked
  // TensorDict on the "memmap" backend; `options.sub_path` opens one sub-TensorDict only,
  // `options.mode` read-write or read-only. Everything is validated before use: MemmapError
  // names the file and the problem (missing or unexpected file, size that does not match
  // shape x dtype, malformed JSON, unknown dtype, wrong JSON types, symlinks).
  //   auto params = td::TensorDict::load_memmap("/ckpt", td::LoadMemmapOptions().sub_path("0"));
  static TensorDict load_memmap(const std::string& prefix, const LoadMemmapOptions& options = {});
  // True for a TensorDict on the "memmap" backend, or one whose every leaf (at least one) is a
  // memory-mapped file (after memmap_()).
  bool is_memmap() const;
  // Moves every leaf into one block of shared memory (in place: every handle sees it) and locks
  // the TensorDict, as Python's share_memory_ does. A child created by fork() shares the memory;
  // another process attaches with td::AttachSharedMemory(td::SharedMemoryHandle(td))
  // (td/backends/shared_memory/shared_memory.h). The memory has no name on any file system and
  // is freed when the last process using it drops it. Leaves already in shared memory stay where
  // they are. Throws ValueError for a memory-mapped TensorDict (the two are exclusive) or a leaf
  // that is not a strided tensor.
  //   td.share_memory_();
  //   if (fork() == 0) { td.get("x").add_(1); _exit(0); }   // the parent sees the change
  TensorDict& share_memory_();
  // True for a TensorDict on the "shared_memory" backend, or one whose every leaf (at least
  // one) lives in shared memory (after share_memory_()).
  bool is_shared() const;

  // ---- comparison ------------------------------------------------------------------------
  // Entry-wise `==`: a TensorDict of bool tensors with the same keys. Throws KeyError when the
  // key sets differ (naming the keys only on one side).
  TensorDict operator==(const TensorDict& other) const;
  TensorDict operator!=(const TensorDict& other) const;
  // True when every (any) element of every leaf is true (nonzero); empty leaves count as all.
  bool all() const;
  bool any() const;

  // ---- printing and interop --------------------------------------------------------------
  // Python tensordict's layout: TensorDict(\n    fields={...},\n    batch_size=..., ...).
  std::string repr() const;
  // A nested c10::Dict<std::string, IValue> (tensors, sub-dicts, and non-tensor data as
  // strings/numbers/bools): `torch::pickle_save(td.to_ivalue())` opens in Python with
  // torch.load as a nested dict of tensors. Each level also holds "__batch_size" (list of ints)
  // and "__device" (string or None), as upstream's legacy state dicts do.
  c10::IValue to_ivalue() const;
  // Inverse of to_ivalue(): a (nested) dict of tensors / dicts / strings / numbers. With an
  // empty `batch_size`, each level takes the "__batch_size" / "__device" to_ivalue recorded
  // (batch [] without them); a given `batch_size` is used for every level, as before.
  //   td::TensorDict back = td::TensorDict::from_ivalue(td.to_ivalue());   // same batch size
  static TensorDict from_ivalue(const c10::IValue& value, at::IntArrayRef batch_size = {},
                                std::optional<at::Device> device = std::nullopt);
  // Flat "a.b.c" -> tensor entries, like Module::named_parameters(). Non-tensor data is skipped.
  torch::OrderedDict<std::string, at::Tensor> state_dict(std::string_view separator = ".") const;
  // Writes the entries of a state dict into this TensorDict in place (set_) — or, for keys that
  // do not exist yet, with set() unless `strict`. With `strict`, missing and unexpected keys
  // are an error listing them, checked before anything is written.
  TensorDict& load_state_dict(const torch::OrderedDict<std::string, at::Tensor>& state,
                              bool strict = true, std::string_view separator = ".");

  // ---- more leaf-wise math, gradients, new_*, shape helpers: td/core/pointwise_members.inc --
#include "td/core/pointwise_members.inc"  // IWYU pragma: export
  // ---- dict verbs: set/update options, *_at_, popitem, setdefault, ...: td/core/dict_members.inc
#include "td/core/dict_members.inc"  // IWYU pragma: export

 private:
  // The TensorDict holding the entry `key` (creating intermediate levels when `create`); the
  // returned string_view points into `key`.
  std::pair<TensorDict, std::string_view> parent_of(const NestedKey& key, bool create) const;
  [[noreturn]] void fail_missing(const NestedKey& key, size_t depth) const;
  // get() of a one-part key (inline callers pass literals, whose length is then known).
  at::Tensor get_flat(std::string_view key) const;
  // set() of a one-part key.
  TensorDict& set_flat(std::string_view key, Value&& value);
  // Writes a validated `value` under `key` of this level (lock and backend rules).
  void set_at_level(std::string_view key, Value&& value, const internal::KeyForErrors& full_key);
  // Checks `value` against this level (batch size, kind, nesting) and puts it in the form it is
  // stored in (moved to the device, a plain dict made a TensorDict), in place.
  void validate(Value& value, const internal::KeyForErrors& full_key) const;

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
  const nlohmann::json& non_tensor() const;
  at::Tensor& mutable_tensor() {
    if (!is_tensor()) fail_kind("a Tensor");
    return *std::get_if<0>(&v_);
  }
  const Items& plain_dict() const { return *std::get<3>(v_); }

  // "Tensor", "TensorDict", "NonTensorData".
  std::string_view kind() const;

 private:
  [[noreturn]] void fail_kind(const char* expected) const;

  std::variant<at::Tensor, TensorDict, NonTensorData, std::shared_ptr<const Items>> v_;
};

std::ostream& operator<<(std::ostream& os, const TensorDict& td);

// Inline so that a literal key's length is known where it is written.
inline TensorDict& TensorDict::set(const char* key, Value value) {
  return set_flat(key, std::move(value));
}

}  // namespace td

// The free functions over TensorDicts, declared once TensorDict is complete (so that overload
// resolution elsewhere in this header never meets them with an incomplete TensorDict).
#include "td/core/comparison.h"  // IWYU pragma: export
#include "td/core/operators.h"   // IWYU pragma: export
#include "td/core/stack.h"       // IWYU pragma: export  (td::stack, td::cat, td::unbind)
#include "td/core/pointwise_ops.h"  // IWYU pragma: export  (td::Operand, %, &, |, ^, ~)
