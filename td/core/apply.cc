// TensorDict::apply / named_apply / apply_ / to_dense (NOTE [ Parallel apply ]).
#include "td/core/tensordict.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include "td/core/dtype.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"

namespace td {
using internal::CheckedBatch;
using internal::WithKeyContext;

// ---- apply --------------------------------------------------------------------------------

namespace {

// NOTE [ Parallel apply ]
// apply / named_apply / apply_ hand ApplyOptions' parallel settings to internal::MapEach, the
// per-leaf loop of NOTE [ Leaf maps ]: below min_cost elements in total the leaves
// run serially in key order, above it on td::parallel's threads (NOTE [ Thread policy ] in
// td/executor/executor.h). Every result lands in its own slot and the tree is rebuilt in key
// order, so the result does not depend on the schedule; when several leaves fail, the error of
// the first in key order is rethrown, as the serial loop would have. clone, to, contiguous,
// stack and cat pass default options: their per-leaf work is a copy, worth threads when large.
const parallel::ParallelOptions& LeafParallelism(const ApplyOptions& options) {
  parallel::check_num_threads(options.num_threads(), "ApplyOptions::num_threads");
  return options.parallel_options();
}

// The leaves of each of `others` aligned to `tree`: result[other][leaf].
std::vector<std::vector<at::Tensor>> AlignOthers(const internal::LeafTree& tree,
                                                 const std::vector<TensorDict>& others,
                                                 const ApplyOptions& options) {
  std::vector<std::vector<at::Tensor>> aligned;
  aligned.reserve(others.size());
  for (size_t j = 0; j < others.size(); ++j) {
    aligned.push_back(tree.Align(
        others[j], internal::LeafTree::AlignOptions()
                       .default_value(options.default_value())
                       .name(others.size() == 1 ? "the other TensorDict" : "other TensorDict")
                       .position(others.size() == 1 ? -1 : static_cast<int64_t>(j))));
  }
  return aligned;
}

std::vector<at::Tensor> Gather(const std::vector<std::vector<at::Tensor>>& aligned,
                               const at::Tensor& leaf, size_t i) {
  std::vector<at::Tensor> args;
  args.reserve(aligned.size() + 1);
  args.push_back(leaf);
  for (const auto& a : aligned) args.push_back(a[i]);
  return args;
}

TensorDict FinishApply(const TensorDict& self, const internal::LeafTree& tree,
                       std::vector<at::Tensor> out, const ApplyOptions& options) {
  if (options.batch_size()) {
    return tree.Rebuild(std::move(out), CheckedBatch(*options.batch_size()), /*check=*/true);
  }
  return tree.Rebuild(std::move(out), self.batch_size(), /*check=*/true);
}

// Checks that `value` can be copied into `leaf` under apply_'s rule (the set_ rule: exactly the
// leaf's shape, no partial overlap, a leaf that holds data); throws ValueError naming the key.
void CheckInPlaceValue(const NestedKey& key, const at::Tensor& leaf, const at::Tensor& value,
                       const char* op, const char* what) {
  if (value.sizes() != leaf.sizes()) {
    TD_FAIL(ValueError, op, ": ", what, " for key ", key.repr(), " has shape ",
                     SizeRepr(value.sizes()), " but the leaf has shape ", SizeRepr(leaf.sizes()),
                     ": in-place results must have exactly the leaf's shape (no broadcasting, as "
                     "for set_: expand the result to the leaf's shape on purpose, or use apply() "
                     "for a new TensorDict)");
  }
  if (leaf.is_meta() && !value.is_meta()) {
    TD_FAIL(ValueError, op, ": the leaf under key ", key.repr(), " (shape ", SizeRepr(leaf.sizes()),
                     ") is a meta tensor and holds no data to copy ", what, " into");
  }
  try {
    at::assert_no_internal_overlap(leaf);
    at::assert_no_partial_overlap(leaf, value);
  } catch (const c10::Error& e) {
    TD_FAIL(ValueError, op, ": cannot copy ", what, " for key ", key.repr(), " (shape ",
                     SizeRepr(value.sizes()), ") into the leaf (shape ", SizeRepr(leaf.sizes()),
                     "): ", e.what_without_backtrace(),
                     " (expected a result that is the leaf itself or does not share its memory; "
                     "return a .clone())");
  }
}

// apply_: computes every result first, checks they fit, then copies (see the header).
void ApplyInPlace(const internal::LeafTree& tree, const internal::IndexedLeafFn& fn,
                  const ApplyOptions& options) {
  std::vector<at::Tensor> out;
  try {
    out = internal::MapEach(tree, fn, "applying a function in place to", LeafParallelism(options));
  } catch (c10::Error& e) {
    e.add_context(
        "apply_ already ran on the keys before it (and, when the leaves ran in parallel, maybe on "
        "some after it) but wrote nothing: results are copied only after every leaf succeeded "
        "(changes fn made to its argument itself stay)");
    throw;
  }
  const std::vector<at::Tensor>& leaves = tree.leaves();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].defined() && !out[i].is_same(leaves[i])) {
      CheckInPlaceValue(tree.key(i), leaves[i], out[i], "apply_",
                                  "the function's result");
    }
  }
  int64_t numel = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].defined() && !out[i].is_same(leaves[i])) numel += leaves[i].numel();
  }
  parallel::parallel_for(static_cast<int64_t>(out.size()), numel, LeafParallelism(options),
                         [&](int64_t i) {
                           if (out[i].defined() && !out[i].is_same(leaves[i])) {
                             at::Tensor target = leaves[i];
                             target.copy_(out[i]);
                           }
                         });
}

}  // namespace


