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
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/core/tensordict.h"
#include "td/executor/executor.h"

namespace td {

class MemmapStorage;  // td/backends/memmap/memmap_storage.h

namespace internal {
namespace memmap {

struct WriteOptions {
  bool like = false;           // sparse zero-filled files instead of the data
  bool reserve = false;        // like: allocate the files' blocks (posix_fallocate), not sparse
  bool copy_existing = true;   // see MemmapOptions::copy_existing
  bool sync = false;           // fsync files and directories
  // MemmapOptions::parallel_options (cost: bytes; default: its 8 MiB threshold).
  parallel::ParallelOptions threads = MemmapOptions().parallel_options();
};

// The kind of an entry, and its meta.json entry (a lazy-stack sub-TensorDict is typed
// "LazyStackedTensorDict", as Python writes it).
internal::memmap::EntryKind KindOf(const Value& v);
internal::memmap::EntryMeta EntryMetaOf(const std::string& key, const Value& v);

// Throws ValueError / TypeError naming the key for anything WriteEntryDir would fail on by
// construction; `dir` is the final directory of `td` (for copy_existing), `prefix` the key of
// `td` in the tree being written and `depth` its depth there.
void ValidateTree(const TensorDict& td, const std::string& dir, const WriteOptions& options,
                  const NestedKey* prefix = nullptr, int depth = 0);
// Writes `value` (a TensorDict, or non-tensor data with the batch size `parent_batch`) as the
// new directory `name` inside `parent_fd`. Throws; the caller removes `name` on failure.
void WriteEntryDir(const Value& value, const std::vector<int64_t>& parent_batch, int parent_fd,
                   const std::string& name, const std::string& path,
                   const WriteOptions& options);
// Moves the directory `tmp` onto `name` (both inside `parent_fd`) as NOTE [ Crash-safe memmap
// writes ] describes, removing what `name` held before.
absl::Status CommitDir(int parent_fd, const std::string& tmp, const std::string& name,
                       const std::string& path, bool sync);
// Removes the temporaries (TempName(base)) that writers no longer running left in the directory
// `parent_fd` (at `parent`). Errors are ignored: a leftover is harmless.
void RemoveStaleTemps(int parent_fd, const std::string& parent, const std::string& base);

// NOTE [ Crash-safe level writes ]
// A structural write into an open memmap TensorDict (a new key, a replaced key — any shape,
// dtype or kind —, a deleted key; update, nested sets and rename_key_ (a del_ then a set) are
// sequences of these, one per key and level) changes one level directory D as one commit:
//   1. the next version of D is built as a temporary sibling `.td-tmp-<pid>-...-<D's name>`:
//      every sub-directory of D recreated and every file hard-linked (no data is copied, and the
//      files keep their inodes, so tensors already mapped keep writing to the live files),
//      except the entries the write drops; the new entry written; a new meta.json;
//   2. the sibling is swapped with D by renameat2(RENAME_EXCHANGE) (CommitDir), and the old
//      version, now under the temporary name, is removed.
// A kill before the swap leaves D untouched plus a temporary sibling; after it, the new D plus
// the old version under a temporary name. Loaders ignore temporary names, so D always loads as
// before or after the write, and the next write next to D (or memmap() to D) removes the
// temporaries of writers that are gone. Cost: one link per file below D (not per byte).
// A file system without hard links or RENAME_EXCHANGE gets a named MemmapError / the
// rename-aside fallback of NOTE [ Crash-safe memmap writes ]. meta.json-only changes
// (set_batch_size) replace meta.json atomically instead.
struct LevelChange {
  std::vector<std::string> drop;   // names in D not carried over
  std::function<void(int new_dirfd)> write;  // writes new entries into the new D (final names)
  std::string meta_json;           // the new D's meta.json
  bool sync = false;               // fsync files and directories before the swap
};
// Commits `change` to the level directory `dir` (absolute; a symlink at `dir` itself is followed
// only when `follow_symlink`) as NOTE [ Crash-safe level writes ] describes. Throws MemmapError
// (or what `write` throws); on any failure `dir` is unchanged and the temporary removed.
void CommitLevel(const std::string& dir, bool follow_symlink, const LevelChange& change);

// Loads the level in the open directory `dirfd` (at `path`), validating everything.
// `parent_batch`: the batch size the level's must start with (nullptr at the top). `threads`:
// the threads mapping the files (LoadMemmapOptions::parallel_options; cost: files).
absl::StatusOr<std::shared_ptr<MemmapStorage>> LoadLevel(int dirfd, const std::string& path,
                                                         MemmapMode mode, bool root,
                                                         const std::vector<int64_t>* parent_batch,
                                                         const parallel::ParallelOptions& threads);
// LoadTree (store.h) of the open directory `dirfd` (at `path`) on disk (memmap_loader.cc).
absl::StatusOr<TensorDict> LoadDir(int dirfd, const std::string& path, MemmapMode mode,
                                   const parallel::ParallelOptions& threads);
// Opens the sub-TensorDict directory of `key` inside `dirfd` (at `dir_path`): its escaped name,
// or the raw name older writers used when only that one holds a meta.json. Sets `sub_path`.
absl::StatusOr<UniqueFd> OpenSubTensorDict(int dirfd, const std::string& key,
                                           const std::string& dir_path, std::string* sub_path);
// The threads that write `leaves` leaves of `bytes` bytes in total under `options`
// (MemmapOptions::parallel_options; NOTE [ num_threads ] in td/executor/executor.h): plan_threads
// with the bytes as the cost, never more than the CPUs.
int WriteThreads(const parallel::ParallelOptions& options, int64_t bytes, size_t leaves);
// Runs fn(0..n-1) through the executor (td::parallel::parallel_for) on `num_threads` threads (at
// most one per CPU), or in order on the calling thread when num_threads <= 1. Returns the first
// (lowest index) error.
absl::Status RunParallel(size_t n, int num_threads,
                         const std::function<absl::Status(size_t)>& fn);

}  // namespace memmap
}  // namespace internal
}  // namespace td
