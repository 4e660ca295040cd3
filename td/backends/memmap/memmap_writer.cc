// Writing memmap directories, and the TensorDict members memmap / memmap_ / memmap_like /
// load_memmap / is_memmap. See NOTE [ Crash-safe memmap writes ] (memmap_internal.h).
#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/archive_hook.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/storage_access.h"
#include "td/core/storage.h"
#include "td/executor/executor.h"

namespace td {
namespace internal {
namespace memmap {

constexpr size_t kNameMax = 255;

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
  const Storage& s = td.storage();
  absl::flat_hash_map<std::string, std::string> names;  // file name -> key
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    const absl::Status key_ok = CheckWritableKey(k, "memmap");
    if (!key_ok.ok()) {
      TD_FAIL(ValueError, std::string(key_ok.message()), " (full key ", full.repr(), ")");
    }
    const EntryKind kind = KindOf(*v);
    const std::string name = EntryFileName(k, kind);
    if (name.size() > kNameMax) {
      TD_FAIL(ValueError, "memmap: key ", full.repr(), " gives the file name '", name, "' of ",
                       name.size(), " bytes; file systems allow ", kNameMax);
    }
    if (name == kMetaFile || IsTempName(name)) {
      TD_FAIL(ValueError, "memmap: key ", full.repr(), " cannot be memory-mapped: its file name '",
                       name, "' is reserved by the memmap format");
    }
    auto [it, fresh] = names.emplace(name, k);
    if (!fresh) {
      TD_FAIL(ValueError, "memmap: keys ", NestedKey(it->second).repr(), " and ", full.repr(),
                       " would both be stored as '", JoinPath(dir, name), "'");
    }
    if (v->is_tensor()) {
      const at::Tensor& t = v->tensor();
      CheckMappable(t, full, "memmap");
      try {
        DtypeName(t.scalar_type());
      } catch (const c10::Error&) {
        TD_FAIL(TypeError, "memmap: key ", full.repr(), " has dtype ", t.scalar_type(),
                        ", which the memmap format cannot name");
      }
      if (!o.like && !o.copy_existing) {
        std::optional<std::string> file = MemoryMappedTensor::filename_of(t);
        const std::string dest = JoinPath(dir, name);
        if (file && *file != dest) {
          TD_FAIL(ValueError, "memmap: key ", full.repr(), " is already memory-mapped to ", *file,
                           "; pass MemmapOptions().copy_existing(true) to copy it to ", dest);
        }
      }
    } else if (v->is_tensordict()) {
      ValidateTree(v->tensordict(), JoinPath(dir, name), o, &full, depth + 1);
    } else {
      const absl::Status ok = CheckWritableJson(
          v->non_tensor(), absl::StrCat("memmap: non-tensor data of key ", full.repr()));
      if (!ok.ok()) TD_FAIL(ValueError, std::string(ok.message()));
    }
  }
}

namespace {

struct LeafJob {
  std::shared_ptr<UniqueFd> dir;
  std::string name;
  std::string path;
  at::Tensor tensor;
  NestedKey key;
};

// The new directory `name` inside `parent_fd`, made first when `make`.
std::shared_ptr<UniqueFd> OpenNew(int parent_fd, const std::string& name, const std::string& path,
                                  bool make = true) {
  if (make) ThrowIfError<MemmapError>(MakeDirAt(parent_fd, name, path));
  return std::make_shared<UniqueFd>(ValueOrThrow<MemmapError>(OpenDirAt(parent_fd, name, path)));
}

// A non-tensor entry's directory, as Python tensordict 0.5-0.14 writes it: a NonTensorStack is
// its meta.json alone; NonTensorData and MetaData also hold `_tensordict/` with the batch size.
void WriteNonTensor(const NonTensorData& data, const std::vector<int64_t>& batch, int dirfd,
                    const std::string& path, const WriteOptions& o,
                    std::vector<std::shared_ptr<UniqueFd>>* dirs) {
  ThrowIfError<MemmapError>(CreateFileAt(
      dirfd, std::string(kMetaFile),
      data.is_stack() ? NonTensorStackMetaJson(data.data)
                      : NonTensorMetaJson(data.data, data.kind == NonTensorData::Kind::kMetaData),
      o.sync, JoinPath(path, kMetaFile)));
  if (data.is_stack()) return;
  const std::string inner(kNonTensorInner);
  const std::string inner_path = JoinPath(path, inner);
  auto inner_fd = OpenNew(dirfd, inner, inner_path);
  LevelMeta meta;
  meta.batch_size = batch;
  ThrowIfError<MemmapError>(CreateFileAt(inner_fd->get(), std::string(kMetaFile),
                                         LevelMetaJson(meta), o.sync,
                                         JoinPath(inner_path, kMetaFile)));
  if (o.sync) dirs->push_back(std::move(inner_fd));
}

// Writes the level `td` into the (new, empty) directory `dir`; leaves become jobs.
void BuildLevel(const TensorDict& td, const std::shared_ptr<UniqueFd>& dir, const std::string& path,
                const WriteOptions& o, const NestedKey* prefix, std::vector<LeafJob>* jobs,
                std::vector<std::shared_ptr<UniqueFd>>* dirs) {
  if (const auto stack = LazyStackedTensorDict::from(td)) {
    const std::vector<TensorDict>& members = stack->tensordicts();
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string name = std::to_string(i);
      const std::string member_path = JoinPath(path, name);
      BuildLevel(members[i], OpenNew(dir->get(), name, member_path), member_path, o, prefix, jobs,
                 dirs);
    }
    ThrowIfError<MemmapError>(CreateFileAt(dir->get(), std::string(kMetaFile),
                                           LazyStackMetaJson(stack->stack_dim()), o.sync,
                                           JoinPath(path, kMetaFile)));
    if (o.sync) dirs->push_back(dir);
    return;
  }
  const Storage& s = td.storage();
  LevelMeta meta;
  meta.batch_size = td.batch_size().vec();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    EntryMeta e = EntryMetaOf(k, *v);
    const std::string name = EntryFileName(k, e.kind);
    const std::string entry_path = JoinPath(path, name);
    if (v->is_tensor()) {
      jobs->push_back(LeafJob{dir, name, entry_path, v->tensor(), full});
    } else if (v->is_tensordict()) {
      BuildLevel(v->tensordict(), OpenNew(dir->get(), name, entry_path), entry_path, o, &full, jobs,
                 dirs);
    } else {
      auto sub = OpenNew(dir->get(), name, entry_path);
      WriteNonTensor(v->non_tensor_data(), meta.batch_size, sub->get(), entry_path, o, dirs);
      if (o.sync) dirs->push_back(std::move(sub));
    }
    meta.entries.push_back(std::move(e));
  }
  ThrowIfError<MemmapError>(CreateFileAt(dir->get(), std::string(kMetaFile), LevelMetaJson(meta),
                                         o.sync, JoinPath(path, kMetaFile)));
  if (o.sync) dirs->push_back(dir);
}

