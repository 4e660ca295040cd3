// File-system helpers of the memmap backend (internal): descriptor-relative (openat-style)
// operations that never follow a symlink below the directory they start from, exact-size reads,
// atomic replacement through a temporary name, and recursive removal. Every failure is an
// absl::Status naming the path and the errno text; see NOTE [ Errors: exceptions at the API,
// Status inside ] in td/core/errors.h for where these become exceptions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace td {
namespace memmap_internal {

// An owned file descriptor, closed on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// "a/b" joined with "c" -> "a/b/c".
std::string JoinPath(std::string_view dir, std::string_view name);
// An error status for errno `err`: "<what> <path>: <strerror>". ENOENT gives NotFound.
absl::Status ErrnoError(int err, std::string_view what, std::string_view path);

// Opens the directory `path` (a symlink at `path` itself is followed only when
// `follow_symlink`).
absl::StatusOr<UniqueFd> OpenDir(const std::string& path, bool follow_symlink);
// Opens the directory `name` inside `dirfd`; a symlink is refused. `path` is for messages.
absl::StatusOr<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& path);
// Opens the regular file `name` inside `dirfd` (O_RDONLY or O_RDWR); symlinks refused.
absl::StatusOr<UniqueFd> OpenFileAt(int dirfd, const std::string& name, bool writable,
                                    const std::string& path);
// Size in bytes of the open regular file `fd`.
absl::StatusOr<int64_t> FileSize(int fd, const std::string& path);
// The whole regular file `name` inside `dirfd`, refused when larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                       const std::string& path);
// write(2) until all `n` bytes are written (retries EINTR and short writes).
absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path);
// Creates `name` inside `dirfd` (it must not exist) holding `data`; fsyncs it when `sync`.
absl::Status CreateFileAt(int dirfd, const std::string& name, std::string_view data, bool sync,
                          const std::string& path);
// Atomically replaces (or creates) `name` inside `dirfd` with `data`: writes a temporary
// sibling, then renames it over `name`. Readers see the old or the new content, never a mix.
absl::Status ReplaceFileAt(int dirfd, const std::string& name, std::string_view data, bool sync,
                           const std::string& path);

enum class EntryType { kFile, kDirectory, kSymlink, kOther };
struct DirEntry {
  std::string name;
  EntryType type;
};
// The entries of the open directory `dirfd` (without "." and ".."), sorted by name.
absl::StatusOr<std::vector<DirEntry>> ListDir(int dirfd, const std::string& path);
// Removes `name` inside `dirfd`: a file or symlink is unlinked (a symlink's target is never
// touched), a directory is emptied recursively, then removed. Missing is not an error.
absl::Status RemoveAt(int dirfd, const std::string& name, const std::string& path);
// fsync(2) of the directory `fd` (makes renames and new names inside it durable).
absl::Status SyncDir(int fd, const std::string& path);
// mkdir -p.
absl::Status MakeDirs(const std::string& path);

// A fresh temporary name "<kTempPrefix><pid>-<counter>-<random>-<base>" (base truncated to keep
// the name short). Names from this process never repeat.
std::string TempName(std::string_view base);
// The pid in a TempName, or -1 when `name` is not one made for `base`.
int64_t TempNamePid(std::string_view name, std::string_view base);

}  // namespace memmap_internal
}  // namespace td
