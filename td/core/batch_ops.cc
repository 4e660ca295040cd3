// softmax / log_softmax / logsumexp, prod, nansum / nanmean, quantile, min / max with indices,
// cummax / cummin, grad / zero_grad, new_*, expand_as, broadcast_to, movedim, tensor_split and
// device strings (declared in td/core/pointwise_members.inc). Built on NOTE [ Leaf maps ]
// (td/core/internal/leaves.h); errors follow NOTE [ Leaf-wise math ] (td/core/math_ops.cc).
#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <string>
#include <vector>

#include "td/core/internal/tensordict_util.h"
#include "td/core/internal/leaves.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;
using internal::MapEach;
using internal::MapEachMulti;
using internal::WrapBatchDim;

using DimsFn = std::function<at::Tensor(const at::Tensor&, at::IntArrayRef, bool)>;
using AllFn = std::function<at::Tensor(const at::Tensor&)>;

// The wrapped, distinct batch dims of `dims` (IndexError out of range, ValueError repeated).
std::vector<int64_t> WrapDims(const TensorDict& td, at::IntArrayRef dims, const char* op) {
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

// The reductions: `all` over every element of a leaf, `dims` over batch dims.
TensorDict Reduce(const TensorDict& td, const ReduceOptions& o, const char* op, const AllFn& all,
                  const DimsFn& dims) {
  LeafTree tree(td);
  if (!o.dim()) {
    std::vector<at::Tensor> out =
        MapEach(tree, [&](size_t, const at::Tensor& x) { return all(x); }, op);
    return tree.Rebuild(std::move(out), {}, /*check=*/false, std::nullopt,
                        /*nested_extra_dims=*/false);
  }
  const std::vector<int64_t> ds = WrapDims(td, *o.dim(), op);
  std::vector<at::Tensor> out =
      MapEach(tree, [&](size_t, const at::Tensor& x) { return dims(x, ds, o.keepdim()); }, op);
  return tree.Rebuild(std::move(out), ReducedBatch(td, ds, o.keepdim()), /*check=*/false);
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
  return ValuesIndices{tree.Rebuild(std::move(out[0]), nb, /*check=*/false),
                       tree.Rebuild(std::move(out[1]), nb, /*check=*/false)};
}

at::TensorOptions NewTensorOptions(const at::Tensor& leaf, const NewOptions& o) {
  at::TensorOptions opts = leaf.options();
  if (o.dtype()) opts = opts.dtype(*o.dtype());
  if (o.device()) opts = opts.device(*o.device());
  return opts;
}

// A new TensorDict of batch size `size`, each leaf make(feature-extended size, options).
TensorDict NewLike(const TensorDict& td, at::IntArrayRef size, const NewOptions& o,
                   const char* op,
                   const std::function<at::Tensor(at::IntArrayRef, at::TensorOptions)>& make) {
  const std::vector<int64_t> batch = internal::CheckedBatch(size);
  LeafTree tree(td);
  const size_t nd = td.batch_size().size();
  std::vector<at::Tensor> out = MapEach(
      tree,
      [&](size_t, const at::Tensor& x) {
        std::vector<int64_t> shape = batch;
        shape.insert(shape.end(), x.sizes().begin() + nd, x.sizes().end());
        at::Tensor t = make(shape, NewTensorOptions(x, o));
        if (o.requires_grad()) t.requires_grad_(true);
        return t;
      },
      op);
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), batch, /*check=*/false, device);
}

