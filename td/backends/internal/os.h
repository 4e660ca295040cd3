// The operating-system helpers the file-backed backends share (internal to td/backends): an owned
// file descriptor, errno turned into an absl::Status naming the path, and an owned memory
// mapping. memmap (files in directories) and shared_memory (memfd segments) both build on these,
// so descriptors are closed and mappings unmapped in one place.
#pragma once

#include <cstddef>
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

 private:
  int fd_ = -1;
};

// "<what> <path>: <strerror(err)>" as a Status: NotFound for ENOENT, DataLoss otherwise.
//   return os::ErrnoError(errno, "cannot stat", path);
absl::Status ErrnoError(int err, std::string_view what, std::string_view path);

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

}  // namespace os
}  // namespace internal
}  // namespace td
