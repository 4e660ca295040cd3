// Shape operations on the batch dims: view, reshape, squeeze, unsqueeze, permute, transpose,
// expand, flatten, unflatten, split, chunk, unbind, flip (fliplr, flipud), roll, rot90, narrow,
// repeat, tile, repeat_interleave, gather, where, masked_fill(_), masked_select, pad, atleast_*d. Each computes the result batch size from the
// batch size with the tensor op's own rules, normalises dims against the batch dims, and maps
// the op over every leaf (see NOTE [ Leaf maps ] in td/core/internal/leaves.h).
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <algorithm>
#include <numeric>

#include "td/core/dtype.h"
#include "td/core/lazy_legacy.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/internal/in_place.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

using internal::LeafTree;
using internal::MapEach;
using internal::WrapBatchDim;

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

int64_t Numel(at::IntArrayRef s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<int64_t>());
}

// `shape` with its -1 resolved so that it holds `numel` elements. Throws ValueError naming `op`.
std::vector<int64_t> InferShape(at::IntArrayRef shape, int64_t numel, at::IntArrayRef batch,
                                const char* op) {
  std::vector<int64_t> out = shape.vec();
  int64_t infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) TD_FAIL(ValueError, op, ": only one dimension can be -1, got ", shape);
      infer = static_cast<int64_t>(i);
    } else if (out[i] < 0) {
      TD_FAIL(ValueError, op, ": invalid size ", out[i], " in shape ", shape);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      TD_FAIL(ValueError, op, ": shape ", shape, " is invalid for a TensorDict with batch size ",
                       SizeRepr(batch), " (", numel, " elements)");
    }
    out[infer] = numel / known;
  } else if (known != numel) {
    TD_FAIL(ValueError, op, ": shape ", shape, " is invalid for a TensorDict with batch size ",
                     SizeRepr(batch), " (", numel, " elements)");
  }
  return out;
}

// Maps `fn` (which must keep feature dims and give batch `batch`) over every leaf. `origins`
// says where each result dim comes from, for dim names (NOTE [ Dim names ] in
// td/core/names.cc); without it names are kept when the number of batch dims is. `fn` moves
// batch elements, and NonTensorStacks move with them (NOTE [ Non-tensor stacks ]) unless `mode`
// is kCarry: for functions that also write values (where, masked_fill, pad).
template <class Fn>
TensorDict MapShape(const TensorDict& td, at::IntArrayRef batch, const char* what, Fn&& fn,
                    std::optional<internal::DimOriginsFn> origins = std::nullopt,
                    LeafTree::NonTensorMode mode = LeafTree::NonTensorMode::kMove) {
  LeafTree tree(td, mode);
  std::vector<at::Tensor> out =
      MapEach(tree, [&](size_t, const at::Tensor& leaf) { return fn(leaf); }, what);
  return tree.Rebuild(std::move(out), batch, /*check=*/false, std::nullopt, true, origins);
}
constexpr LeafTree::NonTensorMode kWritesValues = LeafTree::NonTensorMode::kCarry;

// DimOrigins of an op that keeps the dims listed in `keep` (in result order; -1: a new dim).
internal::DimOrigins Origins(at::IntArrayRef keep) {
  return internal::DimOrigins(keep.begin(), keep.end());
}
// Every dim new: the result's dims are unnamed (view / reshape to another shape).
internal::DimOrigins NoOrigins(size_t ndim) { return internal::DimOrigins(ndim, -1); }

// Leaf shape for a new batch: `batch` + the leaf's dims after the old `bd` batch dims.
std::vector<int64_t> LeafShape(at::IntArrayRef batch, const at::Tensor& leaf, int64_t bd) {
  return Concat(batch, leaf.sizes().slice(bd));
}

std::vector<TensorDict> RebuildEach(const LeafTree& tree,
                                    std::vector<std::vector<at::Tensor>> outputs,
                                    const std::vector<std::vector<int64_t>>& batches,
                                    std::optional<internal::DimOriginsFn> origins = std::nullopt) {
  std::vector<TensorDict> result;
  result.reserve(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    result.push_back(tree.Rebuild(std::move(outputs[k]), batches[k], /*check=*/false,
                                  std::nullopt, true, origins));
  }
  return result;
}