TensorDict TensorDict::apply(const LeafFn& fn, std::optional<std::vector<int64_t>> batch_size) const {
  ApplyOptions options;
  if (batch_size) options.batch_size(*std::move(batch_size));
  return apply(fn, options);
}

TensorDict TensorDict::apply(const LeafFn& fn, const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t, const at::Tensor& x) { return fn(x); }, "applying a function to",
      LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::apply(const BinaryLeafFn& fn, const TensorDict& other,
                             const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, {other}, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(x, aligned[0][i]); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::apply(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                             const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(Gather(aligned, x, i)); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::named_apply(const NamedLeafFn& fn, const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(tree.key(i), x); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::named_apply(const NamedNaryLeafFn& fn, const std::vector<TensorDict>& others,
                                   const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(tree.key(i), Gather(aligned, x, i)); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict& TensorDict::apply_(const LeafFn& fn) { return apply_(fn, ApplyOptions()); }

TensorDict& TensorDict::apply_(const LeafFn& fn, const ApplyOptions& options) {
  internal::WriteLeaves(*this, "apply_", [&](const internal::LeafTree& tree) {
    ApplyInPlace(tree, [&](size_t, const at::Tensor& x) { return fn(x); }, options);
  });
  return *this;
}

TensorDict& TensorDict::apply_(const BinaryLeafFn& fn, const TensorDict& other,
                               const ApplyOptions& options) {
  internal::WriteLeaves(*this, "apply_", [&](const internal::LeafTree& tree) {
    std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, {other}, options);
    ApplyInPlace(tree, [&](size_t i, const at::Tensor& x) { return fn(x, aligned[0][i]); },
                 options);
  });
  return *this;
}

TensorDict& TensorDict::apply_(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                               const ApplyOptions& options) {
  internal::WriteLeaves(*this, "apply_", [&](const internal::LeafTree& tree) {
    std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
    ApplyInPlace(tree, [&](size_t i, const at::Tensor& x) { return fn(Gather(aligned, x, i)); },
                 options);
  });
  return *this;
}

namespace {
TensorDict ToDenseImpl(const TensorDict& src, const NestedKey* prefix) {
  const Storage& s = src.storage();
  std::vector<std::string> exclusive =
      s.lazy() != nullptr ? s.lazy()->exclusive_keys() : std::vector<std::string>();
  if (!exclusive.empty()) {
    TD_FAIL(KeyError, "cannot make a dense TensorDict", prefix ? " under " : "",
                   prefix ? prefix->repr() : "", ": keys ", KeysRepr(exclusive),
                   " are held by only some of the stacked TensorDicts (keys() lists the common "
                   "ones); select(keys()) first to drop them, or set them on every member");
  }
  auto out_storage = MakeDenseStorage(src.batch_size().vec(), src.device());
  out_storage->set_names(s.shared_names());  // NOTE [ Dim names ] (td/core/names.cc)
  TensorDict out(out_storage);
  for (const std::string& k : s.keys()) {
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    std::optional<Value> v = WithKeyContext(full, "reading", [&] { return s.get(k); });
    if (!v) continue;
    if (v->is_tensor()) {
      out_storage->set(k, v->tensor());
    } else if (v->is_tensordict()) {
      out_storage->set(k, ToDenseImpl(v->tensordict(), &full));
    } else {
      out_storage->set(k, *std::move(v));
    }
  }
  return out;
}
}  // namespace

TensorDict TensorDict::to_dense() const { return ToDenseImpl(*this, nullptr); }


}  // namespace td
