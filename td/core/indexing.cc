// Batch indexing: TensorDict::index and TensorDict::index_put_ (with lazy preallocation).
//
// NOTE [ Batch indexing ]
// An index list addresses the batch dims only, with torch's semantics for a tensor of shape
// batch_size(). Before any leaf is touched the list is read once (ExpandBatchIndex, in
// internal/batch_index.h: the one reading the lazy backends use too) and normalised
// (NormalizeIndex):
//   - the Ellipsis is replaced by as many full slices as the batch dims it stands for (a leaf has
//     more dims than the batch, so a leaf-level Ellipsis would cover feature dims too);
//   - integers are checked against their batch dim, masks against the batch dims they cover,
//     and too many indices are rejected, with errors naming the batch size;
//   - each bool (or uint8) mask of k >= 1 dims becomes its k long index tensors (mask.nonzero()),
//     which is what torch does internally for every tensor it indexes -- done here once instead
//     of once per leaf.
// The normalised list then applies to every leaf unchanged (it only covers leading dims). The
// result's batch size is read from the first output leaf (its dims minus the leaf's unchanged
// feature dims); a TensorDict without tensor leaves indexes a zero-stride probe tensor of shape
// batch_size() instead, which also checks index tensors' bounds. Long index tensors' bounds are
// otherwise checked by the leaves' own kernels (the error names the key).
// index_put_ validates everything (index, broadcastable shapes, kinds, lock) before creating or
// writing anything, so a failing call changes nothing.
#include <ATen/ATen.h>

#include <algorithm>
#include <type_traits>

#include "td/core/dtype.h"
#include "td/core/internal/batch_index.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using at::indexing::TensorIndex;
using internal::ExpandBatchIndex;
using internal::IsMask;
using internal::LeafTree;

struct NormalizedIndex {
  std::vector<TensorIndex> indices;
  bool advanced = false;
};

// See NOTE [ Batch indexing ]: the caller's items of `ex` (no appended full slices), each mask of
// k >= 1 dims replaced by its k long index tensors.
NormalizedIndex NormalizeIndex(internal::BatchIndex ex) {
  NormalizedIndex out;
  out.advanced = ex.has_tensor || ex.has_boolean;
  out.indices.reserve(ex.given);
  for (size_t i = 0; i < ex.given; ++i) {
    TensorIndex& index = ex.items[i].index;
    if (index.is_tensor() && IsMask(index.tensor()) && index.tensor().dim() > 0) {
      const at::Tensor nz = at::nonzero(index.tensor());  // [n, k]
      for (int64_t j = 0; j < nz.size(1); ++j) out.indices.emplace_back(nz.select(1, j));
    } else {
      out.indices.push_back(std::move(index));
    }
  }
  // Nothing left (an Ellipsis over batch size []): the whole leaf, which LibTorch spells
  // {Ellipsis} (it refuses an empty index list).
  if (out.indices.empty()) out.indices.emplace_back(at::indexing::Ellipsis);
  return out;
}

// The batch size `indices` give for batch `batch`, from a zero-stride probe (see NOTE [ Batch
// indexing ]); also checks index tensors' bounds.
std::vector<int64_t> ProbeBatch(const NormalizedIndex& norm, at::IntArrayRef batch) {
  at::Tensor probe = at::empty({}, at::kBool).expand(batch);
  try {
    return probe.index(norm.indices).sizes().vec();
  } catch (c10::Error& e) {
    e.add_context(c10::str("while indexing a TensorDict with batch size ", SizeRepr(batch)));
    throw;
  }
}

// NOTE [ Dim names ] (td/core/names.cc): where each result dim of `ex` comes from. An integer
// drops its dim; a slice keeps it; None adds an unnamed dim; a one-dim index tensor keeps its
// dim's name, a mask's dim and a multi-dim index tensor's dims are unnamed. Several index
// tensors (whose dims torch may move to the front) or a bool scalar leave every dim unnamed.
internal::DimOrigins IndexOrigins(const internal::BatchIndex& ex) {
  internal::DimOrigins out;
  int tensors = 0;
  for (const internal::BatchIndex::Item& item : ex.items) {
    const TensorIndex& index = item.index;
    if (index.is_slice()) {
      out.push_back(item.dim);
    } else if (index.is_none()) {
      out.push_back(-1);
    } else if (index.is_tensor()) {
      ++tensors;
      const at::Tensor& t = index.tensor();
      if (IsMask(t)) {
        out.push_back(-1);
      } else if (t.dim() == 1) {
        out.push_back(item.dim);
      } else {
        out.insert(out.end(), t.dim(), -1);
      }
    }
  }
  if (tensors > 1 || ex.has_boolean) out.assign(out.size(), -1);
  return out;
}

