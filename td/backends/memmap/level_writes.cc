// Structural writes into an open memmap TensorDict (MemmapStorage::set / erase /
// set_batch_size), each committed atomically by swapping the level's directory. See NOTE [ Crash-safe level writes ] in memmap_internal.h.
#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td {
namespace internal {
namespace memmap {
namespace {

absl::Status LinkAt(int from_fd, const std::string& from, int to_fd, const std::string& to,
                    const std::string& path) {
  if (::linkat(from_fd, from.c_str(), to_fd, to.c_str(), 0) == 0) return absl::OkStatus();
  const int err = errno;
  absl::Status s = ErrnoError(err, "cannot hard-link", path);
  if (err == EPERM || err == EOPNOTSUPP || err == EMLINK || err == EXDEV) {
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " (structural writes into a memmap directory "
                                                  "keep every other file by hard-linking it into "
                                                  "the level's new directory; this file system "
                                                  "does not allow that)"));
  }
  return s;
}

// Gives the directory `to_fd` the same tree as `from_fd`: sub-directories are recreated, files
// (and anything else) hard-linked. Temporaries of dead writers are left behind (dropped).
// `skip` (top level only): names not carried over. `dirs` collects every directory made.
absl::Status Mirror(int from_fd, int to_fd, const std::string& path,
                    const absl::flat_hash_set<std::string>* skip,
                    std::vector<std::shared_ptr<UniqueFd>>* dirs) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDir(from_fd, path);
  if (!entries.ok()) return entries.status();
  for (const DirEntry& e : *entries) {
    if (IsTempName(e.name) || (skip != nullptr && skip->contains(e.name))) continue;
    const std::string entry_path = JoinPath(path, e.name);
    if (e.type == EntryType::kDirectory) {
      absl::Status s = MakeDirAt(to_fd, e.name, entry_path);
      if (!s.ok()) return s;
      absl::StatusOr<UniqueFd> from = OpenDirShared(from_fd, e.name, entry_path);
      if (!from.ok()) return from.status();
      absl::StatusOr<UniqueFd> to = OpenDirAt(to_fd, e.name, entry_path);
      if (!to.ok()) return to.status();
      auto to_shared = std::make_shared<UniqueFd>(*std::move(to));
      s = Mirror(from->get(), to_shared->get(), entry_path, nullptr, dirs);
      if (!s.ok()) return s;
      dirs->push_back(std::move(to_shared));
    } else {
      absl::Status s = LinkAt(from_fd, e.name, to_fd, e.name, entry_path);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Where the level directory really is: its parent directory and its name there.
struct LevelPlace {
  std::string parent;
  std::string base;
};

LevelPlace Locate(int dirfd, const std::string& dir) {
  std::string real;
  char buf[PATH_MAX + 1];
  const std::string self = absl::StrCat("/proc/self/fd/", dirfd);
  const ssize_t n = ::readlink(self.c_str(), buf, PATH_MAX);
  if (n > 0 && buf[0] == '/') {
    real.assign(buf, static_cast<size_t>(n));
  } else if (::realpath(dir.c_str(), buf) != nullptr) {
    real = buf;
  } else {
    ThrowIfError<MemmapError>(ErrnoError(errno, "cannot resolve", dir));
  }
  if (real == "/" || real.find(" (deleted)") != std::string::npos) {
    TD_FAIL(MemmapError, "memmap: the directory ", dir, " is gone (removed or replaced while open)");
  }
  const size_t slash = real.rfind('/');
  return LevelPlace{slash == 0 ? "/" : real.substr(0, slash), real.substr(slash + 1)};
}

}  // namespace

void CommitLevel(const std::string& dir, bool follow_symlink, const LevelChange& change) {
  // Read under a shared lock: NOTE [ Readers and removers of memmap directories ] (fs.h).
  UniqueFd old_dir = ValueOrThrow<MemmapError>(OpenDirSharedPath(dir, follow_symlink));
  const LevelPlace place = Locate(old_dir.get(), dir);
  UniqueFd parent = ValueOrThrow<MemmapError>(OpenDir(place.parent, /*follow_symlink=*/true));
  RemoveStaleTemps(parent.get(), place.parent, place.base);
  const std::string tmp = TempName(place.base);
  const std::string tmp_path = JoinPath(place.parent, tmp);
  ThrowIfError<MemmapError>(MakeDirAt(parent.get(), tmp, tmp_path));
  try {
    auto new_dir = std::make_shared<UniqueFd>(
        ValueOrThrow<MemmapError>(OpenDirAt(parent.get(), tmp, tmp_path)));
    std::vector<std::shared_ptr<UniqueFd>> dirs;
    absl::flat_hash_set<std::string> skip(change.drop.begin(), change.drop.end());
    skip.insert(std::string(internal::memmap::kMetaFile));
    ThrowIfError<MemmapError>(Mirror(old_dir.get(), new_dir->get(), dir, &skip, &dirs));
    if (change.write) change.write(new_dir->get());
    ThrowIfError<MemmapError>(CreateFileAt(new_dir->get(), std::string(internal::memmap::kMetaFile),
                                           change.meta_json, change.sync,
                                           JoinPath(dir, internal::memmap::kMetaFile)));
    if (change.sync) {
      for (const auto& d : dirs) ThrowIfError<MemmapError>(SyncDir(d->get(), dir));
      ThrowIfError<MemmapError>(SyncDir(new_dir->get(), dir));
    }
    old_dir = UniqueFd();  // our own lock would keep CommitDir from removing the old version
    ThrowIfError<MemmapError>(CommitDir(parent.get(), tmp, place.base, dir, change.sync));
  } catch (...) {
    RemoveAt(parent.get(), tmp, tmp_path).IgnoreError();
    throw;
  }
}

}  // namespace memmap
}  // namespace internal