// `mask` (bool) viewed so that it broadcasts over a leaf: its dims cover the leading batch dims.
at::Tensor MaskForLeaf(const at::Tensor& mask, const at::Tensor& leaf) {
  if (leaf.dim() == mask.dim()) return mask;
  std::vector<int64_t> shape = mask.sizes().vec();
  shape.resize(leaf.dim(), 1);
  return mask.view(shape);
}

// Checks a condition / mask of where(), masked_fill(): bool, covering leading batch dims, each
// of its dims 1 or the batch dim.
void CheckLeadingMask(const at::Tensor& mask, at::IntArrayRef batch, const char* op) {
  if (!mask.defined()) TD_FAIL(ValueError, op, ": the mask is undefined");
  if (mask.scalar_type() != at::kBool) {
    TD_FAIL(TypeError, op, ": the mask must be a bool tensor, got ", DtypeName(mask.scalar_type()));
  }
  bool ok = mask.dim() <= static_cast<int64_t>(batch.size());
  for (int64_t i = 0; ok && i < mask.dim(); ++i) {
    ok = mask.size(i) == 1 || mask.size(i) == batch[i];
  }
  if (!ok) {
    TD_FAIL(ValueError, op, ": the mask of shape ", SizeRepr(mask.sizes()),
                     " does not match the leading batch dims of batch size ", SizeRepr(batch),
                     " (each of its dims must be 1 or the batch dim)");
  }
}

std::vector<int64_t> SplitSizes(int64_t size, int64_t split_size) {
  std::vector<int64_t> out;
  if (size == 0) return {0};
  for (int64_t start = 0; start < size; start += split_size) {
    out.push_back(std::min(split_size, size - start));
  }
  return out;
}

}  // namespace

TensorDict TensorDict::view(at::IntArrayRef shape) const {
  const int64_t bd = batch_dims();
  std::vector<int64_t> nb = InferShape(shape, numel(), batch_size(), "view");
  if (lazy_legacy()) {  // NOTE [ Lazy legacy ] in td/core/lazy_legacy.h
    if (at::IntArrayRef(nb) == batch_size()) return *this;
    return internal::hooks::reshape_view.require()(*this, nb);
  }
  const bool same = at::IntArrayRef(nb).equals(batch_size());
  return MapShape(
      *this, nb, "viewing", [&](const at::Tensor& t) { return t.view(LeafShape(nb, t, bd)); },
      same ? std::nullopt
           : std::optional<internal::DimOriginsFn>([&] { return NoOrigins(nb.size()); }));
}

TensorDict TensorDict::reshape(at::IntArrayRef shape) const {
  const int64_t bd = batch_dims();
  std::vector<int64_t> nb = InferShape(shape, numel(), batch_size(), "reshape");
  const bool same = at::IntArrayRef(nb).equals(batch_size());
  return MapShape(
      *this, nb, "reshaping", [&](const at::Tensor& t) { return t.reshape(LeafShape(nb, t, bd)); },
      same ? std::nullopt
           : std::optional<internal::DimOriginsFn>([&] { return NoOrigins(nb.size()); }));
}

TensorDict TensorDict::squeeze(std::optional<int64_t> dim) const {
  std::vector<int64_t> dims;  // descending
  if (dim) {
    const int64_t d = WrapBatchDim(*dim, batch_dims(), batch_size(), "squeeze");
    if (batch_size()[d] == 1) dims.push_back(d);
  } else {
    for (int64_t d = batch_dims() - 1; d >= 0; --d) {
      if (batch_size()[d] == 1) dims.push_back(d);
    }
  }
  if (lazy_legacy()) {  // NOTE [ Lazy legacy ] in td/core/lazy_legacy.h
    TensorDict out = *this;
    for (int64_t d : dims) out = internal::hooks::squeeze_view.require()(out, d);
    return out;
  }
  std::vector<int64_t> nb = batch_size().vec();
  for (int64_t d : dims) nb.erase(nb.begin() + d);
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t d = 0; d < batch_dims(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) o.push_back(d);
    }
    return o;
  };
  return MapShape(
      *this, nb, "squeezing",
      [&](const at::Tensor& t) {
        at::Tensor r = t;
        for (int64_t d : dims) r = r.squeeze(d);
        return r;
      },
      origins);
}

