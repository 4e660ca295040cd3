// Small helpers shared by the TensorDict member definitions (tensordict.cc, structure.cc,
// apply.cc, comparison.cc, interop.cc). Not API.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/leaves.h"
#include "td/core/nested_key.h"

namespace td {
class TensorDict;
namespace internal {

// True when `shape` starts with `prefix`.
inline bool StartsWith(at::IntArrayRef shape, at::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

// The shape of `t` as printing and the batch-size checks read it: its sizes; for a nested tensor
// (LibTorch's ragged tensor, whose sizes() throws), the number of components then each dim's
// size, -1 where the components differ.
inline std::vector<int64_t> ShapeOf(const at::Tensor& t) {
  if (!t.is_nested()) return t.sizes().vec();
  const at::Tensor sizes = t._nested_tensor_size().contiguous();  // [components, dims - 1]
  const int64_t n = sizes.size(0);
  std::vector<int64_t> out{n};
  const int64_t* p = sizes.data_ptr<int64_t>();
  for (int64_t d = 0; d < t.dim() - 1; ++d) {
    int64_t size = n > 0 ? p[d] : -1;
    for (int64_t c = 1; c < n && size >= 0; ++c) {
      if (p[c * (t.dim() - 1) + d] != size) size = -1;
    }
    out.push_back(size);
  }
  return out;
}

// True when `t` starts with the batch size `prefix` (ShapeOf: a ragged dim never matches).
inline bool TensorStartsWith(const at::Tensor& t, at::IntArrayRef prefix) {
  return t.is_nested() ? StartsWith(ShapeOf(t), prefix) : StartsWith(t.sizes(), prefix);
}

// The number of elements of the batch size `batch_size` (its dims >= 0). Throws BatchSizeError
// naming the sizes when the product of its non-zero dims does not fit in int64 (LibTorch's own
// rule for a tensor's sizes, so that a TensorDict's batch is a shape a tensor can have).
inline int64_t CheckedNumel(at::IntArrayRef batch_size) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : batch_size) {
    if (d == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(nonzero, d, &nonzero)) {
      TD_FAIL(BatchSizeError, "batch size ", SizeRepr(batch_size),
              ": the product of its dims does not fit in int64 (a batch, like a tensor's "
              "shape, has at most 2^63 - 1 elements)");
    }
  }
  return empty ? 0 : nonzero;
}

// `batch_size` as a vector; throws ValueError when a dim is negative, BatchSizeError when the
// product of its dims overflows int64 (CheckedNumel).
inline std::vector<int64_t> CheckedBatch(at::IntArrayRef batch_size) {
  for (int64_t d : batch_size) {
    if (d < 0) TD_FAIL(ValueError, "batch size ", SizeRepr(batch_size), " has a negative dim");
  }
  CheckedNumel(batch_size);
  return batch_size.vec();
}

// Records that `child`, read under `key` from `parent`, belongs to `parent` when `parent` is
// locked and `child` has no lock record yet (NOTE [ Locks span levels ] in structure.cc).
void NoteLockParent(const TensorDict& parent, const KeyRef& key, const TensorDict& child);

// Runs `body`; an exception it throws gets "while <what> key K" context, keeping its type
// (RethrowWithKey in internal/leaves.h, the one place that adds it).
template <class Body>
auto WithKeyContext(const KeyRef& key, const char* what, Body&& body) {
  try {
    return body();
  } catch (...) {
    RethrowWithKey(key.key(), what);
  }
}

}  // namespace internal
}  // namespace td
