#include "td/backends/memmap/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "td/backends/memmap/format.h"

namespace td {
namespace internal {
namespace memmap {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

absl::Status ErrnoError(int err, std::string_view what, std::string_view path) {
  absl::Status s = internal::os::ErrnoError(err, what, path);
  if (err != ELOOP) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(),
                                             " (symlinks are refused inside memmap directories)"));
}

absl::StatusOr<UniqueFd> OpenDir(const std::string& path, bool follow_symlink) {
  int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  if (!follow_symlink) flags |= O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) return ErrnoError(errno, "cannot open directory", path);
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& path) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot open directory", path);
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> OpenFileAt(int dirfd, const std::string& name, bool writable,
                                    const std::string& path) {
  int fd = ::openat(dirfd, name.c_str(),
                    (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(errno, "cannot open", path);
  UniqueFd owned(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat(path, " is not a regular file"));
  }
  // O_NONBLOCK only kept open() from blocking on a FIFO planted under the name; drop it.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return owned;
}

absl::StatusOr<int64_t> FileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, "cannot stat", path);
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<std::string> ReadFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                       const std::string& path) {
  absl::StatusOr<UniqueFd> fd = OpenFileAt(dirfd, name, /*writable=*/false, path);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<int64_t> size = FileSize(fd->get(), path);
  if (!size.ok()) return size.status();
  if (static_cast<uint64_t>(*size) > max_bytes) {
    return absl::DataLossError(absl::StrCat(path, " has ", *size, " bytes, more than the ",
                                            max_bytes, " allowed"));
  }
  std::string out(static_cast<size_t>(*size), '\0');
  absl::StatusOr<size_t> n = internal::os::ReadAll(fd->get(), out.data(), out.size(), path);
  if (!n.ok()) return n.status();
  out.resize(*n);  // fewer bytes when the file shrank while being read
  return out;
}

absl::Status ReplaceFileAt(int dirfd, const std::string& name, std::string_view data, bool sync,
                           const std::string& path) {
  return internal::os::ReplaceFileAt(dirfd, name, TempName(name), path, sync, [&](int fd) {
    return WriteAll(fd, data.data(), data.size(), path);
  });
}

namespace {

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Opens with `open_fn`, locks shared, checks with `stat_fn` that the name still holds it.
template <class Open, class Stat>
absl::StatusOr<UniqueFd> OpenLocked(const Open& open_fn, const Stat& stat_fn,
                                    const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    absl::StatusOr<UniqueFd> fd = open_fn();
    if (!fd.ok()) return fd.status();
    if (const int err = internal::os::LockUntil(fd->get(), LOCK_SH, deadline)) {
      return ErrnoError(err, "cannot lock (it is being removed or replaced continuously)", path);
    }
    struct stat mine, named;
    if (::fstat(fd->get(), &mine) != 0) return ErrnoError(errno, "cannot stat", path);
    if (stat_fn(&named) == 0 && SameFile(mine, named) && mine.st_nlink > 0) return fd;
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(
          absl::StrCat(path, " is being replaced continuously; gave up after 10 s"));
    }
    // Swapped out between open and lock: open the version now under the name.
  }
}

}  // namespace

absl::StatusOr<UniqueFd> OpenDirShared(int dirfd, const std::string& name,
                                       const std::string& path) {
  return OpenLocked([&] { return OpenDirAt(dirfd, name, path); },
                    [&](struct stat* st) {
                      return ::fstatat(dirfd, name.c_str(), st, AT_SYMLINK_NOFOLLOW);
                    },
                    path);
}

absl::StatusOr<UniqueFd> OpenDirSharedPath(const std::string& path, bool follow_symlink) {
  return OpenLocked([&] { return OpenDir(path, follow_symlink); },
                    [&](struct stat* st) {
                      return follow_symlink ? ::stat(path.c_str(), st) : ::lstat(path.c_str(), st);
                    },
                    path);
}

absl::Status RemoveTree(int dirfd, const std::string& name, const std::string& path) {
  return RemoveAt(dirfd, name, path, std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

std::string TempName(std::string_view base) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  const uint64_t n = counter.fetch_add(1);
  std::string_view b = base.substr(0, 96);
  return absl::StrCat(AV(internal::memmap::kTempPrefix), ::getpid(), "-", n, "-",
                      absl::Hex(salt ^ (n * 0x9E3779B97F4A7C15ull)), "-", AV(b));
}

int64_t TempNamePid(std::string_view name, std::string_view base) {
  if (!IsTempName(name)) return -1;
  name.remove_prefix(internal::memmap::kTempPrefix.size());
  // <pid>-<counter>-<hex>-<base>
  const std::vector<absl::string_view> parts = absl::StrSplit(AV(name), absl::MaxSplits('-', 3));
  int64_t pid = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) return -1;
  return parts[3] == AV(base.substr(0, 96)) ? pid : -1;
}

}  // namespace memmap
}  // namespace internal
}  // namespace td
