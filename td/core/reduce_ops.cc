// Reductions over every leaf (sum, mean, std, var, min / amin, max / amax, norm, any, all,
// logsumexp, prod, nansum, nanmean, quantile, min / max with indices, cummax / cummin) and the ops
// along one batch dim (softmax, log_softmax). Declared in td/core/ops_math.def; built on
// NOTE [ Leaf maps ] (td/core/internal/leaves.h); errors follow NOTE [ Leaf-wise math ]
// (td/core/pointwise_ops.cc).
#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "td/compat/torch.h"
#include "td/core/internal/leafwise.h"
#include "td/core/internal/leaves.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;
using internal::MapEach;
using internal::MapEachMulti;
using internal::WrapBatchDim;

using DimsFn = std::function<at::Tensor(const at::Tensor&, at::IntArrayRef, bool)>;
using AllFn = std::function<at::Tensor(const at::Tensor&)>;

// The batch size after reducing `ds`.
std::vector<int64_t> ReducedBatch(const TensorDict& td, const std::vector<int64_t>& ds,
                                  bool keepdim) {
  std::vector<int64_t> nb;
  for (int64_t i = 0; i < td.batch_dims(); ++i) {
    if (std::find(ds.begin(), ds.end(), i) == ds.end()) {
      nb.push_back(td.batch_size()[i]);
    } else if (keepdim) {
      nb.push_back(1);
    }
  }
  return nb;
}

// For each dim of a reduction's result, the input dim it comes from (NOTE [ Dim names ] in
// td/core/names.cc): the dims kept, or every dim with keepdim.
internal::DimOrigins ReducedOrigins(int64_t nb, const std::vector<int64_t>& ds, bool keepdim) {
  internal::DimOrigins o;
  for (int64_t i = 0; i < nb; ++i) {
    if (keepdim || std::find(ds.begin(), ds.end(), i) == ds.end()) o.push_back(i);
  }
  return o;
}

// min / max / amin / amax / quantile refuse what LibTorch refuses for one tensor of the batch
// size: reducing a dim of size 0 (or, over every element, an empty batch). Checked on the batch
// so that a TensorDict without leaves refuses it too.
void RefuseEmptyReduction(const TensorDict& td, std::optional<at::IntArrayRef> dims,
                          const char* op) {
  if (!dims) {
    if (c10::multiply_integers(td.batch_size()) == 0) {
      TD_FAIL(IndexError, op, ": cannot reduce a TensorDict with batch size ",
              SizeRepr(td.batch_size()), " (no elements)");
    }
    return;
  }
  for (int64_t d : internal::WrapBatchDims(td, *dims, op)) {
    if (td.batch_size()[d] == 0) {
      TD_FAIL(IndexError, op, ": cannot reduce batch dim ", d, " of size 0 (batch size ",
              SizeRepr(td.batch_size()), ")");
    }
  }
}

// The reductions: `all` over every element of a leaf, `dims` over batch dims.
// `foreach_all`, when given, reduces every leaf in one call (a failure reruns leaf by leaf so that
// the error names the key).
TensorDict Reduce(const TensorDict& td, const ReduceOptions& o, const char* op, const AllFn& all,
                  const DimsFn& dims,
                  const std::function<std::vector<at::Tensor>(at::TensorList)>& foreach_all = {}) {
  LeafTree tree(td);
  if (!o.dim()) {
    std::vector<at::Tensor> out;
    bool done = false;
    if (foreach_all && tree.num_leaves() > 0 && !internal::TracksGrad(tree.leaves())) {
      try {
        out = foreach_all(tree.leaves());
        done = true;
      } catch (const c10::Error&) {
      }
    }
    if (!done) out = MapEach(tree, [&](size_t, const at::Tensor& x) { return all(x); }, op);
    return tree.Rebuild(std::move(out), {}, /*check=*/false, std::nullopt,
                        /*nested_extra_dims=*/false);
  }
  const std::vector<int64_t> ds = internal::WrapBatchDims(td, *o.dim(), op);
  std::vector<at::Tensor> out =
      MapEach(tree, [&](size_t, const at::Tensor& x) { return dims(x, ds, o.keepdim()); }, op);
  auto origins = [&] { return ReducedOrigins(td.batch_dims(), ds, o.keepdim()); };
  return tree.Rebuild(std::move(out), ReducedBatch(td, ds, o.keepdim()), /*check=*/false,
                      std::nullopt, /*nested_extra_dims=*/true, internal::DimOriginsFn(origins));
}

ReduceOptions Dims(at::IntArrayRef dims, bool keepdim) {
  return ReduceOptions().dim(dims.vec()).keepdim(keepdim);
}

