// How backends that live in their own Bazel target implement TensorDict members (memmap*,
// load_memmap, is_memmap, share_memory_, is_shared). For backend authors; users call the members.
//
// NOTE [ Backend entry points ]
// Every member of TensorDict is declared in td/core/tensordict.h and defined in
// //td/core:tensordict: a binary that depends on //td/core alone links whatever members it
// calls. The members whose work belongs to a backend (memmap, shared memory) forward to hooks
// that the backend's alwayslink library registers from a static initialiser (RegisterMemmapHooks /
// RegisterSharedMemoryHooks below), the same way backends register their storage factories
// (NOTE [ Storage interface ]). So:
//  * an action whose backend is not linked (memmap, memmap_, memmap_like, load_memmap,
//    share_memory_) throws c10::Error naming the Bazel target to add, e.g.
//    "TensorDict::memmap needs the memmap backend: add "@tensordict//td/backends/memmap"
//    (//td/backends/memmap) to the deps of your target";
//  * a question (is_memmap, is_shared) answers false: without the backend linked, no TensorDict
//    or tensor of the process can be on it. This is also why //td/backends/shared_memory does
//    not link the memmap backend just to ask is_memmap().
// Backends depend downward only: a backend includes td/core, never the other way round.
#pragma once

#include <string>

#include "td/core/tensordict.h"

namespace td {

// The memmap backend's implementations of the TensorDict members of the same names.
struct MemmapHooks {
  TensorDict (*memmap)(const TensorDict& td, const std::string& prefix,
                       const MemmapOptions& options) = nullptr;
  TensorDict& (*memmap_)(TensorDict& td, const std::string& prefix,
                         const MemmapOptions& options) = nullptr;
  TensorDict (*memmap_like)(const TensorDict& td, const std::string& prefix,
                            const MemmapOptions& options) = nullptr;
  TensorDict (*load_memmap)(const std::string& prefix, const LoadMemmapOptions& options) = nullptr;
  bool (*is_memmap)(const TensorDict& td) = nullptr;
};

// The shared-memory backend's implementations of share_memory_ and is_shared.
struct SharedMemoryHooks {
  TensorDict& (*share_memory_)(TensorDict& td) = nullptr;
  bool (*is_shared)(const TensorDict& td) = nullptr;
};

// Called once by the backend (static initialiser in its alwayslink library); returns true.
// A second registration replaces nothing and returns false. Every hook must be set.
bool RegisterMemmapHooks(const MemmapHooks& hooks);
bool RegisterSharedMemoryHooks(const SharedMemoryHooks& hooks);

}  // namespace td
