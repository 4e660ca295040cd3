// Internal to td/core: the machinery every whole-TensorDict operation (apply, indexing, shape ops,
// stack/cat, device moves, math) is built on. Not part of the public API.
//
// NOTE [ Leaf maps ]
// An operation that transforms the tensors of a TensorDict runs in three steps:
//   1. Flatten: `LeafTree tree(td)` records the structure (levels, keys, non-tensor entries, batch
//      sizes) and lists every tensor leaf, nested ones included, depth first in insertion order.
//      Other TensorDicts taking part (apply's zipped inputs, stack/cat inputs, arithmetic operands)
//      are aligned to the same leaf order with `tree.Align(other, ...)`.
//   2. Map: one call computes every output leaf from the input leaves. Per-leaf work goes through
//      `MapEach` (the single per-leaf loop: the place td::parallel can parallelise, and where an
//      exception gets the key it happened on); work that LibTorch can do for all leaves at once
//      (`at::_foreach_*`) gets the whole leaf list instead.
//   3. Rebuild: `tree.Rebuild(outputs, batch)` builds a dense TensorDict of the same structure with
//      output i in place of leaf i (an undefined output drops the entry), non-tensor entries
//      carried as they are, or, for operations that move batch elements, moved with them
//      (LeafTree::NonTensorMode, NOTE [ Non-tensor stacks ] in internal/non_tensor_stack.h). Operations act on the root's batch dims only: a nested level whose
//      batch size was its parent's `P_old + extra` gets `P_new + extra`, and every level built is
//      checked against its leaves and sub-levels (NOTE [ Rebuilt batch sizes ] in
//      td/core/leaves.cc).
// Operations compute their result batch size from the root batch size with the tensor op's own
// rules (or from the first output leaf, see indexing.cc), and normalise negative dims against the
// batch dims before touching leaves (a leaf has more dims than the batch).
// Storage backends that compute entries lazily may later intercept step 2 for the operations they
// implement natively; the core's per-leaf default stays in these functions.
#pragma once

#include <ATen/TensorIndexing.h>
#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/core/tensordict.h"
#include "td/executor/executor.h"

namespace td {
namespace internal {

// For each batch dim of an operation's result, the root batch dim of its input it comes from,
// or -1 for a new dim: how Rebuild carries dim names (NOTE [ Dim names ] in td/core/names.cc).
using DimOrigins = absl::InlinedVector<int64_t, 8>;
// Computes DimOrigins; called only when some level of the input has names.
using DimOriginsFn = absl::FunctionRef<DimOrigins()>;

class LeafTree {
 public:
  // What the operation does to non-tensor entries (NOTE [ Non-tensor stacks ] in
  // internal/non_tensor_stack.h):
  //   kCarry    carried as they are (operations that keep every level's batch size, or whose
  //             new batch size has no element mapping: a NonTensorStack there is a ValueError);
  //   kMove     the operation moves batch elements (indexing, shape ops, split): each
  //             NonTensorStack becomes an int64 stand-in leaf and is rebuilt from its output;
  //   kCombine  the operation combines TensorDicts (stack, cat): every non-tensor entry becomes
  //             a stand-in, and Align adds the other inputs' values.
  enum class NonTensorMode : uint8_t { kCarry, kMove, kCombine };
  // Flattens `td` (see NOTE [ Leaf maps ]).
  explicit LeafTree(const TensorDict& td, NonTensorMode mode = NonTensorMode::kCarry)
      : LeafTree(td, /*stop_at_lazy=*/false, mode) {}
  // With `stop_at_lazy`, the walk reads no entry of a lazy level: at the first one it stops
  // descending (has_lazy_level() is then true and the leaves are incomplete), so a caller that
  // must not flatten lazy levels learns it without computing what they compute.
  LeafTree(const TensorDict& td, bool stop_at_lazy,
           NonTensorMode mode = NonTensorMode::kCarry);