// ---- MemmapStorage writes ------------------------------------------------------------------

namespace mm = internal::memmap;
using mm::EntryKind;
using mm::EntryMetaOf;
using mm::KindOf;

std::string MemmapStorage::MetaJson(at::IntArrayRef batch_size,
                                    const std::string* skip_key, const std::string* add_key,
                                    const Value* add_value) const {
  mm::LevelMeta meta;
  meta.batch_size = batch_size.vec();
  bool added = false;
  for (const auto& [key, v] : entries().entries()) {
    // A tensorclass field is in the tensorclass's own meta.json.
    if ((skip_key != nullptr && key == *skip_key) || IsField(key)) continue;
    // A replaced key keeps its place, as EntryList::set keeps it.
    const bool replaced = add_key != nullptr && key == *add_key;
    meta.entries.push_back(EntryMetaOf(key, replaced ? *add_value : v));
    added |= replaced;
  }
  if (add_key != nullptr && !added) meta.entries.push_back(EntryMetaOf(*add_key, *add_value));
  return mm::LevelMetaJson(meta);
}

void MemmapStorage::set(std::string_view key_view, Value value) {
  RequireWritable("set", key_view);
  RequireNotField("set", key_view);
  const std::string key(key_view);
  const NestedKey nk(key);
  ThrowIfError<MemmapError>(mm::CheckWritableKey(key, "memmap set"));
  const EntryKind kind = KindOf(value);
  const std::string name = mm::EntryFileName(key, kind);
  if (name == mm::kMetaFile || mm::IsTempName(name)) {
    TD_FAIL(ValueError, "key ", nk.repr(), " cannot be memory-mapped: its file name '", name,
                     "' is reserved by the memmap format");
  }
  for (const auto& [other, v] : entries().entries()) {
    const std::vector<std::string> files = FilesOf(other, v);
    if (other != key && std::find(files.begin(), files.end(), name) != files.end()) {
      TD_FAIL(ValueError, "key ", nk.repr(), " cannot be memory-mapped next to key ",
                       NestedKey(other).repr(), ": both use the file name '", name, "'");
    }
  }
  const std::string path = mm::JoinPath(dir_, name);
  mm::WriteOptions wo;
  if (kind == EntryKind::kTensor) {
    mm::CheckMappable(value.tensor(), nk, "memmap set");
    DtypeName(value.tensor().scalar_type());  // TypeError for a dtype the format cannot name
  } else if (kind == EntryKind::kNonTensor) {
    ThrowIfError<MemmapError>(mm::CheckWritableJson(
        value.non_tensor(), absl::StrCat("non-tensor data of key ", nk.repr())));
  } else {
    mm::ValidateTree(value.tensordict(), path, wo);
  }
  mm::LevelChange change;
  if (const Value* old = entries().find(key)) {
    for (std::string& f : FilesOf(key, *old)) change.drop.push_back(std::move(f));
  }
  change.drop.push_back(name);
  change.meta_json = MetaJson(batch_size(), nullptr, &key, &value);
  const std::vector<int64_t> batch = batch_size().vec();
  Value stored = value;
  change.write = [&](int dirfd) {
    if (kind == EntryKind::kTensor) {
      const at::Tensor& t = value.tensor();
      const mm::UniqueFd fd =
          ValueOrThrow<MemmapError>(internal::os::OpenNewFileAt(dirfd, name, path));
      ThrowIfError<MemmapError>(mm::WriteTensor(fd.get(), t, path));
      stored = ValueOrThrow<MemmapError>(
          mm::MapFile(fd.get(), path, t.scalar_type(), t.sizes().vec(), MemmapMode::kReadWrite));
      return;
    }
    mm::WriteEntryDir(value, batch, dirfd, name, path, wo);
    if (kind == EntryKind::kTensorDict) {
      mm::UniqueFd sub = ValueOrThrow<MemmapError>(mm::OpenDirAt(dirfd, name, path));
      stored = TensorDict(ValueOrThrow<MemmapError>(mm::LoadLevel(
          sub.get(), path, mode_, false, &batch, parallel::ParallelOptions().parallel(false))));
    }
  };
  mm::CommitLevel(dir_, root_, change);
  file_names_.erase(key);
  entries().set(key, std::move(stored));
}

void MemmapStorage::set_(std::string_view key, const at::Tensor& value) {
  RequireWritable("write", key);
  Storage::set_(key, value);
}

bool MemmapStorage::erase(std::string_view key_view) {
  RequireWritable("delete", key_view);
  RequireNotField("delete", key_view);
  const std::string key(key_view);
  const Value* old = entries().find(key);
  if (old == nullptr) return false;
  mm::LevelChange change;
  change.drop = FilesOf(key, *old);
  change.meta_json = MetaJson(batch_size(), &key, nullptr, nullptr);
  mm::CommitLevel(dir_, root_, change);
  file_names_.erase(key);
  entries().erase(key);
  return true;
}

void MemmapStorage::set_batch_size(std::vector<int64_t> batch_size) {
  if (mode_ == MemmapMode::kReadWrite) {
    // Only meta.json changes: one atomic replacement of that file.
    const mm::UniqueFd dir = ValueOrThrow<MemmapError>(mm::OpenDir(dir_, root_));
    ThrowIfError<MemmapError>(mm::ReplaceFileAt(dir.get(), std::string(mm::kMetaFile),
                                                MetaJson(batch_size, nullptr, nullptr, nullptr),
                                                /*sync=*/false, mm::JoinPath(dir_, mm::kMetaFile)));
  }
  Storage::set_batch_size(std::move(batch_size));
}

}  // namespace td