absl::Status WriteLeaf(const LeafJob& job, const WriteOptions& o) {
  absl::StatusOr<UniqueFd> created =
      internal::os::OpenNewFileAt(job.dir->get(), job.name, job.path);
  if (!created.ok()) return created.status();
  const UniqueFd fd = *std::move(created);
  absl::Status s;
  if (o.like) {
    const int64_t nbytes = job.tensor.numel() * static_cast<int64_t>(job.tensor.element_size());
    if (o.reserve && nbytes > 0) {
      // posix_fallocate returns the error (glibc writes zeros where fallocate is unsupported).
      int err;
      do {
        err = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(nbytes));
      } while (err == EINTR);
      if (err != 0) {
        s = ErrnoError(err, absl::StrCat("no room: cannot reserve the ", nbytes, " bytes of"),
                       job.path);
      }
    } else if (::ftruncate(fd.get(), static_cast<off_t>(nbytes)) != 0) {
      s = ErrnoError(errno, "cannot resize", job.path);
    }
  } else {
    s = WriteTensor(fd.get(), job.tensor, job.path);
  }
  if (s.ok() && o.sync && ::fsync(fd.get()) != 0) s = ErrnoError(errno, "cannot fsync", job.path);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(s.message(), " (writing key ", job.key.repr(), ")"));
}

