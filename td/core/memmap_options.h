// Options of TensorDict::memmap / memmap_ / memmap_like (MemmapOptions, writing) and
// TensorDict::load_memmap (LoadMemmapOptions, reading). The memmap backend, //td/backends/memmap,
// implements them; tensordict.h includes this file.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "td/core/nested_key.h"
#include "td/executor/executor.h"

namespace td {

// How load_memmap maps the files. kReadWrite: writes to the tensors go to the files (MAP_SHARED)
// and structural changes (new keys, deletions) update the directory. kReadOnly: the files are
// opened read-only and never modified; tensors are copy-on-write (writing to one changes only this
// process's memory, never the file) and set/set_/del_ on the TensorDict throw ValueError.
enum class MemmapMode { kReadWrite, kReadOnly };

// MemmapOptions' default min_cost: bytes of tensor data a write copies (NOTE [ num_threads ] in
// td/executor/executor.h).
inline constexpr int64_t kMemmapMinParallelBytes = int64_t{8} << 20;
// LoadMemmapOptions' default min_cost, in files mapped: no load reaches it, so loads map from
// the calling thread unless asked (parallel(true), or a min_cost). Mapping a file is cheap:
// loading 16 to 1024 small files, two threads did not beat one (measured on 2 CPUs).
inline constexpr int64_t kLoadMemmapMinParallelFiles = std::numeric_limits<int64_t>::max();

// Options of memmap / memmap_ / memmap_like (td/backends/memmap; see docs/memmap.md).
// Example: `td.memmap("/data/ckpt", td::MemmapOptions().num_threads(8))`.
// parallel / num_threads / min_cost (td::parallel::WithParallelOptions; NOTE [ num_threads ] in
// td/executor/executor.h): the threads writing leaves (oneTBB, at most one per CPU and one per
// leaf). The cost is the bytes of tensor data to copy: by default the writes use up to
// td::parallel::num_threads() threads when there are several leaves and at least
// kMemmapMinParallelBytes (8 MiB), else the calling thread.
struct MemmapOptions : parallel::WithParallelOptions<MemmapOptions> {
  MemmapOptions()
      : parallel::WithParallelOptions<MemmapOptions>(
            parallel::ParallelOptions().min_cost(kMemmapMinParallelBytes)) {}
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
// parallel / num_threads / min_cost (td::parallel::WithParallelOptions; NOTE [ num_threads ] in
// td/executor/executor.h): the threads opening and mapping the files. The cost is the number of
// files, and no load reaches the default min_cost (kLoadMemmapMinParallelFiles): a load maps
// from the calling thread unless asked, e.g. on a slow file system
// `.parallel(true).num_threads(8)` or `.min_cost(64)` (files).
struct LoadMemmapOptions : parallel::WithParallelOptions<LoadMemmapOptions> {
  LoadMemmapOptions()
      : parallel::WithParallelOptions<LoadMemmapOptions>(
            parallel::ParallelOptions().min_cost(kLoadMemmapMinParallelFiles)) {}
  // Read-write or read-only mapping: see MemmapMode.
  TORCH_ARG(MemmapMode, mode) = MemmapMode::kReadWrite;
  // Load the sub-TensorDict at this key instead of the whole directory (a slice of a
  // checkpoint): `.sub_path("0")` or `.sub_path(td::NestedKey{"a", "b"})`.
  TORCH_ARG(std::optional<NestedKey>, sub_path) = std::nullopt;
};

}  // namespace td
