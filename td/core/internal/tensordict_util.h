// Small helpers shared by the TensorDict member definitions (tensordict.cc, structure.cc,
// apply.cc, comparison.cc, interop.cc). Not API.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/nested_key.h"

namespace td {
class TensorDict;
namespace internal {

// True when `shape` starts with `prefix`.
inline bool StartsWith(at::IntArrayRef shape, at::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

// `batch_size` as a vector; throws ValueError when a dim is negative.
inline std::vector<int64_t> CheckedBatch(at::IntArrayRef batch_size) {
  for (int64_t d : batch_size) {
    if (d < 0) TD_FAIL(ValueError, "batch size ", SizeRepr(batch_size), " has a negative dim");
  }
  return batch_size.vec();
}

// Records that `child`, read under `key` from `parent`, belongs to `parent` when `parent` is
// locked and `child` has no lock record yet (NOTE [ Locks span levels ] in structure.cc).
void NoteLockParent(const TensorDict& parent, const KeyRef& key, const TensorDict& child);

// Adds "while <what> key K" context to an exception thrown by user code, keeping its type.
template <class Body>
auto WithKeyContext(const KeyRef& key, const char* what, Body&& body) {
  try {
    return body();
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("while ", what, " key ", key.repr()));
    throw;
  } catch (const std::exception& e) {
    TD_FAIL(c10::Error, e.what(), "\n(while ", what, " key ", key.repr(), ")");
  }
}

}  // namespace internal
}  // namespace td