// True when a tensor of shape `from` can be written into a slot of shape `to` (torch's rule for
// index_put_: leading 1s of `from` are dropped, then `from` must broadcast to `to`).
bool BroadcastsTo(at::IntArrayRef from, at::IntArrayRef to) {
  while (from.size() > to.size() && from.front() == 1) from = from.slice(1);
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

void CheckInPlace(const TensorDict& td, const char* op) {
  const Storage& s = td.storage();
  if (!s.capabilities().has(Capability::kInPlaceWrite)) {
    TD_FAIL(TypeError, op, ": the '", s.backend_id(),
                    "' backend does not support in-place writes into its tensors");
  }
}

// The writes and creations index_put_ with a TensorDict value will do, all validated up front.
struct PutPlan {
  struct Create {  // a missing sub-TensorDict
    NestedKey key;
    std::vector<int64_t> batch;
  };
  struct NewLeaf {
    NestedKey key;
    std::vector<int64_t> shape;
    at::Tensor value;
  };
  struct NewOther {
    NestedKey key;
    Value value;
  };
  std::vector<Create> levels;
  std::vector<NewLeaf> new_leaves;
  std::vector<NewOther> new_other;
  std::vector<std::pair<at::Tensor, at::Tensor>> writes;  // (target leaf, value leaf)
  std::vector<std::pair<NestedKey, at::Tensor>> created_writes;  // written after creation
};

void FailLockedCreate(const TensorDict& level, const NestedKey& key) {
  if (level.is_locked()) {
    TD_FAIL(LockedError, "index_put_ would create key ", key.repr(),
                      ": the TensorDict is locked (call unlock_() first)");
  }
  TD_FAIL(KeyError, "index_put_ would create key ", key.repr(), ": the '", level.backend(),
                 "' backend does not take new keys");
}

bool CanCreate(const TensorDict& level) {
  return !level.is_locked() && level.storage().capabilities().has(Capability::kNewKeys);
}

// Plans writing `src` (a level of the value) into `dst` (the matching level of the target, or
// nullptr when it will be created). `root_bd` / `value_bd`: the target's and the value's root
// batch dims; `indexed`: the root batch size after indexing.
void PlanLevel(const TensorDict* dst, const TensorDict& src, const NestedKey* prefix,
               const TensorDict& root, int64_t value_bd, at::IntArrayRef indexed,
               PutPlan* plan) {
  if (dst != nullptr) CheckInPlace(*dst, "index_put_");
  const Storage& ss = src.storage();
  for (const std::string& k : ss.keys()) {
    std::optional<Value> v = ss.get(k);
    if (!v) continue;
    NestedKey key = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    std::optional<Value> cur = dst ? dst->storage().get(k) : std::nullopt;
    if (!cur && dst != nullptr && !CanCreate(*dst)) FailLockedCreate(*dst, key);
    if (v->is_tensor()) {
      const at::Tensor& t = v->tensor();
      at::IntArrayRef feature = t.sizes().slice(std::min<int64_t>(value_bd, t.dim()));
      if (cur) {
        if (!cur->is_tensor()) {
          TD_FAIL(TypeError, "index_put_: key ", key.repr(), " is a Tensor in the value but a ",
                          cur->kind(), " in the TensorDict");
        }
        const at::Tensor& target = cur->tensor();
        std::vector<int64_t> slot = Concat(indexed, target.sizes().slice(root.batch_dims()));
        if (!BroadcastsTo(t.sizes(), slot)) {
          TD_FAIL(ValueError, "index_put_: the value for key ", key.repr(), " has shape ",
                           SizeRepr(t.sizes()), ", which cannot be broadcast to the indexed shape ",
                           SizeRepr(slot), " (the tensor's shape is ", SizeRepr(target.sizes()),
                           ")");
        }
        plan->writes.emplace_back(target, t);
      } else {
        std::vector<int64_t> shape = Concat(root.batch_size(), feature);
        std::vector<int64_t> slot = Concat(indexed, feature);
        if (t.dim() < value_bd || !BroadcastsTo(t.sizes(), slot)) {
          TD_FAIL(ValueError, "index_put_: the value for new key ", key.repr(), " has shape ",
                           SizeRepr(t.sizes()), ", which cannot be broadcast to the indexed shape ",
                           SizeRepr(slot));
        }
        plan->new_leaves.push_back({key, std::move(shape), t});
      }
    } else if (v->is_tensordict()) {
      const TensorDict& sub = v->tensordict();
      if (cur) {
        if (!cur->is_tensordict()) {
          TD_FAIL(TypeError, "index_put_: key ", key.repr(), " is a TensorDict in the value but a ",
                          cur->kind(), " in the TensorDict");
        }
        TensorDict sub_dst = cur->tensordict();
        PlanLevel(&sub_dst, sub, &key, root, value_bd, indexed, plan);
      } else {
        at::IntArrayRef extra = sub.batch_size().slice(std::min<int64_t>(value_bd, sub.batch_dims()));
        plan->levels.push_back({key, Concat(root.batch_size(), extra)});
        PlanLevel(nullptr, sub, &key, root, value_bd, indexed, plan);
      }
    } else {
      if (cur) {
        if (!cur->is_non_tensor() || !(cur->non_tensor_data() == v->non_tensor_data())) {
          TD_FAIL(ValueError, "index_put_: non-tensor entry ", key.repr(), " is ",
                           v->non_tensor().dump(), " in the value but ",
                           cur->is_non_tensor() ? cur->non_tensor().dump()
                                                : std::string("a ") + std::string(cur->kind()),
                           " in the TensorDict (non-tensor data has no batch dims to write into)");
        }
      } else {
        plan->new_other.push_back({key, *v});
      }
    }
  }
}

// Writes `value` into `target` at `indices`, cast to the target's dtype and device.
void WriteLeaf(at::Tensor target, const at::Tensor& value, at::ArrayRef<TensorIndex> indices) {
  at::Tensor v = value;
  if (v.scalar_type() != target.scalar_type() || v.device() != target.device()) {
    v = v.to(target.device(), target.scalar_type());
  }
  target.index_put_(indices, v);
}

}  // namespace

