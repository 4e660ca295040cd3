#include "td/core/internal/batch_index.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/leaves.h"

namespace td::internal {
namespace {

using at::indexing::TensorIndex;

// The batch dims an index consumes: a mask one per mask dim, None / Ellipsis / bool none.
int64_t ConsumedDims(const TensorIndex& index) {
  if (index.is_none() || index.is_ellipsis() || index.is_boolean()) return 0;
  if (index.is_tensor()) return IsMask(index.tensor()) ? index.tensor().dim() : 1;
  return 1;
}

}  // namespace

bool IsMask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

BatchIndex ExpandBatchIndex(at::ArrayRef<TensorIndex> indices, at::IntArrayRef batch,
                            const char* op) {
  const int64_t bd = static_cast<int64_t>(batch.size());
  int64_t consumed = 0;
  int ellipses = 0;
  for (const TensorIndex& index : indices) {
    if (index.is_tensor() && !index.tensor().defined()) {
      TD_FAIL(IndexError, op, ": an index tensor is undefined");
    }
    if (index.is_ellipsis()) ++ellipses;
    consumed += ConsumedDims(index);
  }
  if (ellipses > 1) TD_FAIL(IndexError, op, ": an index can only have a single Ellipsis");
  if (consumed > bd) {
    TD_FAIL(IndexError, "too many indices for a TensorDict with batch size ", SizeRepr(batch),
                     ": the index covers ", consumed, " dims but there are only ", bd,
                     " batch dims");
  }
  BatchIndex out;
  out.items.reserve(static_cast<size_t>(std::max<int64_t>(bd, 0)) + indices.size());
  int64_t dim = 0;  // the batch dim the next index applies to
  auto push = [&](const TensorIndex& index, size_t position) {
    const int64_t n = ConsumedDims(index);
    int64_t out_dim = -1;
    if (index.is_integer()) {
      const int64_t v = AsInt(index.integer());
      if (v < -batch[dim] || v >= batch[dim]) {
        TD_FAIL(IndexError, "index ", v, " is out of range for batch dim ", dim, " of size ",
                         batch[dim], " (TensorDict batch size ", SizeRepr(batch), ")");
      }
    } else if (index.is_slice()) {
      if (AsInt(index.slice().step()) < 0) {
        TD_FAIL(ValueError, op, ": negative slice steps are not supported (as for torch tensors): ",
                         "the slice with step ", AsInt(index.slice().step()), " at position ",
                         position, " applies to batch dim ", dim, " of batch size ",
                         SizeRepr(batch), " (use flip(", dim, ") to reverse it)");
      }
      out_dim = out.out_dims++;
    } else if (index.is_none()) {
      out_dim = out.out_dims++;
    } else if (index.is_boolean()) {
      out.has_boolean = true;
    } else if (index.is_tensor()) {
      const at::Tensor& t = index.tensor();
      const bool mask = IsMask(t);
      if (mask && n > 0 && t.sizes() != batch.slice(dim, n)) {
        TD_FAIL(IndexError, "the mask of shape ", SizeRepr(t.sizes()), " does not match batch dims ",
                         dim, "..", dim + n - 1, " of the TensorDict's batch size ",
                         SizeRepr(batch), " (expected a mask of shape ",
                         SizeRepr(batch.slice(dim, n)), ")");
      }
      out.has_tensor = true;
      out_dim = out.out_dims;
      out.out_dims += mask ? 1 : t.dim();
    }
    out.items.push_back({index, index.is_none() || index.is_boolean() ? -1 : dim, out_dim});
    dim += n;
  };
  for (size_t p = 0; p < indices.size(); ++p) {
    if (indices[p].is_ellipsis()) {
      for (int64_t i = 0; i < bd - consumed; ++i) push(at::indexing::Slice(), p);
    } else {
      push(indices[p], p);
    }
  }
  out.given = out.items.size();
  while (dim < bd) push(at::indexing::Slice(), indices.size());
  return out;
}

std::vector<TensorIndex> Indices(const BatchIndex& ex, size_t count) {
  std::vector<TensorIndex> out;
  out.reserve(count);
  for (size_t i = 0; i < count && i < ex.items.size(); ++i) out.push_back(ex.items[i].index);
  return out;
}

bool IsFullSlice(const TensorIndex& index, int64_t size) {
  if (!index.is_slice()) return false;
  const auto& s = index.slice();
  return AsInt(s.start()) == 0 && AsInt(s.step()) == 1 && AsInt(s.stop()) >= size;
}

std::vector<TensorIndex> WithoutTrailingFullSlices(const BatchIndex& ex, at::IntArrayRef sizes) {
  size_t n = ex.items.size();
  while (n > 0) {
    const BatchIndex::Item& item = ex.items[n - 1];
    if (item.dim < 0 || item.dim >= static_cast<int64_t>(sizes.size()) ||
        !IsFullSlice(item.index, sizes[item.dim])) {
      break;
    }
    --n;
  }
  return Indices(ex, n);
}

std::vector<int64_t> Positions(const TensorIndex& index, int64_t size, bool* single) {
  *single = false;
  std::vector<int64_t> out;
  if (index.is_integer()) {
    const int64_t i = AsInt(index.integer());
    const int64_t p = i < 0 ? i + size : i;
    if (p < 0 || p >= size) {
      TD_FAIL(IndexError, "index ", i, " is out of bounds for a dim of size ", size);
    }
    *single = true;
    out.push_back(p);
    return out;
  }
  if (index.is_slice()) {
    // Python's slice semantics (what Tensor::index does for a slice).
    const auto& s = index.slice();
    const int64_t step = AsInt(s.step());
    if (step <= 0) TD_FAIL(ValueError, "slice step must be positive, got ", step);
    auto clamp = [size](int64_t v) {
      if (v < 0) v += size;
      return std::min(std::max<int64_t>(v, 0), size);
    };
    const int64_t start = clamp(AsInt(s.start()));
    const int64_t stop = clamp(AsInt(s.stop()));
    for (int64_t p = start; p < stop; p += step) out.push_back(p);
    return out;
  }
  at::Tensor pos = at::arange(size, at::kLong).index({index}).reshape({-1}).contiguous();
  out.assign(pos.data_ptr<int64_t>(), pos.data_ptr<int64_t>() + pos.numel());
  return out;
}

}  // namespace td::internal