TensorDict TensorDict::unsqueeze(int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims() + 1, batch_size(), "unsqueeze");
  if (lazy_legacy()) return internal::hooks::unsqueeze_view.require()(*this, d);
  std::vector<int64_t> nb = batch_size().vec();
  nb.insert(nb.begin() + d, 1);
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < batch_dims(); ++i) o.push_back(i);
    o.insert(o.begin() + d, -1);
    return o;
  };
  return MapShape(
      *this, nb, "unsqueezing", [d](const at::Tensor& t) { return t.unsqueeze(d); }, origins);
}

TensorDict TensorDict::permute(at::IntArrayRef dims) const {
  const int64_t bd = batch_dims();
  if (static_cast<int64_t>(dims.size()) != bd) {
    TD_FAIL(ValueError, "permute: got ", dims.size(), " dims ", dims,
                     " for a TensorDict with batch size ", SizeRepr(batch_size()), " (", bd,
                     " batch dims)");
  }
  std::vector<int64_t> perm(bd);
  std::vector<bool> seen(bd, false);
  std::vector<int64_t> nb(bd);
  for (int64_t i = 0; i < bd; ++i) {
    perm[i] = WrapBatchDim(dims[i], bd, batch_size(), "permute");
    if (seen[perm[i]]) TD_FAIL(ValueError, "permute: dim ", dims[i], " repeats in ", dims);
    seen[perm[i]] = true;
    nb[i] = batch_size()[perm[i]];
  }
  if (lazy_legacy()) return internal::hooks::permute_view.require()(*this, perm);
  return MapShape(
      *this, nb, "permuting",
      [&](const at::Tensor& t) {
        std::vector<int64_t> full = perm;
        for (int64_t i = bd; i < t.dim(); ++i) full.push_back(i);
        return t.permute(full);
      },
      [&] { return Origins(perm); });
}

TensorDict TensorDict::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t d0 = WrapBatchDim(dim0, batch_dims(), batch_size(), "transpose");
  const int64_t d1 = WrapBatchDim(dim1, batch_dims(), batch_size(), "transpose");
  if (lazy_legacy()) return internal::hooks::transpose_view.require()(*this, d0, d1);
  std::vector<int64_t> nb = batch_size().vec();
  std::swap(nb[d0], nb[d1]);
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < batch_dims(); ++i) o.push_back(i);
    std::swap(o[d0], o[d1]);
    return o;
  };
  return MapShape(
      *this, nb, "transposing", [=](const at::Tensor& t) { return t.transpose(d0, d1); }, origins);
}

TensorDict TensorDict::expand(at::IntArrayRef shape) const {
  const int64_t bd = batch_dims();
  const int64_t nd = static_cast<int64_t>(shape.size());
  if (nd < bd) {
    TD_FAIL(ValueError, "expand: the shape ", shape, " has fewer dims than the batch size ",
                     SizeRepr(batch_size()));
  }
  std::vector<int64_t> nb = shape.vec();
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t j = i - (nd - bd);  // the aligned old batch dim
    if (j < 0) {
      if (nb[i] < 0) {
        TD_FAIL(ValueError, "expand: the new leading dim ", i, " of ", shape, " must be >= 0");
      }
      continue;
    }
    const int64_t old = batch_size()[j];
    if (nb[i] == -1) nb[i] = old;
    if (nb[i] != old && old != 1) {
      TD_FAIL(ValueError, "expand: cannot expand batch size ", SizeRepr(batch_size()), " to ",
                       shape, ": dim ", j, " has size ", old, " (only dims of size 1 expand)");
    }
  }
  auto origins = [&] {
    internal::DimOrigins o(nd - bd, -1);
    for (int64_t i = 0; i < bd; ++i) o.push_back(i);
    return o;
  };
  return MapShape(
      *this, nb, "expanding", [&](const at::Tensor& t) { return t.expand(LeafShape(nb, t, bd)); },
      origins);
}

