// Internal to td/core and the backends: the one place dim names are checked and applied (NOTE
// [ Dim names ] in td/core/names.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "td/core/internal/leaves.h"
#include "td/core/tensordict.h"

namespace td {
class Storage;
namespace internal {

// `names` checked for a level of batch size `batch_size` (ValueError naming `op`, the names and
// the batch size: count, a repeated name, "..." as a name), in the shared form a storage keeps:
// nullptr when no name is set.
std::shared_ptr<const DimNames> CheckedNames(const DimNames& names, at::IntArrayRef batch_size,
                                             std::string_view op);
// Gives `td`'s level `names` (already checked; nullptr unnames) and every nested TensorDict
// these names on its leading dims, keeping its own names on the rest (Python's _rename_subtds).
void ApplyNames(const TensorDict& td, std::shared_ptr<const DimNames> names);
// The names of a result level: root dims from `src` through `origins` (nullptr: none), then the
// names of the level's `extra` dims after its first `root_old_dims` (nullptr when none is set).
std::shared_ptr<const DimNames> MapNames(const DimNames& src, const DimOrigins* origins,
                                         int64_t root_old_dims, int64_t extra);
// `names` with the leading entries replaced by `leading` (the parent's), nullptr when none is
// set: what a nested level's names become under a renamed parent.
std::shared_ptr<const DimNames> WithLeading(const DimNames* names, int64_t batch_dims,
                                            const DimNames* leading, int64_t leading_dims);

// Gives each level of `dst` the names of the level of `src` under the same key (a copy of
// `src` on another backend: memmap(), memmap_like()).
void CopyNames(const TensorDict& src, const TensorDict& dst);
// After `s`'s batch size changed: the names of the dims that remain are kept, new dims are
// unnamed (Python's batch-size setter). Nothing happens for an unnamed level.
void ResizeNames(Storage& s);

}  // namespace internal
}  // namespace td
