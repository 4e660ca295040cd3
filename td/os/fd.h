// The operating-system toolkit under the file formats (internal to the library, below td/core:
// it depends on absl only). This header: an owned file descriptor, errno turned into an
// absl::Status naming the path, an owned memory mapping, and reads and writes that finish
// (EINTR and short transfers retried). files.h builds on it: names in directories (create,
// replace atomically, list, remove, lock, sync). Every failure is a Status; a caller turns it
// into its own error type at its boundary (NOTE [ Status to exception ] in td/core/errors.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace td {
namespace internal {
namespace os {

// An owned file descriptor, closed on destruction.
//   os::UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) return os::ErrnoError(errno, "cannot open", path);
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
  // close(2) now, reporting its error (a write-back failure shows there): ErrnoError("cannot
  // close", path). The descriptor is released either way.
  absl::Status Close(std::string_view path);

 private:
  int fd_ = -1;
};

// "<what> <path>: <strerror(err)>" ("<what>: <strerror(err)>" for an empty path) as a Status:
// NotFound for ENOENT, DataLoss otherwise.
//   return os::ErrnoError(errno, "cannot stat", path);
absl::Status ErrnoError(int err, std::string_view what, std::string_view path);
// OkStatus when `ok` (a system call succeeded), else ErrnoError(errno, what, path).
//   return os::ErrnoUnless(::fsync(fd) == 0, "cannot fsync", path);
absl::Status ErrnoUnless(bool ok, std::string_view what, std::string_view path);

// An owned mmap(2) region, unmapped on destruction. A zero length maps nothing (addr() null).
//   absl::StatusOr<os::MappedRegion> r = os::MappedRegion::Map(fd, n, PROT_READ, MAP_SHARED, path);
class MappedRegion {
 public:
  MappedRegion() = default;
  // mmap(nullptr, length, prot, flags, fd, 0); ErrnoError("cannot mmap", path) on failure.
  static absl::StatusOr<MappedRegion> Map(int fd, size_t length, int prot, int flags,
                                          std::string_view path);
  MappedRegion(MappedRegion&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), length_(std::exchange(o.length_, 0)) {}
  MappedRegion& operator=(MappedRegion&& o) noexcept;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion();
  void* addr() const { return addr_; }
  size_t length() const { return length_; }

 private:
  void* addr_ = nullptr;
  size_t length_ = 0;
};

// read(2) from the file position (pread(2) from `offset` when it is >= 0) until `n` bytes are
// read or the file ends: the number read, fewer than `n` only at the end of the file, or
// ErrnoError("cannot read", path). A caller that needs all `n` says why it got fewer.
absl::StatusOr<size_t> ReadAll(int fd, void* data, size_t n, std::string_view path,
                               int64_t offset = -1);
// write(2) (pwrite(2) at `offset` when it is >= 0) of all `n` bytes, 1 MiB per call, or
// ErrnoError("cannot write", path) (EIO for a call that writes nothing).
absl::Status WriteAll(int fd, const void* data, size_t n, std::string_view path,
                      int64_t offset = -1);

}  // namespace os
}  // namespace internal
}  // namespace td
