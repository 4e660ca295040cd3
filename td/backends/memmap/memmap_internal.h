// Writing and loading whole memmap directories (internal to the memmap backend; the public
// entry points are TensorDict::memmap / memmap_ / memmap_like / load_memmap).
//
// NOTE [ Crash-safe memmap writes ]
// memmap(prefix) never writes into `prefix` itself. It
//   1. validates the whole TensorDict (keys, dtypes, file names, copy_existing) and the target
//      (a symlink, a file, or a non-empty directory without meta.json is refused) before
//      touching the disk;
//   2. writes every level into a temporary sibling directory `.td-tmp-<pid>-<n>-<rand>-<name>`
//      (leaves in parallel), fsyncing files and directories when MemmapOptions::fsync;
//   3. commits with one rename: renameat2(RENAME_NOREPLACE) when `prefix` does not exist,
//      renameat2(RENAME_EXCHANGE) when it does (the old tree then sits under the temporary name
//      and is removed). On a file system without RENAME_EXCHANGE the old tree is first renamed
//      aside, which leaves a short window where `prefix` does not exist but the old copy is
//      intact under `.td-tmp-...`.
// So a process killed at any point leaves `prefix` with either its previous content or the new
// complete one, never a mix (memmap_crash_test kills a writer mid-write). A killed writer's
// temporary directory stays behind; the next memmap() to the same prefix removes those whose
// process is gone. Tensors mapped from the old files stay valid after the swap (the kernel keeps
// unlinked files alive while mapped), so writing a TensorDict over its own directory is safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace memmap_internal {

struct WriteOptions {
  bool like = false;           // sparse zero-filled files instead of the data
  bool copy_existing = true;   // see MemmapOptions::copy_existing
  bool sync = false;           // fsync files and directories
  int64_t num_threads = 0;
};

// Throws ValueError / TypeError naming the key for anything WriteTree would fail on by
// construction; `dir` is the final directory of `td` (for copy_existing).
void ValidateTree(const TensorDict& td, const std::string& dir, const WriteOptions& options);
// Writes `td` as a new directory `name` inside `parent_fd` (`path` is the directory's final
// path, used in messages). Throws; the caller removes `name` on failure.
void WriteTree(const TensorDict& td, int parent_fd, const std::string& name,
               const std::string& path, const WriteOptions& options);
// Writes `value` (a TensorDict, or non-tensor data with the batch size `parent_batch`) as the
// new directory `name` inside `parent_fd`. Throws; the caller removes `name` on failure.
void WriteEntryDir(const Value& value, const std::vector<int64_t>& parent_batch, int parent_fd,
                   const std::string& name, const std::string& path,
                   const WriteOptions& options);
// Moves the directory `tmp` onto `name` (both inside `parent_fd`) as NOTE [ Crash-safe memmap
// writes ] describes, removing what `name` held before.
absl::Status CommitDir(int parent_fd, const std::string& tmp, const std::string& name,
                       const std::string& path, bool sync);
// Loads the level in the open directory `dirfd` (at `path`), validating everything.
// `parent_batch`: the batch size the level's must start with (nullptr at the top).
absl::StatusOr<std::shared_ptr<MemmapStorage>> LoadLevel(int dirfd, const std::string& path,
                                                         MemmapMode mode, bool root,
                                                         const std::vector<int64_t>* parent_batch,
                                                         int64_t num_threads);
// Runs fn(0..n-1), in a oneTBB arena of `num_threads` threads when that is more than 1.
// Returns the first (lowest index) error.
absl::Status RunParallel(size_t n, int64_t num_threads,
                         const std::function<absl::Status(size_t)>& fn);

}  // namespace memmap_internal
}  // namespace td
