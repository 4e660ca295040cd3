// Options of TensorDict::memmap / memmap_ / memmap_like (MemmapOptions, writing) and
// TensorDict::load_memmap (LoadMemmapOptions, reading). The memmap backend, //td/backends/memmap,
// implements them; tensordict.h includes this file.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <optional>

#include "td/core/nested_key.h"

namespace td {

// How load_memmap maps the files. kReadWrite: writes to the tensors go to the files (MAP_SHARED)
// and structural changes (new keys, deletions) update the directory. kReadOnly: the files are
// opened read-only and never modified; tensors are copy-on-write (writing to one changes only this
// process's memory, never the file) and set/set_/del_ on the TensorDict throw ValueError.
enum class MemmapMode { kReadWrite, kReadOnly };

// Options of memmap / memmap_ / memmap_like (td/backends/memmap; see docs/memmap.md).
// Example: `td.memmap("/data/ckpt", td::MemmapOptions().num_threads(8))`.
struct MemmapOptions {
  // Threads writing leaves (NOTE [ num_threads ] in td/executor/executor.h; oneTBB, at most one
  // per CPU and one per leaf): 0 uses td::parallel::num_threads() when there are several leaves
  // and at least 8 MiB of data to copy, else the calling thread.
  TORCH_ARG(int, num_threads) = 0;
  // A leaf that is already a memory-mapped file elsewhere is copied when true; when false
  // (Python's default) writing it throws ValueError naming the key and both files.
  TORCH_ARG(bool, copy_existing) = false;
  // When false, writing to a prefix that already holds a memmap directory throws ValueError.
  // When true it is replaced (atomically). A non-empty directory that is not a memmap directory
  // is never replaced.
  TORCH_ARG(bool, exists_ok) = true;
  // fsync every file and directory before the write is committed (durable across power loss,
  // slower).
  TORCH_ARG(bool, fsync) = false;
};

// Options of load_memmap (td/backends/memmap; see docs/memmap.md).
// Example: `td::TensorDict::load_memmap("/ckpt", td::LoadMemmapOptions().sub_path("0"))`.
struct LoadMemmapOptions {
  // Read-write or read-only mapping: see MemmapMode.
  TORCH_ARG(MemmapMode, mode) = MemmapMode::kReadWrite;
  // Load the sub-TensorDict at this key instead of the whole directory (a slice of a
  // checkpoint): `.sub_path("0")` or `.sub_path(td::NestedKey{"a", "b"})`.
  TORCH_ARG(std::optional<NestedKey>, sub_path) = std::nullopt;
  // Threads opening and mapping the files (NOTE [ num_threads ] in td/executor/executor.h): 0
  // maps from the calling thread (mapping is cheap; ask for threads on slow file systems).
  TORCH_ARG(int, num_threads) = 0;
};

}  // namespace td