TensorDict TensorDict::flatten(int64_t start_dim, int64_t end_dim) const {
  if (batch_dims() == 0) return unsqueeze(0);  // torch: a 0-dim tensor flattens to [1]
  const int64_t s = WrapBatchDim(start_dim, batch_dims(), batch_size(), "flatten");
  const int64_t e = WrapBatchDim(end_dim, batch_dims(), batch_size(), "flatten");
  if (s > e) TD_FAIL(ValueError, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
  std::vector<int64_t> nb(batch_size().begin(), batch_size().begin() + s);
  nb.push_back(Numel(batch_size().slice(s, e - s + 1)));
  nb.insert(nb.end(), batch_size().begin() + e + 1, batch_size().end());
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < s; ++i) o.push_back(i);
    o.push_back(s == e ? s : -1);  // one dim flattened keeps its name
    for (int64_t i = e + 1; i < batch_dims(); ++i) o.push_back(i);
    return o;
  };
  return MapShape(
      *this, nb, "flattening", [=](const at::Tensor& t) { return t.flatten(s, e); }, origins);
}

TensorDict TensorDict::unflatten(int64_t dim, at::IntArrayRef sizes) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "unflatten");
  if (sizes.empty()) TD_FAIL(ValueError, "unflatten: sizes must not be empty");
  std::vector<int64_t> piece = InferShape(sizes, batch_size()[d], batch_size(), "unflatten");
  std::vector<int64_t> nb(batch_size().begin(), batch_size().begin() + d);
  nb.insert(nb.end(), piece.begin(), piece.end());
  nb.insert(nb.end(), batch_size().begin() + d + 1, batch_size().end());
  const int64_t bd = batch_dims();
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < d; ++i) o.push_back(i);
    o.insert(o.end(), piece.size(), -1);
    for (int64_t i = d + 1; i < bd; ++i) o.push_back(i);
    return o;
  };
  return MapShape(
      *this, nb, "unflattening", [&](const at::Tensor& t) { return t.view(LeafShape(nb, t, bd)); },
      origins);
}

std::vector<TensorDict> TensorDict::split(int64_t split_size, int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "split");
  // As at::split: a size of 0 only splits a dim of size 0 (into one piece).
  if (split_size < 0 || (split_size == 0 && batch_size()[d] != 0)) {
    TD_FAIL(ValueError, "split: split_size must be positive (or 0 for a dim of size 0), got ",
            split_size, " for batch dim ", d, " of size ", batch_size()[d]);
  }
  return split(SplitSizes(batch_size()[d], split_size), d);
}

std::vector<TensorDict> TensorDict::split(at::IntArrayRef split_sizes, int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    if (s < 0) TD_FAIL(ValueError, "split: negative size in ", split_sizes);
    total += s;
  }
  if (total != batch_size()[d]) {
    TD_FAIL(ValueError, "split: sizes ", split_sizes, " sum to ", total, " but batch dim ", d,
                     " has size ", batch_size()[d], " (batch size ", SizeRepr(batch_size()), ")");
  }
  std::vector<std::vector<int64_t>> batches;
  for (int64_t s : split_sizes) {
    batches.push_back(batch_size().vec());
    batches.back()[d] = s;
  }
  LeafTree tree(*this, LeafTree::NonTensorMode::kMove);
  std::vector<int64_t> sizes = split_sizes.vec();
  auto outs = internal::MapEachMulti(
      tree, sizes.size(),
      [&](size_t, const at::Tensor& t) { return t.split_with_sizes(sizes, d); }, "splitting");
  return RebuildEach(tree, std::move(outs), batches);
}

std::vector<TensorDict> TensorDict::chunk(int64_t chunks, int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "chunk");
  if (chunks <= 0) TD_FAIL(ValueError, "chunk: chunks must be positive, got ", chunks);
  const int64_t size = batch_size()[d];
  // As at::chunk: a dim of size 0 gives `chunks` empty pieces.
  if (size == 0) return split(std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  const int64_t split_size = (size + chunks - 1) / chunks;
  return split(SplitSizes(size, split_size), d);
}

