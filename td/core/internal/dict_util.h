// Internal to td/core: the entry listing with KeysOptions::sort / is_leaf that keys(), values()
// and items() (tensordict.cc) hand over to td/core/dict_ops.cc. Not API.
#pragma once

#include <vector>

#include "td/core/tensordict.h"

namespace td {
namespace internal {

// The entries keys() / values() / items() list for `options` (sorted when options.sort(),
// leaves decided by options.is_leaf() when set).
std::vector<TensorDict::Item> ListEntries(const TensorDict& td, const KeysOptions& options);

}  // namespace internal
}  // namespace td
