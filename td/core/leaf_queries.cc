// Questions about the leaves of a TensorDict: is_floating_point, is_contiguous, is_cpu / is_cuda /
// is_meta, requires_grad, dtype, data_ptr, bytes, param_count, depth, get_item_shape and
// entry_class.
// Declared in td/core/ops.def. Dtypes, kinds and shapes come from the storages' metadata
// (Storage::meta, td/core/storage.h), so no lazy entry is computed for them; the questions that
// need the tensors themselves walk them as NOTE [ Leaf maps ] (td/core/internal/leaves.h) does.
#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;

// fn(metadata) for every tensor entry of `td`, nested ones included, from the storages'
// metadata; stops early when fn returns false. Returns false when it stopped.
bool ForEachTensorMeta(const TensorDict& td, const std::function<bool(const EntryMeta&)>& fn) {
  const Storage& storage = td.storage();
  for (const std::string& key : storage.keys()) {
    const std::optional<EntryMeta> m = storage.meta(key);
    if (!m) continue;
    if (m->kind == EntryMeta::Kind::kTensorDict) {
      if (!ForEachTensorMeta(td.get_tensordict(key), fn)) return false;
    } else if (m->kind == EntryMeta::Kind::kTensor && !fn(*m)) {
      return false;
    }
  }
  return true;
}

// The tensor leaves of `td`; with `unique`, each tensor object once (Python's set of tensors:
// distinct views of one storage stay distinct).
std::vector<at::Tensor> Leaves(const TensorDict& td, bool unique) {
  LeafTree tree(td);
  if (!unique) return tree.leaves();
  std::vector<at::Tensor> out;
  absl::flat_hash_set<const c10::TensorImpl*> seen;
  for (const at::Tensor& t : tree.leaves()) {
    if (seen.insert(t.unsafeGetTensorImpl()).second) out.push_back(t);
  }
  return out;
}

// The level holding `key` and the metadata of its entry. KeyError naming the key (TypeError for
// a path through a tensor), as get() throws.
std::pair<TensorDict, EntryMeta> LevelMeta(const TensorDict& td, const KeyRef& key) {
  TensorDict level = td;
  if (key.is_nested()) {
    level = td.get_tensordict(NestedKey(std::vector<std::string>(key.begin(), key.end() - 1)));
  }
  std::optional<EntryMeta> m = level.storage().meta(key.back());
  if (!m) {
    (void)td.get_value(key);  // throws the KeyError naming the key and the keys that exist
    TD_FAIL(KeyError, "no entry ", key.repr());
  }
  return {level, std::move(*m)};
}

int64_t Bytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

}  // namespace

bool TensorDict::is_floating_point() const {
  return ForEachTensorMeta(*this, [](const EntryMeta& m) { return at::isFloatingType(m.dtype); });
}

bool TensorDict::is_contiguous() const {
  LeafTree tree(*this, /*stop_at_lazy=*/true);
  if (tree.has_lazy_level()) return false;
  return std::all_of(tree.leaves().begin(), tree.leaves().end(),
                     [](const at::Tensor& t) { return t.is_contiguous(); });
}

bool TensorDict::is_cpu() const { return device() && device()->is_cpu(); }
bool TensorDict::is_cuda() const { return device() && device()->is_cuda(); }
bool TensorDict::is_meta() const { return device() && device()->type() == at::kMeta; }

bool TensorDict::requires_grad() const {
  const std::vector<at::Tensor> leaves = Leaves(*this, /*unique=*/false);
  return std::any_of(leaves.begin(), leaves.end(),
                     [](const at::Tensor& t) { return t.requires_grad(); });
}

std::optional<at::ScalarType> TensorDict::dtype() const {
  std::optional<at::ScalarType> dtype;
  const bool one = ForEachTensorMeta(*this, [&](const EntryMeta& m) {
    if (dtype && *dtype != m.dtype) return false;
    dtype = m.dtype;
    return true;
  });
  return one ? dtype : std::nullopt;
}

TensorDict TensorDict::data_ptr(bool storage) const {
  const LeafTree probe(*this, /*stop_at_lazy=*/true);
  if (probe.has_lazy_level()) {
    const std::optional<NestedKey> key = probe.lazy_level_key();
    TD_FAIL(ValueError, "data_ptr(): ", key ? "the level " + key->repr() : std::string("the TensorDict"),
            " is on the ", probe.lazy_level().backend(),
            " backend, whose leaves are computed on read and have no address; call data_ptr() on "
            "the TensorDicts it is built from, or on to_dense()");
  }
  LeafTree tree(filter_non_tensor_data());
  std::vector<at::Tensor> out;
  out.reserve(tree.num_leaves());
  for (const at::Tensor& t : tree.leaves()) {
    const void* p = storage ? t.storage().data() : t.data_ptr();
    out.push_back(at::scalar_tensor(static_cast<int64_t>(reinterpret_cast<intptr_t>(p)),
                                    at::TensorOptions().dtype(at::kLong)));
  }
  return tree.Rebuild(std::move(out), {}, /*check=*/false, std::optional<at::Device>(at::kCPU),
                      /*nested_extra_dims=*/false);
}

int64_t TensorDict::bytes(bool count_duplicates) const {
  int64_t total = 0;
  for (const at::Tensor& t : Leaves(*this, !count_duplicates)) {
    total += Bytes(t);
    if (t.grad().defined()) total += Bytes(t.grad());
  }
  return total;
}

int64_t TensorDict::param_count(bool count_duplicates) const {
  int64_t total = 0;
  for (const at::Tensor& t : Leaves(*this, !count_duplicates)) total += t.numel();
  return total;
}

int64_t TensorDict::depth() const {
  int64_t depth = 0;
  for (const NestedKey& k : keys(KeysOptions().include_nested(true).leaves_only(true))) {
    depth = std::max(depth, static_cast<int64_t>(k.size()) - 1);
  }
  return depth;
}

std::vector<int64_t> TensorDict::get_item_shape(KeyRef key) const {
  const auto [level, m] = LevelMeta(*this, key);
  if (m.kind == EntryMeta::Kind::kNonTensor) return level.batch_size().vec();
  return std::vector<int64_t>(m.shape.begin(), m.shape.end());
}

std::string_view TensorDict::entry_class(KeyRef key) const {
  switch (LevelMeta(*this, key).second.kind) {
    case EntryMeta::Kind::kTensor:
      return "Tensor";
    case EntryMeta::Kind::kTensorDict:
      return "TensorDict";
    case EntryMeta::Kind::kNonTensor:
      break;
  }
  return "NonTensorData";
}

}  // namespace td