void RunJobs(const std::vector<LeafJob>& jobs, const std::vector<std::shared_ptr<UniqueFd>>& dirs,
             const WriteOptions& o) {
  int64_t bytes = 0;
  if (!o.like) {
    for (const LeafJob& job : jobs) bytes += job.tensor.numel() * job.tensor.element_size();
  }
  const int threads = WriteThreads(o.threads, bytes, jobs.size());
  ThrowIfError<MemmapError>(
      RunParallel(jobs.size(), threads, [&](size_t i) { return WriteLeaf(jobs[i], o); }));
  if (o.sync) {
    for (const auto& d : dirs) {
      ThrowIfError<MemmapError>(SyncDir(d->get(), "a directory being written"));
    }
  }
}

// Writes `td` into the new, empty directory `name` inside `parent_fd` (`path`: its final path,
// for messages). Throws; the caller removes `name` on failure.
void WriteTree(const TensorDict& td, int parent_fd, const std::string& name,
               const std::string& path, const WriteOptions& options) {
  auto dir = OpenNew(parent_fd, name, path, /*make=*/false);
  std::vector<LeafJob> jobs;
  std::vector<std::shared_ptr<UniqueFd>> dirs;
  BuildLevel(td, dir, path, options, nullptr, &jobs, &dirs);
  RunJobs(jobs, dirs, options);
}

struct Target {
  std::string path;    // absolute, normalised
  std::string parent;  // its directory
  std::string base;    // its last component
};

Target ParseTarget(const std::string& prefix) {
  if (prefix.empty()) TD_FAIL(ValueError, "memmap: the prefix (target directory) is empty");
  Target t;
  t.path = AbsolutePath(prefix);
  if (t.path == "/") TD_FAIL(ValueError, "memmap: cannot write to the root directory '/'");
  const size_t slash = t.path.rfind('/');
  t.parent = slash == 0 ? "/" : t.path.substr(0, slash);
  t.base = t.path.substr(slash + 1);
  return t;
}