TensorDict TensorDict::index(std::initializer_list<TensorIndex> indices) const {
  return index(at::ArrayRef<TensorIndex>(indices.begin(), indices.size()));
}

TensorDict TensorDict::index(at::ArrayRef<TensorIndex> indices) const {
  internal::BatchIndex ex = ExpandBatchIndex(indices, batch_size(), "index");
  // A backend may index natively (a lazy stack returns its member). See NOTE [ Storage interface ].
  if (const LazyStorage* lazy = storage_->lazy()) {
    if (std::optional<TensorDict> native = lazy->index(indices)) return *std::move(native);
  }
  std::optional<internal::DimOrigins> origins;  // only for a named TensorDict
  if (storage_->names() != nullptr) origins = IndexOrigins(ex);
  const NormalizedIndex norm = NormalizeIndex(std::move(ex));
  const bool basic = !norm.advanced && internal::IsBasicIndex(norm.indices);
  LeafTree tree(*this, LeafTree::NonTensorMode::kMove);
  std::vector<at::Tensor> out = internal::MapEach(
      tree,
      [&](size_t, const at::Tensor& leaf) {
        return basic ? internal::IndexBasic(leaf, norm.indices) : leaf.index(norm.indices);
      },
      "indexing");
  std::vector<int64_t> batch;
  if (out.empty()) {
    batch = ProbeBatch(norm, batch_size());
  } else {
    const int64_t feature = tree.leaves()[0].dim() - batch_dims();
    batch = out[0].sizes().slice(0, out[0].dim() - feature).vec();
  }
  if (origins && origins->size() != batch.size()) origins->assign(batch.size(), -1);
  auto origins_fn = [&] {
    return origins ? *origins : internal::DimOrigins(batch.size(), -1);
  };
  return tree.Rebuild(std::move(out), batch, /*check=*/false, std::nullopt, true, origins_fn);
}

TensorDict& TensorDict::index_put_(std::initializer_list<TensorIndex> indices,
                                   const TensorDict& value) {
  return index_put_(at::ArrayRef<TensorIndex>(indices.begin(), indices.size()), value);
}