// Copy of `data` with the leaf's dtype and device unless `o` overrides them.
at::Tensor NewTensor(const at::Tensor& leaf, const at::Tensor& data, const NewOptions& o) {
  const at::TensorOptions opts = NewTensorOptions(leaf, o);
  at::Tensor t = data.detach().to(opts.device(), opts.dtype().toScalarType(),
                                  /*non_blocking=*/false, /*copy=*/true);
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

// "cuda" -> the current cuda device ("cuda:0"); a device with an index, or the CPU, as is.
at::Device NormalizeDevice(at::Device device) {
  if (device.has_index() || device.is_cpu() || device.type() == at::kMeta) return device;
  if (!c10::impl::hasDeviceGuardImpl(device.type())) {
    TD_FAIL(c10::Error, "device ", device.str(),
                     " is not available: this LibTorch build has no support for it");
  }
  const at::Device current = c10::impl::getDeviceGuardImpl(device.type())->getDevice();
  return at::Device(device.type(), current.index());
}

// LibTorch 1.13 takes c10::optional, 2.x std::optional: either converts from this.
c10::optional<at::ScalarType> AsC10(std::optional<at::ScalarType> d) {
  return d ? c10::optional<at::ScalarType>(*d) : c10::nullopt;
}

}  // namespace

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
TensorDict TensorDict::logsumexp(at::IntArrayRef dims, bool keepdim) const {
  return logsumexp(Dims(dims, keepdim));
}

TensorDict TensorDict::prod(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "prod", [](const at::Tensor& t) { return at::prod(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) {
        return EachDim(t, d, k,
                       [](const at::Tensor& x, int64_t i, bool kk) { return at::prod(x, i, kk); });
      });
}
TensorDict TensorDict::prod(at::IntArrayRef dims, bool keepdim) const {
  return prod(Dims(dims, keepdim));
}

TensorDict TensorDict::nansum(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "nansum", [](const at::Tensor& t) { return at::nansum(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::nansum(t, d, k); });
}
TensorDict TensorDict::nansum(at::IntArrayRef dims, bool keepdim) const {
  return nansum(Dims(dims, keepdim));
}

TensorDict TensorDict::nanmean(const ReduceOptions& o) const {
  return Reduce(
      *this, o, "nanmean", [](const at::Tensor& t) { return at::nanmean(t); },
      [](const at::Tensor& t, at::IntArrayRef d, bool k) { return at::nanmean(t, d, k); });
}
TensorDict TensorDict::nanmean(at::IntArrayRef dims, bool keepdim) const {
  return nanmean(Dims(dims, keepdim));
}

TensorDict TensorDict::quantile(double q, std::optional<int64_t> dim, bool keepdim,
                                std::string_view interpolation) const {
  const c10::string_view interp(interpolation.data(), interpolation.size());
  if (!dim) {
    return Reduce(
        *this, ReduceOptions(), "quantile",
        [&](const at::Tensor& t) { return at::quantile(t, q, c10::nullopt, false, interp); }, {});
  }
  return Reduce(*this, Dims({*dim}, keepdim), "quantile", {},
                [&](const at::Tensor& t, at::IntArrayRef d, bool k) {
                  return at::quantile(t, q, d[0], k, interp);
                });
}

ValuesIndices TensorDict::min_with_indices(int64_t dim, bool keepdim) const {
  return Pairwise(*this, dim, keepdim, /*reduces=*/true, "min",
                  [&](const at::Tensor& x, int64_t d) { return at::min(x, d, keepdim); });
}
ValuesIndices TensorDict::max_with_indices(int64_t dim, bool keepdim) const {
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

// ---- gradients ----------------------------------------------------------------------------

TensorDict TensorDict::grad() const {
  LeafTree tree(*this);
  std::vector<at::Tensor> out(tree.leaves().size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = tree.leaves()[i].grad();
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false);
}

TensorDict& TensorDict::zero_grad(bool set_to_none) {
  LeafTree tree(*this);
  std::vector<at::Tensor> grads;
  for (const at::Tensor& leaf : tree.leaves()) {
    if (!leaf.grad().defined()) continue;
    if (set_to_none) {
      const_cast<at::Tensor&>(leaf).mutable_grad() = at::Tensor();
    } else {
      grads.push_back(leaf.grad());
    }
  }
  if (!grads.empty()) at::_foreach_zero_(grads);
  return *this;
}

// ---- new_* --------------------------------------------------------------------------------

TensorDict TensorDict::new_zeros(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_zeros of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::zeros(s, t); });
}
TensorDict TensorDict::new_ones(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_ones of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::ones(s, t); });
}
TensorDict TensorDict::new_empty(at::IntArrayRef size, const NewOptions& o) const {
  return NewLike(*this, size, o, "new_empty of",
                 [](at::IntArrayRef s, at::TensorOptions t) { return at::empty(s, t); });
}
TensorDict TensorDict::new_full(at::IntArrayRef size, const at::Scalar& fill_value,
                                const NewOptions& o) const {
  return NewLike(*this, size, o, "new_full of", [&](at::IntArrayRef s, at::TensorOptions t) {
    return at::full(s, fill_value, t);
  });
}

