// Write access to a TensorDict's storage, for the library's backends and the core.
//
// NOTE [ Mutable storage access ]
// TensorDict::storage() and storage_ptr() give users a read-only storage: every write goes
// through TensorDict's members, which validate it (batch size, device, lock, capabilities; NOTE
// [ Storage interface ] in td/core/storage.h) before the storage sees it. The few places that
// must change a level directly — the core's lock records and batch-size updates, a backend
// rewiring another TensorDict's levels (memmap_() swapping a dense TensorDict's leaves for mapped
// ones, share_memory_() moving them into segments), a factory handing out the storage it built —
// reach it here. This header is part of //td/core:internal, visible to td/ packages only: users
// do not reach for it.
#pragma once

#include <memory>

#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {

// The storage of `td`, writable. The caller validates what it writes as the core would.
inline Storage& MutableStorage(const TensorDict& td) {
  return const_cast<Storage&>(td.storage());  // every Storage is created non-const
}

// The shared owner of `td`'s storage, writable (backend factories return it).
inline std::shared_ptr<Storage> MutableStoragePtr(const TensorDict& td) {
  return std::const_pointer_cast<Storage>(td.storage_ptr());
}

}  // namespace internal
}  // namespace td