// Refuses a target that memmap() may not replace (see MemmapOptions::exists_ok).
void CheckTarget(int parent_fd, const Target& t, bool exists_ok) {
  struct stat st;
  if (::fstatat(parent_fd, t.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return;
    ThrowIfError<MemmapError>(ErrnoError(errno, "cannot stat", t.path));
  }
  if (S_ISLNK(st.st_mode)) {
    TD_FAIL(ValueError, "memmap: ", t.path, " is a symlink; refusing to write through it (pass the "
                     "directory it points to)");
  }
  if (!S_ISDIR(st.st_mode)) {
    TD_FAIL(ValueError, "memmap: ", t.path, " exists and is not a directory");
  }
  UniqueFd dir = ValueOrThrow<MemmapError>(OpenDirShared(parent_fd, t.base, t.path));
  std::vector<DirEntry> entries = ValueOrThrow<MemmapError>(ListDir(dir.get(), t.path));
  if (entries.empty()) return;
  const bool is_memmap = std::any_of(entries.begin(), entries.end(), [](const DirEntry& e) {
    return e.name == kMetaFile && e.type == EntryType::kFile;
  });
  if (!is_memmap) {
    TD_FAIL(ValueError, "memmap: ", t.path, " is a non-empty directory without meta.json, not a "
                     "memmap directory; refusing to replace it");
  }
  if (!exists_ok) {
    TD_FAIL(ValueError, "memmap: ", t.path,
                     " already holds a memmap directory (pass MemmapOptions().exists_ok(true) "
                     "to replace it)");
  }
}

TensorDict WriteAndLoad(const TensorDict& td, const std::string& prefix,
                        const MemmapOptions& options, bool like, bool reserve = false) {
  const Target t = ParseTarget(prefix);
  WriteOptions wo;
  wo.like = like;
  wo.reserve = reserve;
  wo.copy_existing = options.copy_existing();
  wo.sync = options.fsync();
  parallel::check_num_threads(options.num_threads(), "MemmapOptions::num_threads");
  wo.threads = options.parallel_options();
  ValidateTree(td, t.path, wo);
  ThrowIfError<MemmapError>(MakeDirs(t.parent));
  UniqueFd parent = ValueOrThrow<MemmapError>(OpenDir(t.parent, /*follow_symlink=*/true));
  CheckTarget(parent.get(), t, options.exists_ok());
  RemoveStaleTemps(parent.get(), t.parent, t.base);
  const std::string tmp = TempName(t.base);
  ThrowIfError<MemmapError>(MakeDirAt(parent.get(), tmp, JoinPath(t.parent, tmp)));
  // Our own version stays locked (shared) until it is loaded: a concurrent memmap() to the same
  // prefix that swaps it out right after our commit waits for the load before removing it
  // (NOTE [ Readers and removers of memmap directories ] in fs.h).
  UniqueFd dir;
  try {
    WriteTree(td, parent.get(), tmp, t.path, wo);
    dir = ValueOrThrow<MemmapError>(OpenDirShared(parent.get(), tmp, JoinPath(t.parent, tmp)));
    ThrowIfError<MemmapError>(CommitDir(parent.get(), tmp, t.base, t.path, wo.sync));
  } catch (...) {
    dir = UniqueFd();
    RemoveAt(parent.get(), tmp, JoinPath(t.parent, tmp)).IgnoreError();
    throw;
  }
  // Loaded as load_memmap loads (every level locked as it is read, lazy stacks built over their
  // loaded members), so a lazy stack with ragged keys comes back too.
  // Its files are mapped as the write's threads say, with load_memmap's threshold in files.
  return ValueOrThrow<MemmapError>(
      LoadDir(dir.get(), t.path, MemmapMode::kReadWrite,
              parallel::ParallelOptions(wo.threads).min_cost(kLoadMemmapMinParallelFiles)));
}

// Puts the tensors of `mapped` (same structure) into `td`'s own storages.
void ReplaceLeaves(const TensorDict& td, const TensorDict& mapped) {
  if (const auto mine_stack = LazyStackedTensorDict::from(td)) {
    // The members hold the tensors; `mapped` is the lazy stack loaded from the same layout.
    const LazyStackedTensorDict theirs_stack(mapped);
    const std::vector<TensorDict>& mine = mine_stack->tensordicts();
    const std::vector<TensorDict>& theirs = theirs_stack.tensordicts();
    for (size_t i = 0; i < mine.size(); ++i) ReplaceLeaves(mine[i], theirs[i]);
    return;
  }
  Storage& s = internal::MutableStorage(td);
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    if (v->is_tensor()) {
      s.set(k, mapped.storage().get(k)->tensor());
    } else if (v->is_tensordict()) {
      ReplaceLeaves(v->tensordict(), mapped.storage().get(k)->tensordict());
    }
  }
  s.set_device(at::Device(at::kCPU));
}

}  // namespace

void CheckMappable(const at::Tensor& t, const NestedKey& key, std::string_view op) {
  // A nested (ragged) tensor reports the strided layout: is_nested() is what tells it apart.
  if (t.is_nested()) {
    TD_FAIL(ValueError, op, ": key ", key.repr(), " holds a nested (ragged) tensor; only strided ",
            "(dense) tensors can be memory-mapped (TensorDict::to_padded_tensor pads it into one)");
  }
  if (t.layout() != at::kStrided) {
    TD_FAIL(ValueError, op, ": key ", key.repr(), " holds a ", c10::str(t.layout()),
            " tensor; only strided (dense) tensors can be memory-mapped");
  }
}

EntryKind KindOf(const Value& v) {
  if (v.is_tensor()) return EntryKind::kTensor;
  if (v.is_tensordict()) return EntryKind::kTensorDict;
  return EntryKind::kNonTensor;
}