TensorDict TensorDict::new_tensor(const at::Tensor& data, const NewOptions& o) const {
  if (!data.defined()) TD_FAIL(ValueError, "new_tensor: data is an undefined tensor");
  LeafTree tree(*this);
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t, const at::Tensor& x) { return NewTensor(x, data, o); }, "new_tensor of");
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), data.sizes(), /*check=*/false, device,
                      /*nested_extra_dims=*/false);
}

TensorDict TensorDict::new_tensor(const TensorDict& data, const NewOptions& o) const {
  LeafTree tree(*this);
  std::vector<at::Tensor> src =
      tree.Align(data, LeafTree::AlignOptions().name("the data TensorDict"));
  std::vector<at::Tensor> out = MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return NewTensor(x, src[i], o); },
      "new_tensor of");
  std::optional<std::optional<at::Device>> device;
  if (o.device()) device = std::optional<at::Device>(*o.device());
  return tree.Rebuild(std::move(out), data.batch_size(), /*check=*/true, device);
}

// ---- shape helpers ------------------------------------------------------------------------

TensorDict TensorDict::expand_as(const TensorDict& other) const {
  return expand(other.batch_size());
}
TensorDict TensorDict::expand_as(const at::Tensor& other) const { return expand(other.sizes()); }
TensorDict TensorDict::broadcast_to(at::IntArrayRef shape) const { return expand(shape); }

TensorDict TensorDict::movedim(at::IntArrayRef source, at::IntArrayRef destination) const {
  if (source.size() != destination.size()) {
    TD_FAIL(ValueError, "movedim: source ", source, " and destination ", destination,
                     " must have the same number of dims");
  }
  const std::vector<int64_t> src = WrapDims(*this, source, "movedim");
  const std::vector<int64_t> dst = WrapDims(*this, destination, "movedim");
  const int64_t n = batch_dims();
  std::vector<int64_t> perm(n, -1);
  std::vector<bool> used(n, false);
  for (size_t i = 0; i < src.size(); ++i) {
    perm[dst[i]] = src[i];
    used[src[i]] = true;
  }
  int64_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (used[next]) ++next;
    p = next++;
  }
  return permute(perm);
}

std::vector<TensorDict> TensorDict::tensor_split(int64_t sections, int64_t dim) const {
  if (sections < 1) {
    TD_FAIL(ValueError, "tensor_split: the number of sections must be at least 1, got ", sections);
  }
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "tensor_split");
  const int64_t len = batch_size()[d];
  std::vector<TensorDict> out;
  int64_t start = 0;
  for (int64_t k = 0; k < sections; ++k) {
    const int64_t size = len / sections + (k < len % sections ? 1 : 0);
    out.push_back(narrow(d, start, size));
    start += size;
  }
  return out;
}

std::vector<TensorDict> TensorDict::tensor_split(at::IntArrayRef indices, int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "tensor_split");
  const int64_t len = batch_size()[d];
  // Python slice bounds: negative counts from the end, then clamped to [0, len].
  auto bound = [len](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t{0}, len); };
  std::vector<TensorDict> out;
  int64_t start = 0;
  for (size_t k = 0; k <= indices.size(); ++k) {
    const int64_t end = k < indices.size() ? bound(indices[k]) : len;
    out.push_back(narrow(d, start, std::max<int64_t>(0, end - start)));
    start = end;
  }
  return out;
}

// ---- devices ------------------------------------------------------------------------------

TensorDict TensorDict::to(const std::string& device, bool non_blocking) const {
  return to(NormalizeDevice(at::Device(device)), non_blocking);
}

TensorDict TensorDict::cuda(std::optional<int64_t> index) const {
  return to(index ? "cuda:" + std::to_string(*index) : std::string("cuda"));
}

}  // namespace td
