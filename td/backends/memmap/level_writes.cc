// The checks of every memmap write (ValidateTree, before anything touches the disk), and the
// structural writes into an open memmap TensorDict (MemmapStorage::set / erase /
// set_batch_size), each committed atomically by swapping the level's directory. See NOTE
// [ Crash-safe level writes ] in memmap_internal.h.
#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"
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
void Mirror(int from_fd, int to_fd, const std::string& path,
            const absl::flat_hash_set<std::string>* skip,
            std::vector<std::shared_ptr<UniqueFd>>* dirs) {
  for (const DirEntry& e : ValueOrThrow<MemmapError>(ListDir(from_fd, path))) {
    if (IsTempName(e.name) || (skip != nullptr && skip->contains(e.name))) continue;
    const std::string entry_path = JoinPath(path, e.name);
    if (e.type != EntryType::kDirectory) {
      ThrowIfError<MemmapError>(LinkAt(from_fd, e.name, to_fd, e.name, entry_path));
      continue;
    }
    ThrowIfError<MemmapError>(os::MakeDirAt(to_fd, e.name, entry_path));
    const UniqueFd from = ValueOrThrow<MemmapError>(OpenDirShared(from_fd, e.name, entry_path));
    auto to = std::make_shared<UniqueFd>(
        ValueOrThrow<MemmapError>(OpenDirAt(to_fd, e.name, entry_path)));
    Mirror(from.get(), to->get(), entry_path, nullptr, dirs);
    dirs->push_back(std::move(to));
  }
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

constexpr size_t kNameMax = 255;

// Checks the entry `k` (full key `full`, file names of the level's other entries in `names`) of a
// level at `depth` that is written into `dir`: throws ValueError / TypeError naming the key for
// anything the write would fail on by construction. Returns its file name, now in `names`.
std::string CheckEntry(const std::string& k, const Value& v, const std::string& dir,
                       const WriteOptions& o, const NestedKey& full, int depth,
                       absl::flat_hash_map<std::string, std::string>* names) {
  const absl::Status key_ok = CheckWritableKey(k, "memmap");
  if (!key_ok.ok()) {
    TD_FAIL(ValueError, std::string(key_ok.message()), " (full key ", full.repr(), ")");
  }
  const std::string name = EntryFileName(k, KindOf(v));
  if (name.size() > kNameMax) {
    TD_FAIL(ValueError, "memmap: key ", full.repr(), " gives the file name '", name, "' of ",
            name.size(), " bytes; file systems allow ", kNameMax);
  }
  if (name == kMetaFile || IsTempName(name)) {
    TD_FAIL(ValueError, "memmap: key ", full.repr(), " cannot be memory-mapped: its file name '",
            name, "' is reserved by the memmap format");
  }
  auto [it, fresh] = names->emplace(name, k);
  if (!fresh) {
    TD_FAIL(ValueError, "memmap: keys ", NestedKey(it->second).repr(), " and ", full.repr(),
            " would both be stored as '", JoinPath(dir, name), "'");
  }
  if (v.is_tensor()) {
    const at::Tensor& t = v.tensor();
    // memmap() writes no sizes file for a nested tensor (docs/memmap.md, "written here").
    if (t.is_nested() || t.layout() != at::kStrided) {
      ThrowIfError(CheckStrided(t, c10::str("memmap: key ", full.repr())));
    }
    try {
      DtypeName(t.scalar_type());
    } catch (const c10::Error&) {
      TD_FAIL(TypeError, "memmap: key ", full.repr(), " has dtype ", t.scalar_type(),
              ", which the memmap format cannot name");
    }
    if (o.like || o.copy_existing) return name;
    const std::optional<std::string> file = MemoryMappedTensor::filename_of(t);
    if (file && *file != JoinPath(dir, name)) {
      TD_FAIL(ValueError, "memmap: key ", full.repr(), " is already memory-mapped to ", *file,
              "; pass MemmapOptions().copy_existing(true) to copy it to ", JoinPath(dir, name));
    }
  } else if (v.is_tensordict()) {
    ValidateTree(v.tensordict(), JoinPath(dir, name), o, &full, depth + 1);
  } else {
    ThrowIfError(CheckWritableJson(v.non_tensor(),
                                   absl::StrCat("memmap: non-tensor data of key ", full.repr())));
  }
  return name;
}

}  // namespace

void ValidateTree(const TensorDict& td, const std::string& dir, const WriteOptions& o,
                  const NestedKey* prefix, int depth) {
  if (depth > kMaxNestingDepth) {
    TD_FAIL(NestingError, "memmap: TensorDicts nested more than ", kMaxNestingDepth,
            " levels deep cannot be written (td::kMaxNestingDepth)");
  }
  if (const auto stack = LazyStackedTensorDict::from(td)) {
    // Python's layout: member i in the sub-directory "i" (NOTE [ Memmap directory format ]).
    const std::vector<TensorDict>& members = stack->tensordicts();
    for (size_t i = 0; i < members.size(); ++i) {
      ValidateTree(members[i], JoinPath(dir, std::to_string(i)), o, prefix, depth + 1);
    }
    return;
  }
  absl::flat_hash_map<std::string, std::string> names;  // file name -> key
  for (const std::string& k : td.storage().keys()) {
    std::optional<Value> v = td.storage().get(k);
    if (v) CheckEntry(k, *v, dir, o, prefix ? *prefix + NestedKey(k) : NestedKey(k), depth, &names);
  }
}