// Reduces with a single-dim op over several dims (highest first, so lower dims keep their
// position).
at::Tensor EachDim(const at::Tensor& t, at::IntArrayRef dims, bool keepdim,
                   const std::function<at::Tensor(const at::Tensor&, int64_t, bool)>& fn) {
  std::vector<int64_t> ds = dims.vec();
  std::sort(ds.rbegin(), ds.rend());
  at::Tensor r = t;
  for (int64_t d : ds) r = fn(r, d, keepdim);
  return r;
}

// A pair of outputs per leaf (values, indices) along batch dim `dim`.
ValuesIndices Pairwise(const TensorDict& td, int64_t dim, bool keepdim, bool reduces,
                       const char* op,
                       const std::function<std::tuple<at::Tensor, at::Tensor>(
                           const at::Tensor&, int64_t)>& fn) {
  const int64_t d = WrapBatchDim(dim, td.batch_dims(), td.batch_size(), op);
  LeafTree tree(td);
  std::vector<std::vector<at::Tensor>> out = MapEachMulti(
      tree, 2,
      [&](size_t, const at::Tensor& x) {
        auto [v, i] = fn(x, d);
        return std::vector<at::Tensor>{v, i};
      },
      op);
  const std::vector<int64_t> nb =
      reduces ? ReducedBatch(td, {d}, keepdim) : td.batch_size().vec();
  auto origins = [&] {
    return reduces ? ReducedOrigins(td.batch_dims(), {d}, keepdim)
                   : ReducedOrigins(td.batch_dims(), {}, false);
  };
  const internal::DimOriginsFn origins_fn(origins);
  return ValuesIndices{
      tree.Rebuild(std::move(out[0]), nb, /*check=*/false, std::nullopt, true, origins_fn),
      tree.Rebuild(std::move(out[1]), nb, /*check=*/false, std::nullopt, true, origins_fn)};
}

// LibTorch's optional (td/compat/torch.h) from ours.
compat::Optional<at::ScalarType> AsC10(std::optional<at::ScalarType> d) {
  return d ? compat::Optional<at::ScalarType>(*d) : compat::kNullopt;
}

}  // namespace

// ---- reductions ---------------------------------------------------------------------------

TensorDict TensorDict::sum(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "sum", [](const at::Tensor& t) { return at::sum(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::sum(t, d, k); });
}

TensorDict TensorDict::mean(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "mean", [](const at::Tensor& t) { return at::mean(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::mean(t, d, k); });
}

TensorDict TensorDict::std(const ReduceOptions& o) const {
  const bool unbiased = o.unbiased();
  return Reduce(
      *this, o, "std", [=](const at::Tensor& t) { return at::std(t, unbiased); },
      [=](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::std(t, d, unbiased, k); });
}

TensorDict TensorDict::var(const ReduceOptions& o) const {
  const bool unbiased = o.unbiased();
  return Reduce(
      *this, o, "var", [=](const at::Tensor& t) { return at::var(t, unbiased); },
      [=](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::var(t, d, unbiased, k); });
}

TensorDict TensorDict::min(const ReduceOptions& o) const {
  RefuseEmptyReduction(*this, o.dim() ? std::optional<at::IntArrayRef>(*o.dim()) : std::nullopt,
                       "min");
  return Reduce(
      *this, o, "min", [](const at::Tensor& t) { return at::min(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::amin(t, d, k); });
}

TensorDict TensorDict::max(const ReduceOptions& o) const {
  RefuseEmptyReduction(*this, o.dim() ? std::optional<at::IntArrayRef>(*o.dim()) : std::nullopt,
                       "max");
  return Reduce(
      *this, o, "max", [](const at::Tensor& t) { return at::max(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::amax(t, d, k); });
}

TensorDict TensorDict::norm(const at::Scalar& p, const ReduceOptions& o) const {
  return Reduce(
      *this, o, "norm", [&](const at::Tensor& t) { return at::norm(t, p); },
      [&](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::norm(t, p, d, k); },
      [&](at::TensorList l) { return at::_foreach_norm(l, p); });
}

TensorDict TensorDict::any(at::IntArrayRef dims, bool keepdim) const {
  return Reduce(
      *this, Dims(dims, keepdim), "any", [](const at::Tensor& t) { return t.any(); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k, [](const at::Tensor& x, int64_t i, bool kk) { return x.any(i, kk); });
      });
}

TensorDict TensorDict::all(at::IntArrayRef dims, bool keepdim) const {
  return Reduce(
      *this, Dims(dims, keepdim), "all", [](const at::Tensor& t) { return t.all(); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k, [](const at::Tensor& x, int64_t i, bool kk) { return x.all(i, kk); });
      });
}

// ---- softmax / log_softmax ------------------------------------------------------------------

TensorDict TensorDict::softmax(int64_t dim, std::optional<at::ScalarType> dtype) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "softmax");
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& x) { return at::softmax(x, d, AsC10(dtype)); }, "softmax of");
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false);
}

TensorDict TensorDict::log_softmax(int64_t dim, std::optional<at::ScalarType> dtype) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "log_softmax");
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& x) { return at::log_softmax(x, d, AsC10(dtype)); },
      "log_softmax of");
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false);
}

