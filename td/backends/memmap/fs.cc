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
  if (err == EEXIST) return absl::AlreadyExistsError(s.message());
  if (err != ELOOP) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(),
                                             " (symlinks are refused inside memmap directories)"));
}

absl::StatusOr<UniqueFd> OpenDirAt(int dirfd, const std::string& name, const std::string& path,
                                   bool follow_symlink) {
  const int fd = ::openat(dirfd, name.c_str(),
                          O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow_symlink ? 0 : O_NOFOLLOW));
  if (fd < 0) return ErrnoError(errno, "cannot open directory", path);
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> OpenFileAt(int dirfd, const std::string& name, bool writable,
                                    const std::string& path, int create_flags) {
  const int flags = (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  const int fd = ::openat(dirfd, name.c_str(), flags | create_flags, 0644);
  if (fd < 0) return ErrnoError(errno, create_flags ? "cannot create" : "cannot open", path);
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

absl::StatusOr<std::string> ReadFileAt(int dirfd, const std::string& name, size_t max_bytes,
                                       const std::string& path) {
  absl::StatusOr<UniqueFd> fd = OpenFileAt(dirfd, name, /*writable=*/false, path);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoError(errno, "cannot stat", path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::DataLossError(absl::StrCat(path, " has ", st.st_size, " bytes, more than the ",
                                            max_bytes, " allowed"));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  absl::StatusOr<size_t> n = internal::os::ReadAll(fd->get(), out.data(), out.size(), path);
  if (!n.ok()) return n.status();
  out.resize(*n);  // fewer bytes when the file shrank while being read
  return out;
}

absl::StatusOr<UniqueFd> OpenDirShared(int dirfd, const std::string& name, const std::string& path,
                                       bool follow_symlink) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    absl::StatusOr<UniqueFd> fd = OpenDirAt(dirfd, name, path, follow_symlink);
    if (!fd.ok()) return fd.status();
    if (const int err = internal::os::LockUntil(fd->get(), LOCK_SH, deadline)) {
      return ErrnoError(err, "cannot lock (it is being removed or replaced continuously)", path);
    }
    struct stat mine, named;
    if (::fstat(fd->get(), &mine) != 0) return ErrnoError(errno, "cannot stat", path);
    if (::fstatat(dirfd, name.c_str(), &named, follow_symlink ? 0 : AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == named.st_dev && mine.st_ino == named.st_ino && mine.st_nlink > 0) {
      return fd;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(
          absl::StrCat(path, " is being replaced continuously; gave up after 10 s"));
    }
    // Swapped out between open and lock: open the version now under the name.
  }
}

absl::Status RemoveTree(int dirfd, const std::string& name, const std::string& path) {
  return internal::os::RemoveAt(dirfd, name, path,
                               std::chrono::steady_clock::now() + std::chrono::seconds(30));
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
