#include "td/core/stack.h"

#include <ATen/ATen.h>

#include <string>

#include "td/core/dtype.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/internal/leaves.h"
#include "td/core/lazy_legacy.h"

namespace td {
namespace {

using internal::LeafTree;

// Leaves of every input aligned to the first input's leaf order: result[leaf][input].
std::vector<std::vector<at::Tensor>> AlignAll(const LeafTree& tree,
                                              const std::vector<TensorDict>& tds) {
  std::vector<std::vector<at::Tensor>> cols(tree.num_leaves());
  for (auto& c : cols) {
    c.reserve(tds.size());
  }
  for (size_t i = 0; i < tree.num_leaves(); ++i) cols[i].push_back(tree.leaves()[i]);
  for (size_t j = 1; j < tds.size(); ++j) {
    std::vector<at::Tensor> leaves = tree.Align(tds[j], LeafTree::AlignOptions()
                                                            .strict_keys(true)
                                                            .name("TensorDict")
                                                            .position(static_cast<int64_t>(j)));
    for (size_t i = 0; i < leaves.size(); ++i) cols[i].push_back(std::move(leaves[i]));
  }
  return cols;
}

}  // namespace

TensorDict stack(const std::vector<TensorDict>& tds, int64_t dim) {
  if (tds.empty()) TD_FAIL(ValueError, "stack: expected a non-empty list of TensorDicts");
  // NOTE [ Lazy legacy ] in td/core/lazy_legacy.h
  if (lazy_legacy()) return internal::hooks::lazy_stack.require()(tds, dim);
  const TensorDict& first = tds[0];
  const int64_t d = internal::WrapBatchDim(dim, first.batch_dims() + 1, first.batch_size(),
                                           "stack");
  for (size_t j = 1; j < tds.size(); ++j) {
    if (tds[j].batch_size() != first.batch_size()) {
      TD_FAIL(BatchSizeError, "stack: TensorDict ", j, " has batch size ",
                           SizeRepr(tds[j].batch_size()), " but TensorDict 0 has ",
                           SizeRepr(first.batch_size()), " (stack needs equal batch sizes)");
    }
  }
  LeafTree tree(first, LeafTree::NonTensorMode::kCombine);
  std::vector<std::vector<at::Tensor>> cols = AlignAll(tree, tds);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor&) { return at::stack(cols[i], d); }, "stacking",
      // Each leaf copies tds.size() inputs.
      parallel::ParallelOptions().min_cost(parallel::kDefaultMinParallelCost /
                                           static_cast<int64_t>(tds.size())));
  std::vector<int64_t> batch = first.batch_size().vec();
  batch.insert(batch.begin() + d, static_cast<int64_t>(tds.size()));
  // NOTE [ Dim names ] (td/core/names.cc): the inputs' names with an unnamed stack dim when they
  // all agree, none otherwise (upstream's stack).
  auto origins = [&] {
    internal::DimOrigins o;
    const DimNames names = first.names();
    bool agree = true;
    for (size_t j = 1; agree && j < tds.size(); ++j) agree = tds[j].names() == names;
    for (int64_t i = 0; i < first.batch_dims(); ++i) o.push_back(agree ? i : -1);
    o.insert(o.begin() + d, -1);
    return o;
  };
  return tree.Rebuild(std::move(out), batch, /*check=*/false, std::nullopt, true, origins);
}

TensorDict cat(const std::vector<TensorDict>& tds, int64_t dim) {
  if (tds.empty()) TD_FAIL(ValueError, "cat: expected a non-empty list of TensorDicts");
  const TensorDict& first = tds[0];
  const int64_t d = internal::WrapBatchDim(dim, first.batch_dims(), first.batch_size(), "cat");
  std::vector<int64_t> batch = first.batch_size().vec();
  for (size_t j = 1; j < tds.size(); ++j) {
    at::IntArrayRef b = tds[j].batch_size();
    bool ok = b.size() == batch.size();
    for (size_t k = 0; ok && k < b.size(); ++k) ok = static_cast<int64_t>(k) == d || b[k] == batch[k];
    if (!ok) {
      TD_FAIL(BatchSizeError, "cat: TensorDict ", j, " has batch size ", SizeRepr(b),
                           " but TensorDict 0 has ", SizeRepr(first.batch_size()),
                           " (cat along dim ", d, " needs the other batch dims equal)");
    }
    batch[d] += b[d];
  }
  LeafTree tree(first, LeafTree::NonTensorMode::kCombine);
  std::vector<std::vector<at::Tensor>> cols = AlignAll(tree, tds);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor&) { return at::cat(cols[i], d); }, "concatenating",
      parallel::ParallelOptions().min_cost(parallel::kDefaultMinParallelCost /
                                           static_cast<int64_t>(tds.size())));
  return tree.Rebuild(std::move(out), batch, /*check=*/false);
}

std::vector<TensorDict> unbind(const TensorDict& td, int64_t dim) { return td.unbind(dim); }

}  // namespace td
