#include "td/backends/internal/os.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace td {
namespace internal {
namespace os {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status ErrnoError(int err, std::string_view what, std::string_view path) {
  std::string msg = absl::StrCat(absl::string_view(what.data(), what.size()), " ",
                                 absl::string_view(path.data(), path.size()), ": ",
                                 std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::DataLossError(msg);
}

absl::StatusOr<MappedRegion> MappedRegion::Map(int fd, size_t length, int prot, int flags,
                                               std::string_view path) {
  MappedRegion r;
  if (length == 0) return r;
  void* addr = ::mmap(nullptr, length, prot, flags, fd, 0);
  if (addr == MAP_FAILED) return ErrnoError(errno, "cannot mmap", path);
  r.addr_ = addr;
  r.length_ = length;
  return r;
}

MappedRegion& MappedRegion::operator=(MappedRegion&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) ::munmap(addr_, length_);
    addr_ = std::exchange(o.addr_, nullptr);
    length_ = std::exchange(o.length_, 0);
  }
  return *this;
}

MappedRegion::~MappedRegion() {
  if (addr_ != nullptr) ::munmap(addr_, length_);
}

}  // namespace os
}  // namespace internal
}  // namespace td
