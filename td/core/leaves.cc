#include "td/core/internal/leaves.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/names.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/storage.h"

namespace td {
namespace internal {

LeafTree::LeafTree(const TensorDict& td, bool stop_at_lazy, NonTensorMode mode)
    : stop_at_lazy_(stop_at_lazy), mode_(mode) {
  AddLevel(td, -1, -1);
}

namespace {

// Where a level's stand-ins live: its device, else its first tensor leaf's, else the CPU.
at::Device StandInDevice(const TensorDict& td, const std::vector<at::Tensor>& leaves,
                         size_t first_leaf) {
  if (td.device()) return *td.device();
  return first_leaf < leaves.size() ? leaves[first_leaf].device() : at::Device(at::kCPU);
}

}  // namespace

void LeafTree::AddLevel(const TensorDict& td, int64_t parent, int64_t parent_entry) {
  const Storage& s = td.storage();
  const int64_t me = static_cast<int64_t>(levels_.size());
  if (first_lazy_level_ < 0 && s.lazy() != nullptr) first_lazy_level_ = me;
  if (s.names() != nullptr) has_names_ = true;
  levels_.push_back(Level{td, parent, parent_entry, {}});
  if (stop_at_lazy_ && first_lazy_level_ >= 0) return;
  const size_t n = s.size();
  levels_[me].entries.reserve(n);
  if (parent < 0) {  // most leaves usually sit at the root: one allocation each
    leaves_.reserve(n);
  }
  const size_t first_leaf = leaves_.size();
  auto add = [&](std::string key, const Value& v) {
    const int64_t entry = static_cast<int64_t>(levels_[me].entries.size());
    if (v.is_tensor()) {
      levels_[me].entries.push_back(
          Entry{std::move(key), Kind::kTensor, static_cast<int64_t>(leaves_.size()), std::nullopt});
      leaves_.push_back(v.tensor());
      leaf_pos_.emplace_back(static_cast<int32_t>(me), static_cast<int32_t>(entry));
    } else if (v.is_tensordict()) {
      const int64_t child = static_cast<int64_t>(levels_.size());
      levels_[me].entries.push_back(Entry{std::move(key), Kind::kTensorDict, child, std::nullopt});
      AddLevel(v.tensordict(), me, entry);
    } else if (mode_ == NonTensorMode::kCombine ||
               (mode_ == NonTensorMode::kMove && v.non_tensor_data().is_stack())) {
      auto table = std::make_shared<StackTable>();
      leaves_.push_back(table->Add(v.non_tensor_data(), td.batch_size(),
                                   StandInDevice(td, leaves_, first_leaf)));
      levels_[me].entries.push_back(Entry{std::move(key), Kind::kStandIn,
                                          static_cast<int64_t>(leaves_.size()) - 1, std::nullopt,
                                          std::move(table)});
      leaf_pos_.emplace_back(static_cast<int32_t>(me), static_cast<int32_t>(entry));
    } else {
      levels_[me].entries.push_back(Entry{std::move(key), Kind::kOther, -1, v});
    }
  };
  if (const EntryList* held = s.held_entries()) {
    for (const auto& [key, v] : held->entries()) add(key, v);
    return;
  }
  std::optional<Value> holder;
  for (std::string& k : s.keys()) {
    const Value* v = FindEntry(s, k, &holder);
    if (v != nullptr) add(std::move(k), *v);
  }
}

NestedKey LeafTree::LevelKey(int64_t level, const std::string* last) const {
  NestedKey::Parts parts;
  if (last != nullptr) parts.push_back(*last);
  for (int64_t l = level; levels_[l].parent >= 0; l = levels_[l].parent) {
    parts.push_back(levels_[levels_[l].parent].entries[levels_[l].parent_entry].key);
  }
  std::reverse(parts.begin(), parts.end());
  return NestedKey(std::move(parts));
}

NestedKey LeafTree::key(size_t i) const {
  const auto [level, entry] = leaf_pos_[i];
  return LevelKey(level, &levels_[level].entries[entry].key);
}

at::IntArrayRef LeafTree::leaf_batch_size(size_t i) const {
  return levels_[leaf_pos_[i].first].td.batch_size();
}

void LeafTree::AlignLevel(int64_t level, const TensorDict& other, const AlignOptions& options,
                          std::vector<at::Tensor>* out, std::vector<NestedKey>* missing,
                          std::vector<NestedKey>* extra) const {
  const Storage& so = other.storage();
  const Level& lv = levels_[level];
  std::optional<Value> holder;
  // Fast path: TensorDicts built the same way list their keys in the same order.
  const EntryList* held = so.held_entries();
  const std::vector<std::pair<std::string, Value>>* same_order =
      held != nullptr ? &held->entries() : nullptr;
  for (size_t k = 0; k < lv.entries.size(); ++k) {
    const Entry& e = lv.entries[k];
    const Value* v = same_order != nullptr && k < same_order->size() &&
                             (*same_order)[k].first == e.key
                         ? &(*same_order)[k].second
                         : FindEntry(so, e.key, &holder);
    if (v == nullptr) {
      if (e.kind == Kind::kTensor && options.default_value()) {
        (*out)[e.index] = *options.default_value();
      } else if (e.kind == Kind::kTensorDict && options.default_value()) {
        // Every leaf below gets the default.
        std::vector<int64_t> stack = {e.index};
        while (!stack.empty()) {
          const int64_t l = stack.back();
          stack.pop_back();
          for (const Entry& sub : levels_[l].entries) {
            if (sub.kind == Kind::kTensor) (*out)[sub.index] = *options.default_value();
            if (sub.kind == Kind::kTensorDict) stack.push_back(sub.index);
          }
        }
      } else if (e.kind != Kind::kOther) {
        missing->push_back(LevelKey(level, &e.key));
      }
      continue;
    }
    switch (e.kind) {
      case Kind::kTensor:
        if (!v->is_tensor()) {
          TD_FAIL(TypeError, "key ", LevelKey(level, &e.key).repr(), " is a Tensor in the first ",
                          "TensorDict but a ", v->kind(), " in ", options.Describe());
        }
        (*out)[e.index] = v->tensor();
        break;
      case Kind::kTensorDict:
        if (!v->is_tensordict()) {
          TD_FAIL(TypeError, "key ", LevelKey(level, &e.key).repr(),
                          " is a TensorDict in the first TensorDict but a ", v->kind(), " in ",
                          options.Describe());
        }
        AlignLevel(e.index, v->tensordict(), options, out, missing, extra);
        break;
      case Kind::kStandIn:
        if (!v->is_non_tensor()) {
          TD_FAIL(TypeError, "key ", LevelKey(level, &e.key).repr(),
                  " is non-tensor data in the first TensorDict but a ", v->kind(), " in ",
                  options.Describe());
        }
        if (v->non_tensor_data().is_stack()) {
          CheckStackShape(v->non_tensor(), other.batch_size(), LevelKey(level, &e.key));
        }
        (*out)[e.index] = e.table->Add(v->non_tensor_data(), other.batch_size(),
                                       leaves_[e.index].device());
        break;
      case Kind::kOther:  // carried as it is (kCombine makes every non-tensor a kStandIn)
        break;
    }
  }
  if (options.strict_keys() && so.size() != lv.entries.size()) {
    for (const std::string& k : so.keys()) {
      const bool known = std::any_of(lv.entries.begin(), lv.entries.end(),
                                     [&](const Entry& e) { return e.key == k; });
      if (!known) extra->push_back(LevelKey(level, &k));
    }
  }
}

std::vector<at::Tensor> LeafTree::Align(const TensorDict& other,
                                        const AlignOptions& options) const {
  std::vector<at::Tensor> out(leaves_.size());
  std::vector<NestedKey> missing, extra;
  AlignLevel(0, other, options, &out, &missing, &extra);
  if (!missing.empty() || !extra.empty()) {
    if (options.strict_keys()) {
      TD_FAIL(KeyError, "the TensorDicts have different keys: ", KeysRepr(missing),
                     " only in the first TensorDict, ", KeysRepr(extra), " only in ",
                     options.Describe());
    }
    TD_FAIL(KeyError, "keys ", KeysRepr(missing), " of the first TensorDict are missing in ",
                   options.Describe(), " (pass a default value to use for missing keys)");
  }
  return out;
}

// NOTE [ Rebuilt batch sizes ]
// A nested level's batch size starts with its parent's and may add dims of its own ("extra"
// dims). Operations act on the root's batch dims only, so in the result every level keeps its
// extra dims after its parent's new batch size: a level whose batch size was
// `parent_old + extra` gets `parent_new + extra`. Counting from the parent, not the root, is
// what keeps a level two or more below the root from getting its ancestors' extra dims twice.
// RebuildLevel then checks each level it builds against its leaves: each starts with the level's
// batch size (a child's batch size starts with it by construction, and the child checks its own
// leaves). With `check`, a leaf that does not is the caller's output of the wrong shape
// (BatchSizeError naming the key); without it the caller promised the shapes, so any violation
// is an internal error naming the level, the leaf and both shapes, thrown instead of returning a
// TensorDict whose batch size does not fit its entries.
namespace {

// `level`: "the root" or "level ('a', 'b')".
[[noreturn]] void FailLevelInvariant(const std::string& level, const NestedKey& leaf,
                                     at::IntArrayRef leaf_shape, at::IntArrayRef batch) {
  TD_FAIL(c10::Error, "internal error (a tensordict bug) in LeafTree::Rebuild: ", level,
          " of the result has batch size ", SizeRepr(batch), " but its leaf ", leaf.repr(),
          " has shape ", SizeRepr(leaf_shape), ", which does not start with it");
}

}  // namespace

TensorDict LeafTree::RebuildLevel(int64_t level, std::vector<at::Tensor>& outputs,
                                  std::vector<int64_t> batch, int64_t root_old_dims, bool check,
                                  const std::optional<at::Device>& device,
                                  bool extra_dims, const DimOrigins* origins) const {
  const Level& lv = levels_[level];
  const int64_t old_dims = lv.td.batch_dims();
  auto level_repr = [&] {
    return level == 0 ? std::string("the root") : "level " + LevelKey(level, nullptr).repr();
  };
  std::vector<std::pair<std::string, Value>> entries;
  entries.reserve(lv.entries.size());
  for (const Entry& e : lv.entries) {
    switch (e.kind) {
      case Kind::kTensor: {
        at::Tensor& t = outputs[e.index];
        if (!t.defined()) break;
        if (!TensorStartsWith(t, batch)) {
          if (check) {
            TD_FAIL(BatchSizeError, "the result for key ", LevelKey(level, &e.key).repr(),
                                 " has shape ", SizeRepr(ShapeOf(t)),
                                 ", which does not start with the batch size ", SizeRepr(batch));
          }
          FailLevelInvariant(level_repr(), LevelKey(level, &e.key), ShapeOf(t), batch);
        }
        if (check && device && t.device() != *device) t = t.to(*device);
        entries.emplace_back(e.key, std::move(t));
        break;
      }
      case Kind::kTensorDict: {
        // NOTE [ Rebuilt batch sizes ]: this level's new batch size, then the child's own dims.
        at::IntArrayRef old = levels_[e.index].td.batch_size();
        std::vector<int64_t> sub_batch = batch;
        if (extra_dims && static_cast<int64_t>(old.size()) > old_dims) {
          sub_batch.insert(sub_batch.end(), old.begin() + old_dims, old.end());
        }
        std::optional<at::Device> sub_device = levels_[e.index].td.device();
        if (device != lv.td.device()) sub_device = device;
        entries.emplace_back(e.key, RebuildLevel(e.index, outputs, std::move(sub_batch),
                                                 root_old_dims, check, sub_device, extra_dims,
                                                 origins));
        break;
      }
      case Kind::kOther: {
        const NonTensorData& d = e.other->non_tensor_data();
        if (d.is_stack() && at::IntArrayRef(batch) != lv.td.batch_size()) {
          FailStackDoesNotFit(LevelKey(level, &e.key), lv.td.batch_size(), batch);
        }
        entries.emplace_back(e.key, *e.other);
        break;
      }
      case Kind::kStandIn: {
        const at::Tensor& t = outputs[e.index];
        if (!t.defined()) break;
        if (t.sizes() != at::IntArrayRef(batch)) {
          FailLevelInvariant(level_repr(), LevelKey(level, &e.key), ShapeOf(t), batch);
        }
        entries.emplace_back(e.key, e.table->Gather(t));
        break;
      }
    }
  }
  std::shared_ptr<const DimNames> names;
  if (has_names_ && lv.td.storage().names() != nullptr) {
    names = MapNames(*lv.td.storage().names(), origins, root_old_dims,
                     extra_dims ? std::max<int64_t>(old_dims - root_old_dims, 0) : 0);
  }
  // Made last, so that it can take `batch` over.
  std::shared_ptr<Storage> storage = MakeDenseStorage(std::move(batch), device);
  storage->append_new(std::move(entries));
  if (names) storage->set_names(std::move(names));
  return TensorDict(std::move(storage));
}

TensorDict LeafTree::Rebuild(std::vector<at::Tensor> outputs, at::IntArrayRef batch_size,
                             bool check, std::optional<std::optional<at::Device>> device,
                             bool nested_extra_dims, std::optional<DimOriginsFn> origins) const {
  TORCH_INTERNAL_ASSERT(outputs.size() == leaves_.size(), "Rebuild: ", outputs.size(),
                        " outputs for ", leaves_.size(), " leaves");
  const std::optional<at::Device> dev = device ? *device : root().device();
  // NOTE [ Dim names ] (td/core/names.cc): where every operation's result gets its names.
  DimOrigins map;
  const DimOrigins* map_ptr = nullptr;
  if (has_names_) {
    const int64_t old_dims = root().batch_dims();
    if (origins) {
      map = (*origins)();
      TORCH_INTERNAL_ASSERT(map.size() == batch_size.size(), "Rebuild: ", map.size(),
                            " dim origins for batch size ", batch_size);
      map_ptr = &map;
    } else if (static_cast<int64_t>(batch_size.size()) == old_dims) {
      for (int64_t i = 0; i < old_dims; ++i) map.push_back(i);
      map_ptr = &map;
    } else {
      map.assign(batch_size.size(), -1);
      map_ptr = &map;
    }
  }
  return RebuildLevel(0, outputs, batch_size.vec(), root().batch_dims(), check, dev,
                      nested_extra_dims, map_ptr);
}

void RethrowWithKey(const NestedKey& key, const char* what) {
  try {
    throw;
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("while ", what, " key ", key.repr()));
    throw;
  } catch (const std::exception& e) {
    TD_FAIL(c10::Error, e.what(), "\n(while ", what, " key ", key.repr(), ")");
  }
}

std::vector<at::Tensor> MapEach(const LeafTree& tree, const IndexedLeafFn& fn, const char* what,
                                const parallel::ParallelOptions& parallel) {
  const std::vector<at::Tensor>& leaves = tree.leaves();
  const int64_t n = static_cast<int64_t>(leaves.size());
  int threads = 1;
  if (n > 1 && !(parallel.parallel().has_value() && !*parallel.parallel())) {
    int64_t numel = 0;
    bool cpu = true;
    for (const at::Tensor& leaf : leaves) {
      numel += leaf.numel();
      cpu = cpu && leaf.device().is_cpu();
    }
    // Accelerator leaves stay serial unless asked: the current stream is per thread, and the
    // work is queued on the device anyway (NOTE [ Thread policy ], point 4).
    if (cpu || parallel.parallel().has_value()) threads = parallel::plan_threads(n, numel, parallel);
  }
  std::vector<at::Tensor> out(leaves.size());
  parallel::parallel_for(n, threads, [&](int64_t i) {
    try {
      out[i] = fn(i, leaves[i]);
    } catch (...) {
      RethrowWithKey(tree.key(i), what);
    }
  });
  return out;
}

std::vector<std::vector<at::Tensor>> MapEachMulti(const LeafTree& tree, size_t num_outputs,
                                                  const IndexedMultiLeafFn& fn,
                                                  const char* what) {
  const std::vector<at::Tensor>& leaves = tree.leaves();
  std::vector<std::vector<at::Tensor>> out(num_outputs, std::vector<at::Tensor>(leaves.size()));
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::vector<at::Tensor> pieces;
    try {
      pieces = fn(i, leaves[i]);
    } catch (...) {
      RethrowWithKey(tree.key(i), what);
    }
    TORCH_INTERNAL_ASSERT(pieces.size() == num_outputs, what, " key ", tree.key(i).repr(),
                          " gave ", pieces.size(), " pieces, expected ", num_outputs);
    for (size_t k = 0; k < num_outputs; ++k) out[k][i] = std::move(pieces[k]);
  }
  return out;
}