  const TensorDict& root() const { return levels_[0].td; }
  // True when a level (the root or a nested TensorDict) is on a Capability::kLazy backend, whose
  // leaves may be freshly computed tensors: see NOTE [ In-place writes ] (internal/in_place.h).
  bool has_lazy_level() const { return first_lazy_level_ >= 0; }
  // The first lazy level, depth first (only when has_lazy_level()): its key (nullopt for the
  // root) and its TensorDict.
  std::optional<NestedKey> lazy_level_key() const {
    if (first_lazy_level_ == 0) return std::nullopt;
    return LevelKey(first_lazy_level_, nullptr);
  }
  const TensorDict& lazy_level() const { return levels_[first_lazy_level_].td; }
  // Every tensor leaf, depth first (with the int64 stand-ins of moved non-tensor entries).
  const std::vector<at::Tensor>& leaves() const { return leaves_; }
  size_t num_leaves() const { return leaves_.size(); }
  // The full key of leaf `i` (built on demand: for errors and named_apply).
  NestedKey key(size_t i) const;
  // The batch size of the level holding leaf `i`.
  at::IntArrayRef leaf_batch_size(size_t i) const;

  // How Align treats entries of `other` that differ from this tree.
  struct AlignOptions {
    // Keys of `other` this tree lacks are an error (stack/cat); otherwise ignored (apply).
    TORCH_ARG(bool, strict_keys) = false;
    // Used for leaves missing in `other`; without it a missing leaf is a KeyError.
    TORCH_ARG(std::optional<at::Tensor>, default_value) = std::nullopt;
    // How `other` is called in error messages: `name`, followed by `position` when it is
    // >= 0 ("TensorDict 3"). Formatted only when an error is thrown.
    TORCH_ARG(std::string_view, name) = "the other TensorDict";
    TORCH_ARG(int64_t, position) = -1;

   public:
    std::string Describe() const {
      return position_ < 0 ? std::string(name_) : c10::str(name_, " ", position_);
    }
  };
  // The leaves of `other` under the same keys as this tree's leaves, in the same order. Throws
  // KeyError listing the keys missing in `other` (and, with strict_keys, the extra ones),
  // TypeError when an entry is a tensor on one side and a TensorDict or non-tensor data on the
  // other, ValueError when checked non-tensor entries differ.
  std::vector<at::Tensor> Align(const TensorDict& other, const AlignOptions& options) const;

  // A dense TensorDict of this structure holding `outputs[i]` in place of leaf i (undefined
  // outputs drop the entry) with root batch size `batch_size` and device `device` (the root's
  // device when nullopt). With `check`, throws BatchSizeError naming the key when an output does
  // not start with its level's new batch size (and moves outputs to the device); without it the
  // caller guarantees both, and an output that does not fit is an internal error (c10::Error
  // naming the level, the key and both shapes; NOTE [ Rebuilt batch sizes ] in
  // td/core/leaves.cc). Without `nested_extra_dims`, nested levels get exactly `batch_size`
  // instead of `batch_size` + their extra dims (for full reductions).
  // Dim names (only when some level has them): `origins` maps the result's root dims to this
  // tree's; without it the names are kept when the root keeps its number of batch dims and
  // dropped otherwise. A nested level's extra dims keep their names.
  TensorDict Rebuild(std::vector<at::Tensor> outputs, at::IntArrayRef batch_size,
                     bool check = true,
                     std::optional<std::optional<at::Device>> device = std::nullopt,
                     bool nested_extra_dims = true,
                     std::optional<DimOriginsFn> origins = std::nullopt) const;
  // True when some level (the root or a nested TensorDict) has dim names.
  bool has_names() const { return has_names_; }

 private:
  // kStandIn: a non-tensor entry moved through the operation as an int64 leaf.
  enum class Kind : uint8_t { kTensor, kTensorDict, kOther, kStandIn };
  struct Entry {
    std::string key;
    Kind kind;
    int64_t index;       // leaf index (kTensor, kStandIn) or level index (kTensorDict)
    std::optional<Value> other;  // kOther: the non-tensor value
    // kStandIn: the values its leaf numbers (shared: Align adds to it, and is const).
    std::shared_ptr<StackTable> table = nullptr;
  };
  struct Level {
    TensorDict td;
    int64_t parent;       // -1 for the root
    int64_t parent_entry;
    std::vector<Entry> entries;
  };
  void AddLevel(const TensorDict& td, int64_t parent, int64_t parent_entry);
  NestedKey LevelKey(int64_t level, const std::string* last) const;
  void AlignLevel(int64_t level, const TensorDict& other, const AlignOptions& options,
                  std::vector<at::Tensor>* out, std::vector<NestedKey>* missing,
                  std::vector<NestedKey>* extra) const;
  TensorDict RebuildLevel(int64_t level, std::vector<at::Tensor>& outputs,
                          std::vector<int64_t> batch, int64_t root_old_dims, bool check,
                          const std::optional<at::Device>& device, bool extra_dims,
                          const DimOrigins* origins) const;