std::vector<TensorDict> TensorDict::unbind(int64_t dim) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "unbind");
  const int64_t n = batch_size()[d];
  std::vector<int64_t> nb = batch_size().vec();
  nb.erase(nb.begin() + d);
  LeafTree tree(*this, LeafTree::NonTensorMode::kMove);
  auto outs = internal::MapEachMulti(
      tree, n, [d](size_t, const at::Tensor& t) { return t.unbind(d); }, "unbinding");
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < batch_dims(); ++i) {
      if (i != d) o.push_back(i);
    }
    return o;
  };
  return RebuildEach(tree, std::move(outs), std::vector<std::vector<int64_t>>(n, nb), origins);
}

TensorDict TensorDict::flip(at::IntArrayRef dims) const {
  std::vector<int64_t> ds;
  for (int64_t d : dims) {
    ds.push_back(WrapBatchDim(d, batch_dims(), batch_size(), "flip"));
    if (std::count(ds.begin(), ds.end(), ds.back()) > 1) {
      TD_FAIL(ValueError, "flip: batch dim ", ds.back(), " appears more than once in ", dims);
    }
  }
  return MapShape(*this, batch_size(), "flipping", [&](const at::Tensor& t) { return t.flip(ds); });
}

TensorDict TensorDict::roll(at::IntArrayRef shifts, at::IntArrayRef dims) const {
  if (shifts.size() != dims.size() || dims.empty()) {
    TD_FAIL(ValueError, "roll: needs one shift per dim, got shifts ", shifts, " and dims ", dims);
  }
  std::vector<int64_t> ds;
  for (int64_t d : dims) ds.push_back(WrapBatchDim(d, batch_dims(), batch_size(), "roll"));
  return MapShape(*this, batch_size(), "rolling",
                  [&](const at::Tensor& t) { return t.roll(shifts, ds); });
}

TensorDict TensorDict::narrow(int64_t dim, int64_t start, int64_t length) const {
  const int64_t d = WrapBatchDim(dim, batch_dims(), batch_size(), "narrow");
  const int64_t size = batch_size()[d];
  const int64_t s = start < 0 ? start + size : start;
  if (s < 0 || s > size || length < 0 || s + length > size) {
    TD_FAIL(IndexError, "narrow: start ", start, " and length ", length,
                     " are out of range for batch dim ", d, " of size ", size, " (batch size ",
                     SizeRepr(batch_size()), ")");
  }
  std::vector<int64_t> nb = batch_size().vec();
  nb[d] = length;
  return MapShape(*this, nb, "narrowing",
                  [=](const at::Tensor& t) { return t.narrow(d, s, length); });
}

TensorDict TensorDict::repeat(at::IntArrayRef repeats) const {
  const int64_t bd = batch_dims();
  const int64_t nr = static_cast<int64_t>(repeats.size());
  if (nr < bd) {
    TD_FAIL(ValueError, "repeat: got ", nr, " repeats ", repeats, " for a TensorDict with batch size ",
                     SizeRepr(batch_size()), " (at least ", bd, " needed)");
  }
  std::vector<int64_t> nb(nr);
  for (int64_t i = 0; i < nr; ++i) {
    if (repeats[i] < 0) TD_FAIL(ValueError, "repeat: negative repeat in ", repeats);
    const int64_t j = i - (nr - bd);
    nb[i] = repeats[i] * (j >= 0 ? batch_size()[j] : 1);
  }
  return MapShape(*this, nb, "repeating", [&](const at::Tensor& t) {
    // Leaf: the same repeats over its batch dims, 1 over its feature dims.
    std::vector<int64_t> r = repeats.vec();
    r.resize(nr + (t.dim() - bd), 1);
    return t.repeat(r);
  });
}

