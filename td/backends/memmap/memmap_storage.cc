#include "td/backends/memmap/memmap_storage.h"

#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <functional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/status.h"
#include "td/core/dtype.h"

namespace td {

using memmap_format::EntryKind;
using memmap_internal::Check;
using memmap_internal::JoinPath;
using memmap_internal::UniqueFd;

namespace {

EntryKind KindOf(const Value& v) {
  if (v.is_tensor()) return EntryKind::kTensor;
  if (v.is_tensordict()) return EntryKind::kTensorDict;
  return EntryKind::kNonTensor;
}

}  // namespace

// ---- MemmapStorage -------------------------------------------------------------------------

MemmapStorage::MemmapStorage(std::string dir, std::vector<int64_t> batch_size, MemmapMode mode,
                             bool root)
    : EntryStorage(std::move(batch_size), at::Device(at::kCPU)),
      dir_(std::move(dir)),
      mode_(mode),
      root_(root) {}

Capabilities MemmapStorage::capabilities() const {
  if (mode_ == MemmapMode::kReadOnly) return Capability::kPersistent | Capability::kCpuOnly;
  return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
         Capability::kBatchResize | Capability::kPersistent | Capability::kCrossProcess |
         Capability::kCpuOnly;
}

size_t MemmapStorage::AddLoaded(std::string key, Value value) {
  return entries_.set(key, std::move(value));
}

void MemmapStorage::SetLoadedTensor(size_t index, at::Tensor tensor) {
  entries_.value(index) = Value(std::move(tensor));
}

void MemmapStorage::RequireWritable(std::string_view what, std::string_view key) const {
  if (mode_ == MemmapMode::kReadOnly) {
    Fail<ValueError>("cannot ", what, " key ", NestedKey(key).repr(), ": the memmap TensorDict at ",
                     dir_, " was opened read-only (MemmapMode::kReadOnly)");
  }
}

int MemmapStorage::OpenLevel() const {
  return memmap_internal::ValueOrThrowMemmap(memmap_internal::OpenDir(dir_, root_)).release();
}

void MemmapStorage::WriteMeta(int dirfd) const {
  memmap_format::LevelMeta meta;
  meta.batch_size = batch_size_;
  for (const auto& [key, v] : entries_.entries()) {
    memmap_format::EntryMeta e;
    e.key = key;
    e.kind = KindOf(v);
    if (v.is_tensor()) {
      e.dtype = v.tensor().scalar_type();
      e.shape = v.tensor().sizes().vec();
    }
    meta.entries.push_back(std::move(e));
  }
  Check(memmap_internal::ReplaceFileAt(dirfd, std::string(memmap_format::kMetaFile),
                                       memmap_format::LevelMetaJson(meta), /*sync=*/false,
                                       JoinPath(dir_, memmap_format::kMetaFile)));
}

void MemmapStorage::set(std::string_view key_view, Value value) {
  RequireWritable("set", key_view);
  const std::string key(key_view);
  const NestedKey nk(key);
  Check(memmap_format::CheckWritableKey(key, "memmap set"));
  const EntryKind kind = KindOf(value);
  const std::string name = memmap_format::EntryFileName(key, kind);
  if (name == memmap_format::kMetaFile ||
      name.compare(0, memmap_format::kTempPrefix.size(), memmap_format::kTempPrefix) == 0) {
    Fail<ValueError>("key ", nk.repr(), " cannot be memory-mapped: its file name '", name,
                     "' is reserved by the memmap format");
  }
  for (const auto& [other, v] : entries_.entries()) {
    if (other != key && memmap_format::EntryFileName(other, KindOf(v)) == name) {
      Fail<ValueError>("key ", nk.repr(), " cannot be memory-mapped next to key ",
                       NestedKey(other).repr(), ": both use the file name '", name, "'");
    }
  }
  UniqueFd dir(OpenLevel());
  const std::string path = JoinPath(dir_, name);
  const std::string tmp = memmap_internal::TempName(name);
  Value stored = value;
  try {
    if (kind == EntryKind::kTensor) {
      const at::Tensor& t = value.tensor();
      DtypeName(t.scalar_type());  // TypeError for a dtype the format cannot name
      int raw = ::openat(dir.get(), tmp.c_str(),
                         O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      if (raw < 0) Check(memmap_internal::ErrnoError(errno, "cannot create a file in", dir_));
      UniqueFd fd(raw);
      Check(memmap_internal::WriteTensor(fd.get(), t, path));
      stored = memmap_internal::ValueOrThrowMemmap(memmap_internal::MapFile(
          fd.get(), path, t.scalar_type(), t.sizes().vec(), MemmapMode::kReadWrite));
      if (::renameat(dir.get(), tmp.c_str(), dir.get(), name.c_str()) != 0) {
        Check(memmap_internal::ErrnoError(errno, "cannot rename a temporary file onto", path));
      }
    } else {
      memmap_internal::WriteOptions wo;
      if (kind == EntryKind::kNonTensor) {
        Check(memmap_format::CheckWritableJson(value.non_tensor(),
                                               absl::StrCat("non-tensor data of key ", nk.repr())));
      } else {
        memmap_internal::ValidateTree(value.tensordict(), path, wo);
      }
      memmap_internal::WriteEntryDir(value, batch_size_, dir.get(), tmp, path, wo);
      Check(memmap_internal::CommitDir(dir.get(), tmp, name, path, false));
      if (kind == EntryKind::kTensorDict) {
        UniqueFd sub(memmap_internal::ValueOrThrowMemmap(
                         memmap_internal::OpenDirAt(dir.get(), name, path))
                         .release());
        std::shared_ptr<MemmapStorage> loaded = memmap_internal::ValueOrThrowMemmap(
            memmap_internal::LoadLevel(sub.get(), path, mode_, false, &batch_size_, 0));
        stored = TensorDict(std::move(loaded));
      }
    }
  } catch (...) {
    memmap_internal::RemoveAt(dir.get(), tmp, JoinPath(dir_, tmp)).IgnoreError();
    throw;
  }
  std::optional<std::string> old_name;
  if (const Value* old = entries_.find(key)) {
    old_name = memmap_format::EntryFileName(key, KindOf(*old));
  }
  entries_.set(key, std::move(stored));
  WriteMeta(dir.get());
  if (old_name && *old_name != name) {
    Check(memmap_internal::RemoveAt(dir.get(), *old_name, JoinPath(dir_, *old_name)));
  }
}

void MemmapStorage::set_(std::string_view key, const at::Tensor& value) {
  RequireWritable("write", key);
  Storage::set_(key, value);
}

bool MemmapStorage::erase(std::string_view key) {
  RequireWritable("delete", key);
  const Value* old = entries_.find(key);
  if (old == nullptr) return false;
  const std::string name = memmap_format::EntryFileName(key, KindOf(*old));
  UniqueFd dir(OpenLevel());
  entries_.erase(key);
  WriteMeta(dir.get());
  Check(memmap_internal::RemoveAt(dir.get(), name, JoinPath(dir_, name)));
  return true;
}

void MemmapStorage::set_batch_size(std::vector<int64_t> batch_size) {
  Storage::set_batch_size(std::move(batch_size));
  if (mode_ == MemmapMode::kReadWrite) {
    UniqueFd dir(OpenLevel());
    WriteMeta(dir.get());
  }
}

// ---- loading -------------------------------------------------------------------------------

namespace memmap_internal {

absl::Status RunParallel(size_t n, int64_t num_threads,
                         const std::function<absl::Status(size_t)>& fn) {
  std::vector<absl::Status> status(n);
  if (num_threads <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) {
      status[i] = fn(i);
      if (!status[i].ok()) return status[i];
    }
    return absl::OkStatus();
  }
  // More threads than the machine runs only adds contention (and a oneTBB warning).
  const int threads = static_cast<int>(std::min<int64_t>(
      {num_threads, static_cast<int64_t>(tbb::info::default_concurrency()),
       static_cast<int64_t>(n)}));
  if (threads <= 1) return RunParallel(n, 1, fn);
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 1), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i != r.end(); ++i) status[i] = fn(i);
    });
  });
  for (absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

namespace {

constexpr int kMaxLevels = 128;

bool IsTemp(const std::string& name) {
  return name.compare(0, memmap_format::kTempPrefix.size(), memmap_format::kTempPrefix) == 0;
}

absl::Status Unexpected(const std::string& dir, const DirEntry& e) {
  const char* what = e.type == EntryType::kSymlink     ? "a symlink (refused)"
                     : e.type == EntryType::kDirectory ? "a directory"
                     : e.type == EntryType::kFile      ? "a file"
                                                       : "a special file";
  return absl::DataLossError(absl::StrCat(
      JoinPath(dir, e.name), " is ", what, " that ", JoinPath(dir, memmap_format::kMetaFile),
      " does not describe (remove it, or restore the meta.json that lists it)"));
}

// What a mapped leaf still needs once the whole tree is validated.
struct MapJob {
  std::shared_ptr<UniqueFd> dir;
  std::string name;
  std::string path;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  MemmapStorage* level;
  size_t index;
  at::Tensor result;
};

absl::Status LoadNonTensorDir(int dirfd, const std::string& path, nlohmann::json* data) {
  absl::StatusOr<std::string> text =
      ReadFileAt(dirfd, std::string(memmap_format::kMetaFile), memmap_format::kMaxMetaBytes,
                 JoinPath(path, memmap_format::kMetaFile));
  if (!text.ok()) return text.status();
  absl::StatusOr<nlohmann::json> parsed =
      memmap_format::ParseNonTensorMeta(*text, JoinPath(path, memmap_format::kMetaFile));
  if (!parsed.ok()) return parsed.status();
  *data = *std::move(parsed);
  absl::StatusOr<std::vector<DirEntry>> entries = ListDir(dirfd, path);
  if (!entries.ok()) return entries.status();
  for (const DirEntry& e : *entries) {
    if (IsTemp(e.name) || e.name == memmap_format::kMetaFile) continue;
    if (e.name == "other.pickle") {
      return absl::DataLossError(absl::StrCat(
          JoinPath(path, e.name), ": pickled data is never loaded (loading does not execute code)"));
    }
    if (e.name == memmap_format::kNonTensorInner && e.type == EntryType::kDirectory) {
      absl::StatusOr<UniqueFd> inner = OpenDirAt(dirfd, e.name, JoinPath(path, e.name));
      if (!inner.ok()) return inner.status();
      const std::string inner_path = JoinPath(path, e.name);
      absl::StatusOr<std::string> inner_text =
          ReadFileAt(inner->get(), std::string(memmap_format::kMetaFile),
                     memmap_format::kMaxMetaBytes, JoinPath(inner_path, memmap_format::kMetaFile));
      if (!inner_text.ok()) return inner_text.status();
      absl::StatusOr<memmap_format::LevelMeta> inner_meta = memmap_format::ParseLevelMeta(
          *inner_text, JoinPath(inner_path, memmap_format::kMetaFile));
      if (!inner_meta.ok()) return inner_meta.status();
      if (!inner_meta->entries.empty()) {
        return absl::DataLossError(absl::StrCat(JoinPath(inner_path, memmap_format::kMetaFile),
                                                ": the batch shape of non-tensor data lists ",
                                                inner_meta->entries.size(),
                                                " entries; expected none"));
      }
      absl::StatusOr<std::vector<DirEntry>> inner_entries = ListDir(inner->get(), inner_path);
      if (!inner_entries.ok()) return inner_entries.status();
      for (const DirEntry& ie : *inner_entries) {
        if (!IsTemp(ie.name) && ie.name != memmap_format::kMetaFile) {
          return Unexpected(inner_path, ie);
        }
      }
      continue;
    }
    return Unexpected(path, e);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<MemmapStorage>> LoadLevelImpl(
    std::shared_ptr<UniqueFd> dir, const std::string& path, MemmapMode mode, bool root,
    const std::vector<int64_t>* parent_batch, int depth, std::vector<MapJob>* jobs) {
  if (depth > kMaxLevels) {
    return absl::DataLossError(
        absl::StrCat(path, ": TensorDicts nested more than ", kMaxLevels, " levels deep"));
  }
  const std::string meta_path = JoinPath(path, memmap_format::kMetaFile);
  absl::StatusOr<std::string> text = ReadFileAt(
      dir->get(), std::string(memmap_format::kMetaFile), memmap_format::kMaxMetaBytes, meta_path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::DataLossError(absl::StrCat(
          path, " is not a memmap directory: it has no meta.json (", text.status().message(), ")"));
    }
    return text.status();
  }
  absl::StatusOr<memmap_format::LevelMeta> meta = memmap_format::ParseLevelMeta(*text, meta_path);
  if (!meta.ok()) return meta.status();
  if (parent_batch != nullptr &&
      (meta->batch_size.size() < parent_batch->size() ||
       !std::equal(parent_batch->begin(), parent_batch->end(), meta->batch_size.begin()))) {
    return absl::DataLossError(absl::StrCat(meta_path, ": batch size ", SizeRepr(meta->batch_size),
                                            " does not start with the parent's batch size ",
                                            SizeRepr(*parent_batch)));
  }
  absl::StatusOr<std::vector<DirEntry>> listing = ListDir(dir->get(), path);
  if (!listing.ok()) return listing.status();
  absl::flat_hash_map<std::string, EntryType> present;
  for (const DirEntry& e : *listing) present.emplace(e.name, e.type);
  absl::flat_hash_set<std::string> described = {std::string(memmap_format::kMetaFile)};
  for (const memmap_format::EntryMeta& e : meta->entries) {
    if (!described.insert(e.file_name).second) {
      return absl::DataLossError(absl::StrCat(meta_path, ": two entries use the file name '",
                                              e.file_name, "' (the second is ",
                                              NestedKey(e.key).repr(), ")"));
    }
    auto it = present.find(e.file_name);
    const std::string entry_path = JoinPath(path, e.file_name);
    if (it == present.end()) {
      return absl::DataLossError(absl::StrCat(entry_path, " is missing: ", meta_path,
                                              " describes key ", NestedKey(e.key).repr(), " as a ",
                                              e.kind == EntryKind::kTensor ? "tensor file"
                                              : e.kind == EntryKind::kTensorDict
                                                  ? "TensorDict directory"
                                                  : "NonTensorData directory"));
    }
    const EntryType want = e.kind == EntryKind::kTensor ? EntryType::kFile : EntryType::kDirectory;
    if (it->second != want) {
      return absl::DataLossError(absl::StrCat(
          entry_path, " is ",
          it->second == EntryType::kSymlink ? "a symlink (refused)"
          : it->second == EntryType::kDirectory ? "a directory"
          : it->second == EntryType::kFile ? "a file" : "a special file",
          ", but ", meta_path, " describes key ", NestedKey(e.key).repr(), " as a ",
          want == EntryType::kFile ? "tensor file" : "directory"));
    }
  }
  for (const DirEntry& e : *listing) {
    if (!described.contains(e.name) && !IsTemp(e.name)) return Unexpected(path, e);
  }
  auto level = std::make_shared<MemmapStorage>(path, meta->batch_size, mode, root);
  for (memmap_format::EntryMeta& e : meta->entries) {
    const std::string entry_path = JoinPath(path, e.file_name);
    switch (e.kind) {
      case EntryKind::kTensor: {
        const size_t index = level->AddLoaded(e.key, Value(at::Tensor()));
        jobs->push_back(MapJob{dir, e.file_name, entry_path, e.dtype, std::move(e.shape),
                               level.get(), index, at::Tensor()});
        break;
      }
      case EntryKind::kTensorDict: {
        absl::StatusOr<UniqueFd> sub = OpenDirAt(dir->get(), e.file_name, entry_path);
        if (!sub.ok()) return sub.status();
        absl::StatusOr<std::shared_ptr<MemmapStorage>> child =
            LoadLevelImpl(std::make_shared<UniqueFd>(*std::move(sub)), entry_path, mode, false,
                          &meta->batch_size, depth + 1, jobs);
        if (!child.ok()) return child.status();
        level->AddLoaded(e.key, Value(TensorDict(*std::move(child))));
        break;
      }
      case EntryKind::kNonTensor: {
        absl::StatusOr<UniqueFd> sub = OpenDirAt(dir->get(), e.file_name, entry_path);
        if (!sub.ok()) return sub.status();
        nlohmann::json data;
        absl::Status s = LoadNonTensorDir(sub->get(), entry_path, &data);
        if (!s.ok()) return s;
        level->AddLoaded(e.key, Value(NonTensorData(std::move(data))));
        break;
      }
    }
  }
  return level;
}

}  // namespace

absl::StatusOr<std::shared_ptr<MemmapStorage>> LoadLevel(int dirfd, const std::string& path,
                                                         MemmapMode mode, bool root,
                                                         const std::vector<int64_t>* parent_batch,
                                                         int64_t num_threads) {
  int own = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return ErrnoError(errno, "cannot duplicate the descriptor of", path);
  std::vector<MapJob> jobs;
  absl::StatusOr<std::shared_ptr<MemmapStorage>> level = LoadLevelImpl(
      std::make_shared<UniqueFd>(own), path, mode, root, parent_batch, 0, &jobs);
  if (!level.ok()) return level.status();
  absl::Status s = RunParallel(jobs.size(), num_threads, [&](size_t i) -> absl::Status {
    MapJob& job = jobs[i];
    absl::StatusOr<UniqueFd> fd =
        OpenFileAt(job.dir->get(), job.name, mode == MemmapMode::kReadWrite, job.path);
    if (!fd.ok()) return fd.status();
    absl::StatusOr<at::Tensor> t = MapFile(fd->get(), job.path, job.dtype, job.shape, mode);
    if (!t.ok()) return t.status();
    job.result = *std::move(t);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  for (MapJob& job : jobs) job.level->SetLoadedTensor(job.index, std::move(job.result));
  return level;
}

}  // namespace memmap_internal

TD_REGISTER_STORAGE_BACKEND("memmap", [](const StorageSpec& spec)
                                          -> absl::StatusOr<std::shared_ptr<Storage>> {
  std::string path = spec.path();
  if (path.empty()) {
    // No directory given: a new one under $TMPDIR (the caller owns it).
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/td-memmap-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return memmap_internal::ErrnoError(errno, "cannot create a directory like", templ);
    }
    path = templ + "/td";
  }
  try {
    TensorDict empty({}, spec.batch_size());
    TensorDict out = empty.memmap(path, MemmapOptions().exists_ok(false));
    out.unlock_();
    return out.storage_ptr();
  } catch (const ValueError& e) {
    return absl::InvalidArgumentError(e.what_without_backtrace());
  } catch (const c10::Error& e) {
    return absl::DataLossError(e.what_without_backtrace());
  }
});

}  // namespace td
