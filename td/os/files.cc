#include "td/os/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace td {
namespace internal {
namespace os {

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  return out.append(name);
}

absl::StatusOr<std::vector<DirEntry>> ListDir(int dirfd, std::string_view path) {
  UniqueFd fd(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = fd.valid() ? ::fdopendir(fd.get()) : nullptr;
  if (dir == nullptr) return ErrnoError(errno, "cannot list", path);
  fd.release();  // closedir closes it
  std::vector<DirEntry> out;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    unsigned char t = e->d_type;
    struct stat st;
    if (t == DT_UNKNOWN && ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      t = IFTODT(st.st_mode);
    }
    EntryType type = t == DT_REG ? EntryType::kFile
                     : t == DT_DIR ? EntryType::kDirectory
                     : t == DT_LNK ? EntryType::kSymlink : EntryType::kOther;
    out.push_back({std::move(name), type});
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return ErrnoError(err, "cannot list", path);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

absl::Status MakeDirAt(int dirfd, const std::string& name, std::string_view path) {
  return ErrnoUnless(::mkdirat(dirfd, name.c_str(), 0755) == 0, "cannot create directory", path);
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(path, " exists and is not a directory"));
  }
  const size_t slash = path.find_last_of('/', path.size() > 1 ? path.size() - 2 : 0);
  if (slash != std::string::npos && slash > 0) {
    absl::Status s = MakeDirs(path.substr(0, slash));
    if (!s.ok()) return s;
  }
  return ErrnoUnless(::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST,
                     "cannot create directory", path);
}

absl::Status SyncDir(int fd, std::string_view path) {
  return ErrnoUnless(::fsync(fd) == 0, "cannot fsync directory", path);
}

absl::Status SyncDirPath(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "cannot open directory", path);
  return SyncDir(fd.get(), path);
}

int LockUntil(int fd, int op, Deadline deadline) {
  for (auto sleep = std::chrono::microseconds(100);;) {
    if (::flock(fd, op | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK && errno != EINTR) return errno;
    if (std::chrono::steady_clock::now() >= deadline) return EWOULDBLOCK;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(20000));
  }
}

absl::Status RemoveAt(int dirfd, const std::string& name, const std::string& path,
                      std::optional<Deadline> lock_until) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT) return absl::OkStatus();
  if (errno != EISDIR && errno != EPERM) return ErrnoError(errno, "cannot remove", path);
  UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!sub.valid()) {
    if (errno == ENOENT) return absl::OkStatus();  // removed by someone else meanwhile
    return ErrnoError(errno, "cannot open directory", path);
  }
  if (const int err = lock_until ? LockUntil(sub.get(), LOCK_EX, *lock_until) : 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot remove ", path, ": readers still hold it (", std::strerror(err), ")"));
  }
  absl::StatusOr<std::vector<DirEntry>> entries = ListDir(sub.get(), path);
  if (!entries.ok()) return entries.status();
  for (const DirEntry& e : *entries) {
    absl::Status s = RemoveAt(sub.get(), e.name, JoinPath(path, e.name), lock_until);
    if (!s.ok()) return s;
  }
  return ErrnoUnless(::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT,
                     "cannot remove directory", path);
}

absl::StatusOr<UniqueFd> OpenNewFileAt(int dirfd, const std::string& name, std::string_view path) {
  UniqueFd fd(::openat(dirfd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0644));
  if (!fd.valid()) return ErrnoError(errno, "cannot create", path);
  return fd;
}

absl::Status CreateFileAt(int dirfd, const std::string& name, std::string_view data, bool sync,
                          std::string_view path) {
  absl::StatusOr<UniqueFd> fd = OpenNewFileAt(dirfd, name, path);
  if (!fd.ok()) return fd.status();
  absl::Status s = WriteAll(fd->get(), data.data(), data.size(), path);
  if (s.ok() && sync) s = ErrnoUnless(::fsync(fd->get()) == 0, "cannot fsync", path);
  return s;
}

absl::StatusOr<FileReplacement> FileReplacement::Begin(int dirfd, std::string name,
                                                       std::string temp, std::string path) {
  FileReplacement f;
  f.display_ = absl::StrCat(path, " (temporary ", temp, ")");
  absl::StatusOr<UniqueFd> fd = OpenNewFileAt(dirfd, temp, f.display_);
  if (!fd.ok()) return fd.status();
  f.dirfd_ = dirfd;
  f.name_ = std::move(name);
  f.temp_ = std::move(temp);
  f.fd_ = *std::move(fd);
  return f;
}

FileReplacement::~FileReplacement() {
  if (fd_.valid()) ::unlinkat(dirfd_, temp_.c_str(), 0);
}

absl::Status FileReplacement::Commit(bool sync) {
  absl::Status s;
  if (sync && ::fsync(fd_.get()) != 0) s = ErrnoError(errno, "cannot fsync", display_);
  s.Update(fd_.Close(display_));
  if (s.ok() && ::renameat(dirfd_, temp_.c_str(), dirfd_, name_.c_str()) != 0) {
    s = ErrnoError(errno, "cannot rename into place", display_);
  }
  if (!s.ok()) ::unlinkat(dirfd_, temp_.c_str(), 0);
  return s;
}

absl::Status ReplaceFileAt(int dirfd, std::string name, std::string temp, std::string path,
                           bool sync, absl::FunctionRef<absl::Status(int fd)> write) {
  absl::StatusOr<FileReplacement> f =
      FileReplacement::Begin(dirfd, std::move(name), std::move(temp), std::move(path));
  if (!f.ok()) return f.status();
  absl::Status s = write(f->fd());
  if (!s.ok()) return s;  // ~FileReplacement removes the temporary
  return f->Commit(sync);
}

absl::StatusOr<std::optional<std::string>> ReplaceDirAt(int dirfd, const std::string& temp,
                                                        const std::string& name,
                                                        const std::string& aside,
                                                        std::string_view path) {
  const char* from = temp.c_str();
  const char* to = name.c_str();
  if (::renameat2(dirfd, from, dirfd, to, RENAME_NOREPLACE) == 0) return std::nullopt;
  // Without renameat2 flags on this file system: a plain rename, which replaces only an empty
  // directory; a full one is moved aside below.
  const bool flags = errno != EINVAL && errno != ENOSYS;
  if (!flags && ::renameat(dirfd, from, dirfd, to) == 0) return std::nullopt;
  if (errno != EEXIST && errno != ENOTEMPTY) {
    return ErrnoError(errno, "cannot rename the new directory to", path);
  }
  if (flags) {
    if (::renameat2(dirfd, from, dirfd, to, RENAME_EXCHANGE) == 0) {
      return std::optional<std::string>(temp);  // `temp` now holds the previous content
    }
    if (errno != EINVAL && errno != ENOSYS) {
      return ErrnoError(errno, "cannot swap the new directory into", path);
    }
  }
  // Neither flag works here: move the previous directory aside, then the new one in.
  if (::renameat(dirfd, to, dirfd, aside.c_str()) != 0) {
    return ErrnoError(errno, "cannot move the previous directory away from", path);
  }
  if (::renameat(dirfd, from, dirfd, to) != 0) {
    const int err = errno;
    ::renameat(dirfd, aside.c_str(), dirfd, to);
    return ErrnoError(err, "cannot rename the new directory to", path);
  }
  return std::optional<std::string>(aside);
}

}  // namespace os
}  // namespace internal
}  // namespace td