void CommitLevel(const std::string& dir, bool follow_symlink, const LevelChange& change) {
  // Read under a shared lock: NOTE [ Readers and removers of memmap directories ] (fs.h).
  UniqueFd old_dir = ValueOrThrow<MemmapError>(OpenDirShared(AT_FDCWD, dir, dir, follow_symlink));
  const LevelPlace place = Locate(old_dir.get(), dir);
  const UniqueFd parent = ValueOrThrow<MemmapError>(
      OpenDirAt(AT_FDCWD, place.parent, place.parent, /*follow_symlink=*/true));
  RemoveStaleTemps(parent.get(), place.parent, place.base);
  const std::string tmp = TempName(place.base);
  const std::string tmp_path = JoinPath(place.parent, tmp);
  ThrowIfError<MemmapError>(os::MakeDirAt(parent.get(), tmp, tmp_path));
  try {
    auto new_dir = std::make_shared<UniqueFd>(
        ValueOrThrow<MemmapError>(OpenDirAt(parent.get(), tmp, tmp_path)));
    std::vector<std::shared_ptr<UniqueFd>> dirs{new_dir};
    absl::flat_hash_set<std::string> skip(change.drop.begin(), change.drop.end());
    skip.insert(std::string(kMetaFile));
    Mirror(old_dir.get(), new_dir->get(), dir, &skip, &dirs);
    if (change.write) change.write(new_dir->get());
    ThrowIfError<MemmapError>(os::CreateFileAt(new_dir->get(), std::string(kMetaFile),
                                               change.meta_json, change.sync,
                                               JoinPath(dir, kMetaFile)));
    if (change.sync) {
      for (const auto& d : dirs) ThrowIfError<MemmapError>(os::SyncDir(d->get(), dir));
    }
    old_dir = UniqueFd();  // our own lock would keep CommitDir from removing the old version
    ThrowIfError<MemmapError>(CommitDir(parent.get(), tmp, place.base, dir, change.sync));
  } catch (...) {
    os::RemoveAt(parent.get(), tmp, tmp_path).IgnoreError();
    throw;
  }
}

}  // namespace memmap
}  // namespace internal

// ---- MemmapStorage writes ------------------------------------------------------------------

namespace mm = internal::memmap;

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
    meta.entries.push_back(mm::EntryMetaOf(key, replaced ? *add_value : v));
    added |= replaced;
  }
  if (add_key != nullptr && !added) meta.entries.push_back(mm::EntryMetaOf(*add_key, *add_value));
  return mm::LevelMetaJson(meta);
}

void MemmapStorage::set(std::string_view key_view, Value value) {
  RequireWritable("set", key_view);
  RequireNotField("set", key_view);
  const std::string key(key_view);
  absl::flat_hash_map<std::string, std::string> names;  // the other entries' files -> key
  for (const auto& [other, v] : entries().entries()) {
    if (other == key) continue;
    for (std::string& f : FilesOf(other, v)) names.emplace(std::move(f), other);
  }
  const mm::WriteOptions wo;
  // Depth -1: a TensorDict set here is checked as a top level, as memmap() checks its root.
  const std::string name = mm::CheckEntry(key, value, dir_, wo, NestedKey(key), -1, &names);
  const std::string path = mm::JoinPath(dir_, name);
  mm::LevelChange change;
  if (const Value* old = entries().find(key)) change.drop = FilesOf(key, *old);
  change.drop.push_back(name);
  change.meta_json = MetaJson(batch_size(), nullptr, &key, &value);
  const std::vector<int64_t> batch = batch_size().vec();
  Value stored = value;
  change.write = [&](int dirfd) {
    if (value.is_tensor()) {
      const at::Tensor& t = value.tensor();
      const mm::UniqueFd fd =
          ValueOrThrow<MemmapError>(internal::os::OpenNewFileAt(dirfd, name, path));
      ThrowIfError<MemmapError>(mm::WriteTensor(fd.get(), t, path));
      stored = ValueOrThrow<MemmapError>(
          mm::MapFile(fd.get(), path, t.scalar_type(), t.sizes().vec(), MemmapMode::kReadWrite));
      return;
    }
    mm::WriteEntryDir(value, batch, dirfd, name, path, wo);
    if (value.is_tensordict()) {
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
    const mm::UniqueFd dir = ValueOrThrow<MemmapError>(mm::OpenDirAt(AT_FDCWD, dir_, dir_, root_));
    const std::string meta = MetaJson(batch_size, nullptr, nullptr, nullptr);
    const std::string path = mm::JoinPath(dir_, mm::kMetaFile);
    ThrowIfError<MemmapError>(internal::os::ReplaceFileAt(
        dir.get(), std::string(mm::kMetaFile), mm::TempName(mm::kMetaFile), path, /*sync=*/false,
        [&](int fd) { return internal::os::WriteAll(fd, meta.data(), meta.size(), path); }));
  }
  Storage::set_batch_size(std::move(batch_size));
}

}  // namespace td
