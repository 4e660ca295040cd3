// Internal to the library: the pieces of TensorDict's printing that a TensorClass's repr() shares
// (td/tensorclass), so both follow the print options (td/core/print_options.h) one way. Defined
// in td/core/interop.cc.
#pragma once

#include <string>
#include <vector>

#include "td/core/print_options.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

// How entry `key` of `level` prints after "key: " under `options`: Tensor(shape=..., ...), a
// nested TensorDict's repr (its lines indented by `indent` more spaces), or NonTensorData(...).
std::string EntryRepr(const TensorDict& level, const std::string& key,
                      const PrintOptions& options, int indent);
// `keys` in the order `options` prints them.
void SortForPrinting(std::vector<std::string>& keys, const PrintOptions& options);
// The batch_size= / device= / is_shared= lines `options` shows for `td`, in that order.
std::vector<std::string> LevelLines(const TensorDict& td, const PrintOptions& options);

}  // namespace internal
}  // namespace td
