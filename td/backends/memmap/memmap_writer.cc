// Writing memmap directories, and the TensorDict members memmap / memmap_ / memmap_like /
// load_memmap / is_memmap. See NOTE [ Crash-safe memmap writes ] (memmap_internal.h).
#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/archive_hook.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/errors.h"
#include "td/core/internal/storage_access.h"
#include "td/core/storage.h"
#include "td/executor/executor.h"

namespace td {
namespace internal {
namespace memmap {
namespace {

struct LeafJob {
  std::shared_ptr<UniqueFd> dir;
  std::string name;
  std::string path;
  at::Tensor tensor;
  NestedKey key;
};

// What a tree being written leaves to do once its directories are made: the leaves to write, and
// (with WriteOptions::sync) the directories to fsync.
struct Pending {
  const WriteOptions& o;
  std::vector<LeafJob> jobs;
  std::vector<std::shared_ptr<UniqueFd>> dirs;
};

// Writes `v` as the new directory `name` inside `parent_fd` (`path`; `key`: its key in the tree,
// nullptr at the top): a TensorDict level, whose tensors become jobs; a lazy stack, member i in
// the sub-directory "i" (NOTE [ Memmap directory format ]); or non-tensor data of a level of batch
// size `batch`, as Python tensordict 0.5-0.14 writes it: a NonTensorStack is its meta.json alone,
// NonTensorData and MetaData also hold `_tensordict/` with the batch size.
void BuildDir(const Value& v, const std::vector<int64_t>& batch, int parent_fd,
              const std::string& name, const std::string& path, const NestedKey* key,
              Pending* w) {
  ThrowIfError<MemmapError>(os::MakeDirAt(parent_fd, name, path));
  auto dir =
      std::make_shared<UniqueFd>(ValueOrThrow<MemmapError>(OpenDirAt(parent_fd, name, path)));
  if (w->o.sync) w->dirs.push_back(dir);
  std::string meta_json;
  const auto stack = v.is_tensordict() ? LazyStackedTensorDict::from(v.tensordict()) : std::nullopt;
  if (stack) {
    const std::vector<TensorDict>& members = stack->tensordicts();
    for (size_t i = 0; i < members.size(); ++i) {
      const std::string member = std::to_string(i);
      BuildDir(members[i], {}, dir->get(), member, JoinPath(path, member), key, w);
    }
    meta_json = StackMetaJson(stack->stack_dim());
  } else if (v.is_tensordict()) {
    const Storage& s = v.tensordict().storage();
    LevelMeta meta;
    meta.batch_size = v.tensordict().batch_size().vec();
    for (const std::string& k : s.keys()) {
      std::optional<Value> e = s.get(k);
      if (!e) continue;
      const NestedKey full = key ? *key + NestedKey(k) : NestedKey(k);
      meta.entries.push_back(EntryMetaOf(k, *e));
      const std::string entry = EntryFileName(k, meta.entries.back().kind);
      if (e->is_tensor()) {
        w->jobs.push_back(LeafJob{dir, entry, JoinPath(path, entry), e->tensor(), full});
      } else {
        BuildDir(*e, meta.batch_size, dir->get(), entry, JoinPath(path, entry), &full, w);
      }
    }
    meta_json = LevelMetaJson(meta);
  } else if (const NonTensorData& data = v.non_tensor_data(); data.is_stack()) {
    // stack_dim 0: values nest in batch order, whichever dim the stack was built along.
    meta_json = StackMetaJson(0, &data.data);
  } else {
    meta_json = NonTensorMetaJson(data.data, data.kind == NonTensorData::Kind::kMetaData);
    BuildDir(TensorDict({}, batch), {}, dir->get(), std::string(kNonTensorInner),
             JoinPath(path, kNonTensorInner), key, w);
  }
  ThrowIfError<MemmapError>(os::CreateFileAt(dir->get(), std::string(kMetaFile), meta_json,
                                             w->o.sync, JoinPath(path, kMetaFile)));
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
  parallel::check_num_threads(options.num_threads(), "MemmapOptions::num_threads");
  const WriteOptions wo{like, reserve, options.copy_existing(), options.fsync(),
                        options.parallel_options()};
  ValidateTree(td, t.path, wo);
  ThrowIfError<MemmapError>(os::MakeDirs(t.parent));
  const UniqueFd parent =
      ValueOrThrow<MemmapError>(OpenDirAt(AT_FDCWD, t.parent, t.parent, /*follow_symlink=*/true));
  CheckTarget(parent.get(), t, options.exists_ok());
  RemoveStaleTemps(parent.get(), t.parent, t.base);
  const std::string tmp = TempName(t.base);
  // Our own version stays locked (shared) until it is loaded: a concurrent memmap() to the same
  // prefix that swaps it out right after our commit waits for the load before removing it
  // (NOTE [ Readers and removers of memmap directories ] in fs.h).
  UniqueFd dir;
  try {
    WriteEntryDir(td, {}, parent.get(), tmp, t.path, wo);
    dir = ValueOrThrow<MemmapError>(OpenDirShared(parent.get(), tmp, JoinPath(t.parent, tmp)));
    ThrowIfError<MemmapError>(CommitDir(parent.get(), tmp, t.base, t.path, wo.sync));
  } catch (...) {
    dir = UniqueFd();
    os::RemoveAt(parent.get(), tmp, JoinPath(t.parent, tmp)).IgnoreError();
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
  Pending w{options, {}, {}};
  BuildDir(value, parent_batch, parent_fd, name, path, nullptr, &w);
  int64_t bytes = 0;
  if (!options.like) {
    for (const LeafJob& job : w.jobs) bytes += job.tensor.numel() * job.tensor.element_size();
  }
  const int threads = WriteThreads(options.threads, bytes, w.jobs.size());
  ThrowIfError<MemmapError>(RunParallel(w.jobs.size(), threads,
                                        [&](size_t i) { return WriteLeaf(w.jobs[i], options); }));
  for (const auto& d : w.dirs) ThrowIfError<MemmapError>(os::SyncDir(d->get(), path));
}

absl::Status CommitDir(int parent_fd, const std::string& tmp, const std::string& name,
                       const std::string& path, bool sync) {
  // Where renameat2 has no flags, the previous tree is moved aside under a temporary name.
  absl::StatusOr<std::optional<std::string>> previous =
      internal::os::ReplaceDirAt(parent_fd, tmp, name, TempName(name), path);
  if (!previous.ok()) return previous.status();
  if (*previous) RemoveTree(parent_fd, **previous, path + " (previous content)").IgnoreError();
  if (sync) return os::SyncDir(parent_fd, path + "/..");
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
  UniqueFd dir = ValueOrThrow<MemmapError>(OpenDirShared(AT_FDCWD, path, path, true),
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
