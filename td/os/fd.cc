#include "td/os/fd.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace td {
namespace internal {
namespace os {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// One read(2) / pread(2) call reads at most this: Linux caps a call near 2 GiB anyway.
constexpr size_t kReadChunk = size_t{1} << 30;
// One write(2) / pwrite(2) call writes at most this: one write of hundreds of MiB runs ~10x
// slower on ext4 (the kernel throttles dirty pages inside the call; measured with dd: 256 MiB at
// once 0.35 GB/s, in 1 MiB pieces 5 GB/s).
constexpr size_t kWriteChunk = size_t{1} << 20;

// `n` bytes through `call(p, chunk, done)` (one read or write), retrying EINTR and short
// transfers; stops early when a call transfers nothing.
template <class Char, class Call>
absl::StatusOr<size_t> Transfer(Char* p, size_t n, size_t chunk, const Call& call,
                                std::string_view what, std::string_view path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = call(p + done, std::min(n - done, chunk), done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, what, path);
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

absl::Status WriteResult(absl::StatusOr<size_t> done, size_t n, std::string_view path) {
  if (!done.ok()) return done.status();
  if (*done < n) return ErrnoError(EIO, "cannot write", path);
  return absl::OkStatus();
}

}  // namespace

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

absl::Status UniqueFd::Close(std::string_view path) {
  if (fd_ < 0) return absl::OkStatus();
  if (::close(std::exchange(fd_, -1)) != 0) return ErrnoError(errno, "cannot close", path);
  return absl::OkStatus();
}

absl::Status ErrnoError(int err, std::string_view what, std::string_view path) {
  std::string msg = path.empty() ? absl::StrCat(AV(what), ": ", std::strerror(err))
                                 : absl::StrCat(AV(what), " ", AV(path), ": ", std::strerror(err));
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

absl::StatusOr<size_t> ReadAll(int fd, void* data, size_t n, std::string_view path) {
  return Transfer(
      static_cast<char*>(data), n, kReadChunk,
      [fd](char* p, size_t k, size_t) { return ::read(fd, p, k); }, "cannot read", path);
}

absl::StatusOr<size_t> ReadAllAt(int fd, void* data, size_t n, uint64_t offset,
                                 std::string_view path) {
  return Transfer(
      static_cast<char*>(data), n, kReadChunk,
      [fd, offset](char* p, size_t k, size_t done) {
        return ::pread(fd, p, k, static_cast<off_t>(offset + done));
      },
      "cannot read", path);
}

absl::Status WriteAll(int fd, const void* data, size_t n, std::string_view path) {
  return WriteResult(
      Transfer(
          static_cast<const char*>(data), n, kWriteChunk,
          [fd](const char* p, size_t k, size_t) { return ::write(fd, p, k); }, "cannot write",
          path),
      n, path);
}

absl::Status WriteAllAt(int fd, const void* data, size_t n, uint64_t offset,
                        std::string_view path) {
  return WriteResult(Transfer(
                         static_cast<const char*>(data), n, kWriteChunk,
                         [fd, offset](const char* p, size_t k, size_t done) {
                           return ::pwrite(fd, p, k, static_cast<off_t>(offset + done));
                         },
                         "cannot write", path),
                     n, path);
}

}  // namespace os
}  // namespace internal
}  // namespace td