TensorDict TensorDict::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  if (repeats < 0) TD_FAIL(ValueError, "repeat_interleave: repeats must be >= 0, got ", repeats);
  if (!dim) return flatten().repeat_interleave(repeats, 0);
  const int64_t d = WrapBatchDim(*dim, batch_dims(), batch_size(), "repeat_interleave");
  std::vector<int64_t> nb = batch_size().vec();
  nb[d] *= repeats;
  return MapShape(*this, nb, "repeating",
                  [=](const at::Tensor& t) { return t.repeat_interleave(repeats, d); });
}

TensorDict TensorDict::repeat_interleave(const at::Tensor& repeats,
                                         std::optional<int64_t> dim) const {
  if (!dim) return flatten().repeat_interleave(repeats, 0);
  const int64_t d = WrapBatchDim(*dim, batch_dims(), batch_size(), "repeat_interleave");
  if (!repeats.defined() || repeats.dim() > 1 ||
      (repeats.dim() == 1 && repeats.size(0) != batch_size()[d] && repeats.size(0) != 1)) {
    TD_FAIL(ValueError, "repeat_interleave: repeats must be a scalar or have one entry per element of "
                     "batch dim ", d, " (size ", batch_size()[d], "), got shape ",
                     repeats.defined() ? SizeRepr(repeats.sizes()) : "undefined");
  }
  if (at::isFloatingType(repeats.scalar_type()) || repeats.scalar_type() == at::kBool) {
    TD_FAIL(TypeError, "repeat_interleave: repeats must be an integer tensor, got ",
                    DtypeName(repeats.scalar_type()));
  }
  at::Tensor r = repeats.to(at::kLong);
  if (r.numel() > 0 && r.min().item<int64_t>() < 0) {
    TD_FAIL(ValueError, "repeat_interleave: repeats must be >= 0");
  }
  std::vector<int64_t> nb = batch_size().vec();
  nb[d] = r.dim() == 0 || r.size(0) == 1 ? nb[d] * r.reshape({-1})[0].item<int64_t>()
                                         : r.sum().item<int64_t>();
  const int64_t out_size = nb[d];
  return MapShape(*this, nb, "repeating", [&](const at::Tensor& t) {
    return t.repeat_interleave(r, d, out_size);
  });
}

TensorDict TensorDict::gather(int64_t dim, const at::Tensor& index) const {
  const int64_t bd = batch_dims();
  const int64_t d = WrapBatchDim(dim, bd, batch_size(), "gather");
  if (!index.defined() || index.scalar_type() != at::kLong) {
    TD_FAIL(TypeError, "gather: the index must be a long tensor");
  }
  if (index.dim() != bd) {
    TD_FAIL(ValueError, "gather: the index of shape ", SizeRepr(index.sizes()), " must have ", bd,
                     " dims, one per batch dim of batch size ", SizeRepr(batch_size()));
  }
  for (int64_t i = 0; i < bd; ++i) {
    if (i != d && index.size(i) > batch_size()[i]) {
      TD_FAIL(ValueError, "gather: the index of shape ", SizeRepr(index.sizes()),
                       " is larger than the batch size ", SizeRepr(batch_size()), " in dim ", i);
    }
  }
  if (index.numel() > 0) {
    const int64_t lo = index.min().item<int64_t>();
    const int64_t hi = index.max().item<int64_t>();
    if (lo < 0 || hi >= batch_size()[d]) {
      TD_FAIL(IndexError, "gather: index values must be in [0, ", batch_size()[d],
                       ") for batch dim ", d, " (batch size ", SizeRepr(batch_size()), "), got [",
                       lo, ", ", hi, "]");
    }
  }
  return MapShape(*this, index.sizes(), "gathering", [&](const at::Tensor& t) {
    std::vector<int64_t> shape = index.sizes().vec();
    shape.resize(t.dim(), 1);
    at::Tensor idx = index.view(shape).expand(LeafShape(index.sizes(), t, bd));
    return t.gather(d, idx);
  });
}

