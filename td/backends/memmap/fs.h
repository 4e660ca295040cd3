// File-system helpers of the memmap backend (internal), on the OS toolkit (td/os/files.h, whose
// general helpers are named here with `using`): opens that never follow a symlink below the
// directory they start from, bounded reads, atomic replacement through a kTempPrefix name, and
// removal under the readers' locks. Every failure is an absl::Status naming the path and the
// errno text; see NOTE [ Errors: exceptions at the API, Status inside ] in td/core/errors.h.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/core/memmap_options.h"
#include "td/os/files.h"

namespace td {
namespace internal {
namespace memmap {

using internal::os::DirEntry;
using internal::os::EntryType;
using internal::os::JoinPath;
using internal::os::ListDir;
using internal::os::UniqueFd;

// internal::os::ErrnoError ("<what> <path>: <strerror>", NotFound for ENOENT), AlreadyExists for
// EEXIST, plus a hint for ELOOP (a symlink refused by O_NOFOLLOW).
absl::Status ErrnoError(int err, std::string_view what, std::string_view path);

// Opens the directory `name` inside `dirfd` (AT_FDCWD with a path); a symlink at `name` is
// followed only when `follow_symlink`. `path` is for messages.
absl::StatusOr<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& path,
                                   bool follow_symlink = false);
// Opens the regular file `name` inside `dirfd` (O_RDONLY or O_RDWR, plus `create_flags`: O_CREAT
// with O_EXCL or O_TRUNC makes it, mode 0644); symlinks refused.
absl::StatusOr<UniqueFd> OpenFileAt(int dirfd, const std::string& name, bool writable,
                                    const std::string& path, int create_flags = 0);
// The whole regular file `name` inside `dirfd`, refused when larger than `max_bytes`.
absl::StatusOr<std::string> ReadFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                       const std::string& path);
// NOTE [ Readers and removers of memmap directories ]
// A directory version that a writer swapped out (memmap() over a prefix, a structural write
// into a level) is removed while other threads or processes may still be loading it. Readers
// hold a shared flock(2) on every directory they read (OpenDirShared), taken after opening it
// and checked to still be the directory under its name (else reopened: it was just swapped).
// Removers (RemoveTree) take an exclusive flock on each directory, top-down, before emptying
// it. So a load sees one complete version, old or new, and a swapped-out version disappears
// once its last reader is done. flock locks are per open file description: threads of one
// process exclude each other as processes do. Readers never wait for writers except while a
// version they just opened is being removed (then they retry on the new one).

// OpenDirAt, then a shared flock on the directory, making sure it is still the one under `name`
// (retrying for up to 10 s while it is replaced).
absl::StatusOr<UniqueFd> OpenDirShared(int dirfd, const std::string& name, const std::string& path,
                                       bool follow_symlink = false);
// Removes `name` inside `dirfd` like os::RemoveAt, after taking an exclusive flock on each
// directory (waiting up to 30 s for its readers; past that the tree is left for a later
// RemoveStaleTemps and Unavailable is returned).
absl::Status RemoveTree(int dirfd, const std::string& name, const std::string& path);

// A fresh temporary name "<kTempPrefix><pid>-<counter>-<random>-<base>" (base truncated to keep
// the name short). Names from this process never repeat.
std::string TempName(std::string_view base);
// The pid in a TempName, or -1 when `name` is not one made for `base`.
int64_t TempNamePid(std::string_view name, std::string_view base);

// ---- mapping and writing tensor files (memory_mapped_tensor.cc) ----------------------------
// Maps the open regular file `fd` (whose size must be exactly the tensor's bytes) as a tensor of
// `dtype` and `shape`. `path` is recorded as the tensor's filename. The mapping does not keep
// `fd` open.
absl::StatusOr<at::Tensor> MapFile(int fd, const std::string& path, c10::ScalarType dtype,
                                   const std::vector<int64_t>& shape, MemmapMode mode);
// InvalidArgument "<what>: a <nested (ragged) | layout> tensor; only strided (dense) tensors can
// be memory-mapped" unless `t` is strided and not nested.
absl::Status CheckStrided(const at::Tensor& t, std::string_view what);
// Writes `tensor`'s values as C-order bytes to `fd` (chunk by chunk for non-contiguous or
// non-CPU tensors, so memory use stays bounded).
absl::Status WriteTensor(int fd, const at::Tensor& tensor, const std::string& path);
// `path` made absolute (relative to the working directory) with "." and empty components
// removed, without touching the file system.
std::string AbsolutePath(const std::string& path);

}  // namespace memmap
}  // namespace internal
}  // namespace td
