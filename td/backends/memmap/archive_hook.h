// The slot through which TensorDict::load_memmap opens memmap archives (".tdz", one zip file:
// NOTE [ Memmap archive format ] in td/backends/memmap/archive/archive.h), as upstream 0.14's
// `load_memmap` does.
//
// NOTE [ load_memmap of an archive ]
// Upstream's TensorDict.load_memmap(prefix) opens an archive when `prefix` is a file
// (tensordict/base.py, v0.14.0: `is_memmap_archive`, `_ArchivePath`). Here the archive reader
// lives in //td/backends/memmap/archive, which depends on this backend, so this backend cannot
// call it: instead that target (an alwayslink library) fills the slot below from a static
// initialiser, as backends fill the member slots of NOTE [ Backend entry points ]
// (td/core/internal/backend_hooks.h). load_memmap on a regular file (or a link to one) calls the
// slot; without //td/backends/memmap/archive linked into the program the slot is empty and
// load_memmap throws MemmapError naming the file and the target to link. A directory is loaded
// as before. What the filled slot does (td/backends/memmap/archive/archive.cc): the load_archive
// of the file, copy-on-write (upstream's default mode "r"), LoadMemmapOptions::sub_path applied;
// ValueError for a file that is not an archive, as upstream raises. Bazel: //td/backends/memmap.
#pragma once

#include <string>

#include "td/core/internal/backend_hooks.h"
#include "td/core/tensordict.h"

namespace td {
namespace internal {
namespace memmap {

// Loads the archive file `path` for load_memmap (NOTE [ load_memmap of an archive ]).
using LoadArchiveFn = TensorDict(const std::string& path, const LoadMemmapOptions& options);

// Filled by //td/backends/memmap/archive; empty when it is not linked (defined in
// memmap_writer.cc).
extern BackendHook<LoadArchiveFn> load_memmap_archive;

}  // namespace memmap
}  // namespace internal
}  // namespace td