bool IsBasicIndex(at::ArrayRef<at::indexing::TensorIndex> indices) {
  for (const at::indexing::TensorIndex& index : indices) {
    if (!index.is_integer() && !index.is_slice() && !index.is_none()) return false;
  }
  return true;
}

at::Tensor IndexBasic(const at::Tensor& leaf, at::ArrayRef<at::indexing::TensorIndex> indices) {
  at::Tensor r = leaf;
  int64_t dim = 0;
  for (const at::indexing::TensorIndex& index : indices) {
    if (index.is_integer()) {
      r = r.select(dim, AsInt(index.integer()));
    } else if (index.is_none()) {
      r = r.unsqueeze(dim++);
    } else {
      const auto& s = index.slice();
      const int64_t start = AsInt(s.start());
      const int64_t stop = AsInt(s.stop());
      const int64_t step = AsInt(s.step());
      if (!(start == 0 && step == 1 && stop >= r.size(dim))) r = r.slice(dim, start, stop, step);
      ++dim;
    }
  }
  return r;
}

int64_t WrapBatchDim(int64_t dim, int64_t ndim, at::IntArrayRef batch_size, const char* op) {
  if (dim < -ndim || dim >= ndim || ndim == 0) {
    TD_FAIL(IndexError, op, ": dimension ", dim, " is out of range for a TensorDict with batch size ",
                     SizeRepr(batch_size), " (expected a dim in [", -ndim, ", ", ndim - 1, "])");
  }
  return dim < 0 ? dim + ndim : dim;
}

std::vector<int64_t> WrapBatchDims(const TensorDict& td, at::IntArrayRef dims, const char* op) {
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    const int64_t w = WrapBatchDim(d, td.batch_dims(), td.batch_size(), op);
    if (std::find(ds.begin(), ds.end(), w) != ds.end()) {
      TD_FAIL(ValueError, op, ": dim ", d, " appears twice in ", dims);
    }
    ds.push_back(w);
  }
  return ds;
}

}  // namespace internal
}  // namespace td