  // Inline room for the common shapes (a root with a nested level or two, a few dozen leaves):
  // flattening a small TensorDict allocates only the root's entries and the leaf list.
  absl::InlinedVector<Level, 3> levels_;
  std::vector<at::Tensor> leaves_;
  int64_t first_lazy_level_ = -1;
  bool stop_at_lazy_ = false;
  NonTensorMode mode_ = NonTensorMode::kCarry;
  bool has_names_ = false;
  absl::InlinedVector<std::pair<int32_t, int32_t>, 32> leaf_pos_;  // (level, entry) of each leaf
};

// A per-leaf function; `i` is the leaf's position in the tree.
using IndexedLeafFn = std::function<at::Tensor(size_t i, const at::Tensor& leaf)>;
using IndexedMultiLeafFn = std::function<std::vector<at::Tensor>(size_t i, const at::Tensor& leaf)>;

// The per-leaf loop of NOTE [ Leaf maps ]: fn(i, leaf) for every leaf of `tree`. An exception
// from fn is rethrown (same type for c10::Error subclasses) with "while <what> key K" added.
// `parallel` decides whether the leaves run on td::parallel's threads (NOTE [ Thread policy ] in
// td/executor/executor.h; the cost is the leaves' total numel): by default they run serially,
// in order. Operations whose per-leaf work is real (apply, copies such as clone, to, stack, cat)
// pass `parallel::ParallelOptions()` to go parallel above the threshold; view-only operations
// keep the default. Leaves on an accelerator run serially unless `parallel.parallel()` is true.
// In parallel, fn runs concurrently for different i, and when several leaves fail the first
// failing leaf's error (in leaf order) is rethrown.
std::vector<at::Tensor> MapEach(
    const LeafTree& tree, const IndexedLeafFn& fn, const char* what,
    const parallel::ParallelOptions& parallel = parallel::ParallelOptions().parallel(false));
// Like MapEach for functions returning several tensors per leaf (split, unbind): the result is
// indexed [output][leaf]; every call must return `num_outputs` tensors.
std::vector<std::vector<at::Tensor>> MapEachMulti(const LeafTree& tree, size_t num_outputs,
                                                  const IndexedMultiLeafFn& fn, const char* what);

// Rethrows the exception in flight with the key context added (used inside catch blocks).
[[noreturn]] void RethrowWithKey(const NestedKey& key, const char* what);

// Normalises `dim` against `ndim` dims (negative counts from the end). Throws IndexError naming
// the operation, the batch size and the valid range.
int64_t WrapBatchDim(int64_t dim, int64_t ndim, at::IntArrayRef batch_size, const char* op);
// WrapBatchDim of each of `dims` against `td`'s batch dims; ValueError when one repeats.
std::vector<int64_t> WrapBatchDims(const TensorDict& td, at::IntArrayRef dims, const char* op);

// Slice bounds and integer indices are int64_t in LibTorch 1.13 and c10::SymInt in 2.x.
template <class T>
int64_t AsInt(const T& v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<int64_t>(v);
  } else {
    return v.expect_int();
  }
}

// Integers, slices and None only (Ellipsis expanded): basic indexing.
bool IsBasicIndex(at::ArrayRef<at::indexing::TensorIndex> indices);
// `leaf.index(indices)` for a basic index, with direct select / slice / unsqueeze calls: what
// at::indexing does, without parsing the index list on every call. Full slices are skipped, as
// there.
at::Tensor IndexBasic(const at::Tensor& leaf, at::ArrayRef<at::indexing::TensorIndex> indices);

}  // namespace internal
}  // namespace td
