// Names in directories, for the file formats (internal, below td/core; fd.h: descriptors, I/O).
// Functions ending in "At" take a directory descriptor and a name in it (AT_FDCWD: relative to
// the working directory) and never follow a symlink at that name; `path` names the file in
// messages. Every failure is a Status (fd.h's ErrnoError).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/os/fd.h"

namespace td {
namespace internal {
namespace os {

// ---- directories ---------------------------------------------------------------------------

// "a/b" joined with "c" -> "a/b/c" ("a/" with "c" -> "a/c"; "" with "c" -> "c").
std::string JoinPath(std::string_view dir, std::string_view name);

enum class EntryType { kFile, kDirectory, kSymlink, kOther };
struct DirEntry {
  std::string name;
  EntryType type;
};
// The entries of the open directory `dirfd` (without "." and ".."), sorted by name.
absl::StatusOr<std::vector<DirEntry>> ListDir(int dirfd, std::string_view path);
// mkdir(2) of `name` inside `dirfd` (mode 0755 less the umask; it must not exist).
absl::Status MakeDirAt(int dirfd, const std::string& name, std::string_view path);
// mkdir -p (mode 0755 less the umask); InvalidArgument when a part exists as a non-directory.
absl::Status MakeDirs(const std::string& path);
// fsync(2) of the open directory `fd` (makes new names and renames inside it durable).
absl::Status SyncDir(int fd, std::string_view path);
// Opens the directory `path`, then SyncDir.
absl::Status SyncDirPath(const std::string& path);

// ---- locks and removal ---------------------------------------------------------------------

using Deadline = std::chrono::steady_clock::time_point;
// flock(fd, op) with op LOCK_SH or LOCK_EX, polled (without blocking) until `deadline` while
// another holder keeps it: 0 once it is held, else the errno (EWOULDBLOCK at the deadline).
int LockUntil(int fd, int op, Deadline deadline);
// Removes `name` inside `dirfd`: a file or symlink is unlinked (never its target), a directory
// emptied recursively, then removed; missing is not an error. With `lock_until`, each directory
// is locked exclusively (LockUntil) before it is emptied: Unavailable if still held then.
absl::Status RemoveAt(int dirfd, const std::string& name, const std::string& path,
                      std::optional<Deadline> lock_until = std::nullopt);

// ---- creating and replacing ----------------------------------------------------------------

// Creates `name` inside `dirfd` (O_EXCL, mode 0644 less the umask), open for reading and writing.
absl::StatusOr<UniqueFd> OpenNewFileAt(int dirfd, const std::string& name, std::string_view path);
// OpenNewFileAt holding `data`, fsynced when `sync`.
absl::Status CreateFileAt(int dirfd, const std::string& name, std::string_view data, bool sync,
                          std::string_view path);

// A file written under the temporary name `temp` (the caller's convention for names loaders
// skip) beside the `name` it replaces, and renamed over it by Commit: readers see the previous
// file or the complete new one, never a mix. Destroyed without Commit (an error, an exception),
// the temporary is removed and the previous file is untouched. `dirfd` must outlive it.
class FileReplacement {
 public:
  // Creates `temp` inside `dirfd` (OpenNewFileAt); `path` names `name` in messages.
  static absl::StatusOr<FileReplacement> Begin(int dirfd, std::string name, std::string temp,
                                               std::string path);
  FileReplacement(FileReplacement&&) = default;
  ~FileReplacement();

  int fd() const { return fd_.get(); }
  const std::string& temp() const { return temp_; }
  // fsync(2) of the temporary when `sync`, close(2), rename(2) over `name`; a failure removes
  // the temporary and leaves the previous file.
  absl::Status Commit(bool sync);

 private:
  FileReplacement() = default;

  int dirfd_ = -1;
  std::string name_, temp_, display_;  // display_: "<path> (temporary <temp>)"
  UniqueFd fd_;  // open until Commit: the temporary is ours to remove while it is
};

// FileReplacement::Begin, `write(fd)`, then Commit(sync).
absl::Status ReplaceFileAt(int dirfd, std::string name, std::string temp, std::string path,
                           bool sync, absl::FunctionRef<absl::Status(int fd)> write);

// Moves the directory `temp` inside `dirfd` to `name` in one step: renameat2 RENAME_NOREPLACE,
// or RENAME_EXCHANGE when `name` exists; without either, the previous `name` goes to `aside`
// first (put back if the second rename fails). Returns the name now holding the previous
// content (`temp` or `aside`) for the caller to remove, or nullopt when there was none.
absl::StatusOr<std::optional<std::string>> ReplaceDirAt(int dirfd, const std::string& temp,
                                                        const std::string& name,
                                                        const std::string& aside,
                                                        std::string_view path);

}  // namespace os
}  // namespace internal
}  // namespace td