TensorDict TensorDict::where(const at::Tensor& condition, const TensorDict& other) const {
  CheckLeadingMask(condition, batch_size(), "where");
  if (other.batch_size() != batch_size()) {
    TD_FAIL(BatchSizeError, "where: the other TensorDict's batch size ", SizeRepr(other.batch_size()),
                         " differs from ", SizeRepr(batch_size()));
  }
  LeafTree tree(*this);
  std::vector<at::Tensor> others =
      tree.Align(other, LeafTree::AlignOptions().name("the other TensorDict"));
  std::vector<at::Tensor> out = MapEach(
      tree,
      [&](size_t i, const at::Tensor& t) {
        return at::where(MaskForLeaf(condition, t), t, others[i]);
      },
      "where() on");
  return tree.Rebuild(std::move(out), batch_size());
}

TensorDict TensorDict::where(const at::Tensor& condition, const at::Scalar& other) const {
  CheckLeadingMask(condition, batch_size(), "where");
  return MapShape(*this, batch_size(), "where() on", [&](const at::Tensor& t) {
    // The Scalar overload promotes as torch.where does (a bool leaf and 2 give int64).
    return at::where(MaskForLeaf(condition, t), t, other);
  }, std::nullopt, kWritesValues);
}

TensorDict TensorDict::masked_fill(const at::Tensor& mask, const at::Scalar& value) const {
  CheckLeadingMask(mask, batch_size(), "masked_fill");
  return MapShape(*this, batch_size(), "masked_fill on", [&](const at::Tensor& t) {
    return t.masked_fill(MaskForLeaf(mask, t), value);
  }, std::nullopt, kWritesValues);
}

TensorDict& TensorDict::masked_fill_(const at::Tensor& mask, const at::Scalar& value) {
  CheckLeadingMask(mask, batch_size(), "masked_fill_");
  internal::WriteLeaves(*this, "masked_fill_", [&](const LeafTree& tree) {
    internal::CheckScalarFits(tree, value, "masked_fill_ on");
    MapEach(
        tree,
        [&](size_t, const at::Tensor& t) {
          at::Tensor target = t;
          target.masked_fill_(MaskForLeaf(mask, t), value);
          return at::Tensor();
        },
        "masked_fill_ on");
  });
  return *this;
}

TensorDict TensorDict::masked_select(const at::Tensor& mask) const {
  if (!mask.defined() || mask.scalar_type() != at::kBool) {
    TD_FAIL(TypeError, "masked_select: the mask must be a bool tensor");
  }
  if (mask.dim() == 0) TD_FAIL(ValueError, "masked_select: the mask must have at least one dim");
  return index({mask});
}

TensorDict TensorDict::pad(at::IntArrayRef pad, const at::Scalar& value) const {
  const int64_t bd = batch_dims();
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size()) > 2 * bd) {
    TD_FAIL(ValueError, "pad: expected (before, after) pairs for at most ", bd,
                     " batch dims of batch size ", SizeRepr(batch_size()), ", got ", pad);
  }
  std::vector<int64_t> nb = batch_size().vec();
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    // As constant_pad_nd: negative amounts remove elements first, and cannot remove more than
    // the dim has ([-1, 2] of a size-0 dim is refused, not a size-1 dim).
    const int64_t removed =
        std::min<int64_t>(pad[2 * i], 0) + std::min<int64_t>(pad[2 * i + 1], 0);
    nb[i] += pad[2 * i] + pad[2 * i + 1];
    if (nb[i] < 0 || batch_size()[i] + removed < 0) {
      TD_FAIL(ValueError, "pad: padding ", pad, " removes more than batch dim ", i,
              " has or makes it negative (batch size ", SizeRepr(batch_size()), ")");
    }
  }
  return MapShape(*this, nb, "padding", [&](const at::Tensor& t) {
    // constant_pad_nd takes pairs from the last dim backwards.
    const size_t npad = pad.size() / 2;
    std::vector<int64_t> p(2 * t.dim(), 0);
    for (size_t i = 0; i < npad; ++i) {
      const size_t from_last = t.dim() - 1 - i;
      p[2 * from_last] = pad[2 * i];
      p[2 * from_last + 1] = pad[2 * i + 1];
    }
    return at::constant_pad_nd(t, p, value);
  }, std::nullopt, kWritesValues);
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
  const std::vector<int64_t> src = internal::WrapBatchDims(*this, source, "movedim");
  const std::vector<int64_t> dst = internal::WrapBatchDims(*this, destination, "movedim");
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