EntryMeta EntryMetaOf(const std::string& key, const Value& v) {
  EntryMeta e;
  e.key = key;
  e.kind = KindOf(v);
  if (v.is_tensor()) {
    e.dtype = v.tensor().scalar_type();
    // A nested tensor is described by the shape of its sizes (NOTE [ Memmap directory format ]).
    e.is_nested = v.tensor().is_nested();
    e.shape = e.is_nested ? v.tensor()._nested_tensor_size().sizes().vec()
                          : v.tensor().sizes().vec();
  } else if (v.is_tensordict() && LazyStackedTensorDict::from(v.tensordict())) {
    e.type_name = "LazyStackedTensorDict";
  } else if (v.is_non_tensor() && v.non_tensor_data().kind != NonTensorData::Kind::kData) {
    e.type_name = v.non_tensor_data().is_stack() ? "NonTensorStack" : "MetaData";
  }
  return e;
}

void RemoveStaleTemps(int parent_fd, const std::string& parent, const std::string& base) {
  absl::StatusOr<std::vector<DirEntry>> entries = ListDir(parent_fd, parent);
  if (!entries.ok()) return;
  for (const DirEntry& e : *entries) {
    const int64_t pid = TempNamePid(e.name, base);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      RemoveTree(parent_fd, e.name, JoinPath(parent, e.name)).IgnoreError();
    }
  }
}

int WriteThreads(const parallel::ParallelOptions& options, int64_t bytes, size_t leaves) {
  const int threads = parallel::plan_threads(static_cast<int64_t>(leaves), bytes, options);
  // More threads than the machine runs only adds contention.
  return std::min(threads, parallel::default_num_threads());
}