// ---- reductions ---------------------------------------------------------------------------

TensorDict TensorDict::logsumexp(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "logsumexp",
      [](const at::Tensor& t) { return at::logsumexp(t.reshape({-1}), {0}); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::logsumexp(t, d, k); });
}

TensorDict TensorDict::prod(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "prod", [](const at::Tensor& t) { return at::prod(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k,
                       [](const at::Tensor& x, int64_t i, bool kk) { return at::prod(x, i, kk); });
      });
}

TensorDict TensorDict::nansum(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "nansum", [](const at::Tensor& t) { return at::nansum(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::nansum(t, d, k); });
}

TensorDict TensorDict::nanmean(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "nanmean", [](const at::Tensor& t) { return at::nanmean(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::nanmean(t, d, k); });
}

TensorDict TensorDict::quantile(double q, std::optional<int64_t> dim, bool keepdim,
                                std::string_view interpolation) const {
  // Checked here, not only by at::quantile, so that a TensorDict without leaves refuses them too.
  if (!(q >= 0.0 && q <= 1.0)) TD_FAIL(ValueError, "quantile: q must be in [0, 1], got ", q);
  if (interpolation != "linear" && interpolation != "lower" && interpolation != "higher" &&
      interpolation != "midpoint" && interpolation != "nearest") {
    TD_FAIL(ValueError, "quantile: interpolation must be one of linear, lower, higher, midpoint, ",
            "nearest; got '", interpolation, "'");
  }
  // at::quantile refuses an empty tensor whatever the dim.
  RefuseEmptyReduction(*this, std::nullopt, "quantile");
  const compat::StringView interp(interpolation.data(), interpolation.size());
  if (!dim) {
    return Reduce(
        *this, ReduceOptions(), "quantile",
        [&](const at::Tensor& t) { return at::quantile(t, q, compat::kNullopt, false, interp); }, {});
  }
  return Reduce(*this, Dims({*dim}, keepdim), "quantile", {},
                [&](const at::Tensor& t, at::IntArrayRef d, bool k) {
                  return at::quantile(t, q, d[0], k, interp);
                });
}

ValuesIndices TensorDict::min_with_indices(int64_t dim, bool keepdim) const {
  RefuseEmptyReduction(*this, at::IntArrayRef(dim), "min");
  return Pairwise(*this, dim, keepdim, /*reduces=*/true, "min",
                  [&](const at::Tensor& x, int64_t d) { return at::min(x, d, keepdim); });
}
ValuesIndices TensorDict::max_with_indices(int64_t dim, bool keepdim) const {
  RefuseEmptyReduction(*this, at::IntArrayRef(dim), "max");
  return Pairwise(*this, dim, keepdim, /*reduces=*/true, "max",
                  [&](const at::Tensor& x, int64_t d) { return at::max(x, d, keepdim); });
}
ValuesIndices TensorDict::cummax(int64_t dim) const {
  return Pairwise(*this, dim, false, /*reduces=*/false, "cummax",
                  [](const at::Tensor& x, int64_t d) { return at::cummax(x, d); });
}
ValuesIndices TensorDict::cummin(int64_t dim) const {
  return Pairwise(*this, dim, false, /*reduces=*/false, "cummin",
                  [](const at::Tensor& x, int64_t d) { return at::cummin(x, d); });
}

// The (dims, keepdim) overload of each reduction above: name(ReduceOptions over those dims).
#define TD_DIMS_OVERLOAD_(name)                                                \
  TensorDict TensorDict::name(at::IntArrayRef dims, bool keepdim) const {      \
    return name(Dims(dims, keepdim));                                          \
  }
TD_DIMS_OVERLOAD_(sum)
TD_DIMS_OVERLOAD_(mean)
TD_DIMS_OVERLOAD_(std)
TD_DIMS_OVERLOAD_(var)
TD_DIMS_OVERLOAD_(min)
TD_DIMS_OVERLOAD_(max)
TD_DIMS_OVERLOAD_(logsumexp)
TD_DIMS_OVERLOAD_(prod)
TD_DIMS_OVERLOAD_(nansum)
TD_DIMS_OVERLOAD_(nanmean)
TD_DIMS_OVERLOAD_(amin)
TD_DIMS_OVERLOAD_(amax)
#undef TD_DIMS_OVERLOAD_

TensorDict TensorDict::amin(const ReduceOptions& o) const { return min(o); }
TensorDict TensorDict::amax(const ReduceOptions& o) const { return max(o); }

// ---- all / any of everything ---------------------------------------------------------------

bool TensorDict::all() const {
  for (const Value& v : values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor() && !v.tensor().all().item<bool>()) return false;
  }
  return true;
}

bool TensorDict::any() const {
  for (const Value& v : values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor() && v.tensor().any().item<bool>()) return true;
  }
  return false;
}

}  // namespace td
