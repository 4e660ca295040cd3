#include "td/core/internal/in_place.h"

#include <ATen/ATen.h>

#include <bitset>
#include <optional>
#include <string>

#include "td/core/errors.h"

namespace td {
namespace internal {
namespace {

// Writes every tensor leaf of `dense` (a written copy of td's entries) back into td: set_() for
// the keys td has; set() for keys the write created, after checking that td may take them.
void WriteBack(TensorDict& td, const TensorDict& dense, bool may_create) {
  const std::vector<TensorDict::Item> leaves =
      dense.items(KeysOptions().include_nested(true).leaves_only(true));
  std::vector<bool> exists(leaves.size(), true);
  if (may_create) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      exists[i] = td.contains(leaves[i].first);
      if (!exists[i] && td.is_locked()) {
        TD_FAIL(LockedError, "cannot create key ", leaves[i].first.repr(),
                          ": the TensorDict is locked (call unlock_() first)");
      }
    }
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Value& v = leaves[i].second;
    if (exists[i] && v.is_tensor()) {
      td.set_(leaves[i].first, v.tensor());
    } else if (!exists[i]) {
      td.set(leaves[i].first, v);
    }
  }
}

}  // namespace

void WriteLeaves(TensorDict& td, const char* what, absl::FunctionRef<void(const LeafTree&)> write,
                 LazyLevels lazy) {
  const LeafTree tree(td, /*stop_at_lazy=*/true);
  if (!tree.has_lazy_level()) {
    write(tree);
    return;
  }
  if (lazy == LazyLevels::kReject) {
    const std::optional<NestedKey> key = tree.lazy_level_key();
    TD_FAIL(TypeError, what, ": ", key ? "entry " + key->repr() : std::string("this TensorDict"),
                    " is on the lazy backend '", tree.lazy_level().backend(),
                    "', whose tensors are computed on every read; call ", what,
                    " on the TensorDicts it reads (a lazy stack's members, a view's source)");
  }
  TensorDict dense = td.to_dense();
  write(LeafTree(dense));
  WriteBack(td, dense, /*may_create=*/false);
}

void WriteInPlace(TensorDict& td, absl::FunctionRef<void(TensorDict&)> write,
                  absl::FunctionRef<std::vector<NestedKey>()> only_keys) {
  if (!LeafTree(td, /*stop_at_lazy=*/true).has_lazy_level()) {
    write(td);
    return;
  }
  TensorDict dense = td.select(only_keys(), /*strict=*/true).to_dense();  // KeyError if missing
  write(dense);
  WriteBack(td, dense, /*may_create=*/true);
}

void CheckScalarFits(const LeafTree& tree, const at::Scalar& value, const char* op) {
  std::bitset<static_cast<size_t>(at::ScalarType::NumOptions)> seen;
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    const at::ScalarType dtype = tree.leaves()[i].scalar_type();
    if (seen.test(static_cast<size_t>(dtype))) continue;
    seen.set(static_cast<size_t>(dtype));
    try {
      (void)at::scalar_tensor(value, at::TensorOptions().dtype(dtype));
    } catch (...) {
      RethrowWithKey(tree.key(i), op);
    }
  }
}

}  // namespace internal
}  // namespace td
