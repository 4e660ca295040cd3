#include "td/backends/index_util.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace td {
namespace backends_internal {
namespace {

int64_t ConsumedDims(const at::indexing::TensorIndex& index) {
  if (index.is_none() || index.is_ellipsis()) return 0;
  if (index.is_tensor()) {
    const at::Tensor& t = index.tensor();
    return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte ? t.dim() : 1;
  }
  return 1;
}

}  // namespace

std::optional<ExpandedIndex> ExpandIndices(at::ArrayRef<at::indexing::TensorIndex> indices,
                                           int64_t batch_dims) {
  int64_t consumed = 0;
  int ellipses = 0;
  for (const auto& index : indices) {
    if (index.is_boolean()) return std::nullopt;
    if (index.is_ellipsis()) ++ellipses;
    consumed += ConsumedDims(index);
  }
  if (ellipses > 1 || consumed > batch_dims) return std::nullopt;
  ExpandedIndex out;
  int64_t dim = 0;
  auto push = [&](const at::indexing::TensorIndex& index) {
    const int64_t n = ConsumedDims(index);
    int64_t out_dim = -1;
    if (index.is_none() || index.is_slice()) {
      out_dim = out.out_dims++;
    } else if (index.is_tensor()) {
      out.has_tensor = true;
      const at::Tensor& t = index.tensor();
      const bool mask = t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
      out_dim = out.out_dims;
      out.out_dims += mask ? 1 : t.dim();
    }
    out.items.push_back({index, index.is_none() ? -1 : dim, out_dim});
    dim += n;
  };
  for (const auto& index : indices) {
    if (index.is_ellipsis()) {
      for (int64_t i = 0; i < batch_dims - consumed; ++i) push(at::indexing::Slice());
    } else {
      push(index);
    }
  }
  while (dim < batch_dims) push(at::indexing::Slice());
  return out;
}

bool IsFullSlice(const at::indexing::TensorIndex& index, int64_t size) {
  if (!index.is_slice()) return false;
  const auto& s = index.slice();
  return AsInt(s.start()) == 0 && AsInt(s.step()) == 1 && AsInt(s.stop()) >= size;
}

std::vector<int64_t> Positions(const at::indexing::TensorIndex& index, int64_t size,
                               bool* single) {
  *single = false;
  std::vector<int64_t> out;
  if (index.is_integer()) {
    const int64_t i = AsInt(index.integer());
    const int64_t p = i < 0 ? i + size : i;
    if (p < 0 || p >= size) {
      TORCH_CHECK_INDEX(false, "index ", i, " is out of bounds for dimension 0 with size ", size);
    }
    *single = true;
    out.push_back(p);
    return out;
  }
  if (index.is_slice()) {
    // Python's slice semantics (what Tensor::index does for a slice).
    const auto& s = index.slice();
    const int64_t step = AsInt(s.step());
    TORCH_CHECK_VALUE(step > 0, "slice step must be positive, got ", step);
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

std::vector<at::indexing::TensorIndex> WithoutTrailingFullSlices(const ExpandedIndex& ex,
                                                                 at::IntArrayRef sizes) {
  size_t n = ex.items.size();
  while (n > 0) {
    const auto& item = ex.items[n - 1];
    if (item.dim < 0 || item.dim >= static_cast<int64_t>(sizes.size()) ||
        !IsFullSlice(item.index, sizes[item.dim])) {
      break;
    }
    --n;
  }
  std::vector<at::indexing::TensorIndex> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(ex.items[i].index);
  return out;
}

std::vector<at::indexing::TensorIndex> Indices(const std::vector<ExpandedIndex::Item>& items) {
  std::vector<at::indexing::TensorIndex> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(item.index);
  return out;
}

}  // namespace backends_internal
}  // namespace td
