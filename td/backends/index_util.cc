#include "td/backends/index_util.h"

#include <ATen/ATen.h>

namespace td {
namespace backends_internal {
namespace {

// Slice bounds are int64_t in LibTorch 1.13 and c10::SymInt in 2.x.
template <class T>
int64_t AsInt(const T& v) {
  if constexpr (std::is_integral_v<T>) {
    return v;
  } else {
    return v.expect_int();
  }
}

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

at::Tensor Positions(const at::indexing::TensorIndex& index, int64_t size) {
  return at::arange(size, at::kLong).index({index});
}

std::vector<at::indexing::TensorIndex> Indices(const std::vector<ExpandedIndex::Item>& items) {
  std::vector<at::indexing::TensorIndex> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(item.index);
  return out;
}

}  // namespace backends_internal
}  // namespace td