TensorDict& TensorDict::index_put_(at::ArrayRef<TensorIndex> indices, const TensorDict& value) {
  if (value.is_same(*this)) TD_FAIL(ValueError, "index_put_: the value is the TensorDict itself");
  internal::BatchIndex ex = ExpandBatchIndex(indices, batch_size(), "index_put_");
  // A backend may write natively (a lazy stack writes into its members); lazy backends otherwise
  // get the write through a dense copy of the keys it touches (NOTE [ In-place writes ]).
  if (LazyStorage* lazy = storage_->lazy(); lazy != nullptr && lazy->index_put_(indices, value)) {
    return *this;
  }
  const NormalizedIndex norm = NormalizeIndex(std::move(ex));
  const std::vector<int64_t> indexed = ProbeBatch(norm, batch_size());
  auto write = [&](TensorDict& dst) {
    PutPlan plan;
    PlanLevel(&dst, value, nullptr, dst, value.batch_dims(), indexed, &plan);
    // Everything is valid: create, then write.
    for (const PutPlan::Create& c : plan.levels) {
      auto [parent, last] = dst.parent_of(c.key, /*create=*/false);
      parent.storage_->set(last, TensorDict(MakeDenseStorage(c.batch, parent.device())));
    }
    for (PutPlan::NewLeaf& n : plan.new_leaves) {
      auto [parent, last] = dst.parent_of(n.key, /*create=*/false);
      at::TensorOptions options = n.value.options();
      if (parent.device()) options = options.device(*parent.device());
      at::Tensor fresh = at::zeros(n.shape, options);
      parent.storage_->set(last, fresh);
      plan.writes.emplace_back(fresh, n.value);
    }
    for (PutPlan::NewOther& n : plan.new_other) {
      auto [parent, last] = dst.parent_of(n.key, /*create=*/false);
      parent.storage_->set(last, std::move(n.value));
    }
    for (const auto& [target, v] : plan.writes) WriteLeaf(target, v, norm.indices);
  };
  // Only the keys the value writes need a dense copy when a level is lazy.
  internal::WriteInPlace(*this, write, [&] {
    std::vector<NestedKey> touched;
    for (NestedKey& k : value.keys(KeysOptions().include_nested(true).leaves_only(true))) {
      if (contains(k)) touched.push_back(std::move(k));
    }
    return touched;
  });
  return *this;
}

TensorDict& TensorDict::index_put_(std::initializer_list<TensorIndex> indices,
                                   const at::Tensor& value) {
  return index_put_(at::ArrayRef<TensorIndex>(indices.begin(), indices.size()), value);
}

TensorDict& TensorDict::index_put_(at::ArrayRef<TensorIndex> indices, const at::Tensor& value) {
  if (!value.defined()) TD_FAIL(ValueError, "index_put_: the value tensor is undefined");
  internal::BatchIndex ex = ExpandBatchIndex(indices, batch_size(), "index_put_");
  const NormalizedIndex norm = NormalizeIndex(std::move(ex));
  const std::vector<int64_t> indexed = ProbeBatch(norm, batch_size());
  internal::WriteLeaves(*this, "index_put_", [&](const LeafTree& tree) {
    for (size_t i = 0; i < tree.num_leaves(); ++i) {
      std::vector<int64_t> slot = Concat(indexed, tree.leaves()[i].sizes().slice(batch_dims()));
      if (!BroadcastsTo(value.sizes(), slot)) {
        TD_FAIL(ValueError, "index_put_: the value of shape ", SizeRepr(value.sizes()),
                         " cannot be broadcast to the indexed shape ", SizeRepr(slot), " of key ",
                         tree.key(i).repr());
      }
    }
    CheckInPlace(tree.root(), "index_put_");
    internal::MapEach(
        tree,
        [&](size_t, const at::Tensor& leaf) {
          WriteLeaf(leaf, value, norm.indices);
          return at::Tensor();
        },
        "writing into");
  });
  return *this;
}

TensorDict& TensorDict::index_put_(std::initializer_list<TensorIndex> indices,
                                   const at::Scalar& value) {
  return index_put_(at::ArrayRef<TensorIndex>(indices.begin(), indices.size()), value);
}

TensorDict& TensorDict::index_put_(at::ArrayRef<TensorIndex> indices, const at::Scalar& value) {
  internal::BatchIndex ex = ExpandBatchIndex(indices, batch_size(), "index_put_");
  const NormalizedIndex norm = NormalizeIndex(std::move(ex));
  ProbeBatch(norm, batch_size());  // validates the index before anything is written
  internal::WriteLeaves(*this, "index_put_", [&](const LeafTree& tree) {
    CheckInPlace(tree.root(), "index_put_");
    internal::CheckScalarFits(tree, value, "index_put_ into");
    internal::MapEach(
        tree,
        [&](size_t, const at::Tensor& leaf) {
          at::Tensor target = leaf;
          target.index_put_(norm.indices, value);
          return at::Tensor();
        },
        "writing into");
  });
  return *this;
}

}  // namespace td