TensorDict TensorDict::moveaxis(at::IntArrayRef source, at::IntArrayRef destination) const {
  return movedim(source, destination);
}

TensorDict TensorDict::swapaxes(int64_t axis0, int64_t axis1) const {
  return transpose(axis0, axis1);
}

TensorDict TensorDict::swapdims(int64_t dim0, int64_t dim1) const { return transpose(dim0, dim1); }

TensorDict TensorDict::fliplr() const {
  if (batch_dims() < 2) {
    TD_FAIL(ValueError, "fliplr: needs at least 2 batch dims; the batch size is ",
            SizeRepr(batch_size()));
  }
  return flip({1});
}

TensorDict TensorDict::flipud() const {
  if (batch_dims() < 1) {
    TD_FAIL(ValueError, "flipud: needs at least 1 batch dim; the batch size is ",
            SizeRepr(batch_size()));
  }
  return flip({0});
}

TensorDict TensorDict::rot90(int64_t k, at::IntArrayRef dims) const {
  if (dims.size() != 2) {
    TD_FAIL(ValueError, "rot90: dims must name two batch dims, got ", dims, " for batch size ",
            SizeRepr(batch_size()));
  }
  const int64_t d0 = WrapBatchDim(dims[0], batch_dims(), batch_size(), "rot90");
  const int64_t d1 = WrapBatchDim(dims[1], batch_dims(), batch_size(), "rot90");
  if (d0 == d1) {
    TD_FAIL(ValueError, "rot90: dims must be two different batch dims, got ", dims,
            " for batch size ", SizeRepr(batch_size()));
  }
  std::vector<int64_t> nb = batch_size().vec();
  if (k % 2 != 0) std::swap(nb[d0], nb[d1]);
  auto origins = [&] {
    internal::DimOrigins o;
    for (int64_t i = 0; i < batch_dims(); ++i) o.push_back(i);
    if (k % 2 != 0) std::swap(o[d0], o[d1]);
    return o;
  };
  return MapShape(
      *this, nb, "rotating", [&](const at::Tensor& t) { return at::rot90(t, k, {d0, d1}); },
      origins);
}

TensorDict TensorDict::tile(at::IntArrayRef dims) const {
  // torch.tile: fewer entries than dims are padded with leading 1s; then it is repeat.
  std::vector<int64_t> repeats(dims.begin(), dims.end());
  if (static_cast<int64_t>(repeats.size()) < batch_dims()) {
    repeats.insert(repeats.begin(), batch_dims() - static_cast<int64_t>(repeats.size()), 1);
  }
  return repeat(repeats);
}

namespace {
// `td` with leading batch dims of size 1 added up to `n` batch dims (torch.atleast_<n>d).
TensorDict AtLeast(const TensorDict& td, int64_t n) {
  TensorDict out = td;
  while (out.batch_dims() < n) out = out.unsqueeze(0);
  return out;
}
}  // namespace

TensorDict TensorDict::atleast_1d() const { return AtLeast(*this, 1); }
TensorDict TensorDict::atleast_2d() const { return AtLeast(*this, 2); }
TensorDict TensorDict::atleast_3d() const { return AtLeast(*this, 3); }

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

TensorDict TensorDict::where(const at::Tensor& condition, const TensorDict& other,
                             const at::Scalar& pad) const {
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  TensorDict self_p = copy();
  TensorDict other_p = other.copy();
  for (const Item& item : other.items(leaves)) {
    if (item.second.is_tensor() && !contains(item.first)) {
      self_p.set(item.first, at::full_like(item.second.tensor(), pad));
    }
  }
  for (const Item& item : items(leaves)) {
    if (item.second.is_tensor() && !other.contains(item.first)) {
      other_p.set(item.first, at::full_like(item.second.tensor(), pad));
    }
  }
  return self_p.where(condition, other_p);
}

}  // namespace td