absl::Status RunParallel(size_t n, int num_threads,
                         const std::function<absl::Status(size_t)>& fn) {
  const int threads = static_cast<int>(std::min<int64_t>(
      {int64_t{num_threads}, int64_t{parallel::default_num_threads()}, static_cast<int64_t>(n)}));
  if (threads <= 1) {  // also for n <= 1
    for (size_t i = 0; i < n; ++i) {
      if (absl::Status s = fn(i); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::vector<absl::Status> status(n);
  parallel::parallel_for(static_cast<int64_t>(n), threads,
                         [&](int64_t i) { status[static_cast<size_t>(i)] = fn(i); });
  for (absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void WriteEntryDir(const Value& value, const std::vector<int64_t>& parent_batch, int parent_fd,
                   const std::string& name, const std::string& path, const WriteOptions& options) {
  if (value.is_tensordict()) {
    ThrowIfError<MemmapError>(MakeDirAt(parent_fd, name, path));
    WriteTree(value.tensordict(), parent_fd, name, path, options);
    return;
  }
  auto dir = OpenNew(parent_fd, name, path);
  std::vector<std::shared_ptr<UniqueFd>> dirs;
  WriteNonTensor(value.non_tensor_data(), parent_batch, dir->get(), path, options, &dirs);
  if (options.sync) {
    for (const auto& d : dirs) ThrowIfError<MemmapError>(SyncDir(d->get(), path));
    ThrowIfError<MemmapError>(SyncDir(dir->get(), path));
  }
}

absl::Status CommitDir(int parent_fd, const std::string& tmp, const std::string& name,
                       const std::string& path, bool sync) {
  // Where renameat2 has no flags, the previous tree is moved aside under a temporary name.
  absl::StatusOr<std::optional<std::string>> previous =
      internal::os::ReplaceDirAt(parent_fd, tmp, name, TempName(name), path);
  if (!previous.ok()) return previous.status();
  if (*previous) RemoveTree(parent_fd, **previous, path + " (previous content)").IgnoreError();
  if (sync) return SyncDir(parent_fd, path + "/..");
  return absl::OkStatus();
}

BackendHook<LoadArchiveFn> load_memmap_archive("TensorDict::load_memmap of an archive", "memmap");

}  // namespace memmap
}  // namespace internal

// ---- TensorDict members (registered as hooks: NOTE [ Backend entry points ]) -----------------

TensorDict MemmapLikeReserved(const TensorDict& td, const std::string& prefix,
                              const MemmapOptions& options) {
  return internal::memmap::WriteAndLoad(td, prefix, options, /*like=*/true, /*reserve=*/true);
}

namespace {

TensorDict Memmap(const TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  return internal::memmap::WriteAndLoad(td, prefix, options, /*like=*/false);
}

TensorDict MemmapLike(const TensorDict& td, const std::string& prefix,
                      const MemmapOptions& options) {
  return internal::memmap::WriteAndLoad(td, prefix, options, /*like=*/true);
}

TensorDict& MemmapInPlace(TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  if (td.backend() == "memmap") {
    const auto& ms = static_cast<const MemmapStorage&>(td.storage());
    if (internal::memmap::AbsolutePath(prefix) == ms.path()) return td;
    TD_FAIL(ValueError, "memmap_: this TensorDict is already memory-mapped at ", ms.path(),
                     "; use memmap(\"", prefix, "\") to write a copy");
  }
  TensorDict mapped = td.memmap(prefix, options);
  internal::memmap::ReplaceLeaves(td, mapped);
  td.lock_();
  return td;
}

TensorDict LoadMemmap(const std::string& prefix, const LoadMemmapOptions& options) {
  using namespace internal::memmap;  // NOLINT
  if (prefix.empty()) TD_FAIL(ValueError, "load_memmap: the prefix (directory) is empty");
  parallel::check_num_threads(options.num_threads(), "LoadMemmapOptions::num_threads");
  std::string path = AbsolutePath(prefix);
  // A file: a memmap archive, opened by //td/backends/memmap/archive when it is linked
  // (NOTE [ load_memmap of an archive ] in archive_hook.h).
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (LoadArchiveFn* load_archive = load_memmap_archive.get()) {
      return load_archive(prefix, options);
    }
    TD_FAIL(MemmapError, "load_memmap: ", path, " is a file, not a memmap directory; "
            "load_memmap opens a memmap archive (.tdz) only when the archive reader is linked "
            "into this program: add \"@tensordict//td/backends/memmap/archive\" "
            "(//td/backends/memmap/archive inside the tensordict workspace; //td/io includes it) "
            "to the deps of your target");
  }
  // Every directory on the way stays locked (shared) while loading: NOTE [ Readers and removers
  // of memmap directories ] in fs.h.
  UniqueFd dir = ValueOrThrow<MemmapError>(OpenDirSharedPath(path, /*follow_symlink=*/true),
                                           "load_memmap: no memmap directory at " + path);
  std::vector<UniqueFd> ancestors;
  if (options.sub_path()) {
    for (const std::string& part : *options.sub_path()) {
      std::string sub_path;
      UniqueFd sub = ValueOrThrow<MemmapError>(
          OpenSubTensorDict(dir.get(), part, path, &sub_path),
          c10::str("load_memmap: no sub-TensorDict ", options.sub_path()->repr(), " under ",
                   AbsolutePath(prefix)));
      ancestors.push_back(std::move(dir));
      dir = std::move(sub);
      path = sub_path;
    }
  }
  // Locked level by level while loading (lock_() would read every key of a lazy stack).
  return ValueOrThrow<MemmapError>(
      LoadDir(dir.get(), path, options.mode(), options.parallel_options()));
}

bool IsMemmap(const TensorDict& td) {
  if (td.backend() == "memmap") return true;
  bool any = false;
  for (const Value& v : td.values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!MemoryMappedTensor::is_memory_mapped(v.tensor())) return false;
    any = true;
  }
  return any;
}

// The TensorDict members this backend implements (NOTE [ Backend entry points ]).
const bool kMemmapHooksRegistered = internal::hooks::memmap.Register(&Memmap) &&
                                    internal::hooks::memmap_.Register(&MemmapInPlace) &&
                                    internal::hooks::memmap_like.Register(&MemmapLike) &&
                                    internal::hooks::load_memmap.Register(&LoadMemmap) &&
                                    internal::hooks::is_memmap.Register(&IsMemmap);

}  // namespace
}  // namespace td
