// Loading memmap trees: every layout Python tensordict 0.4-0.14 writes (NOTE [ Memmap directory
// format ] in format.h; the table in docs/memmap.md), from a directory or an archive (NOTE
// [ Memmap byte stores ] in store.h). The tree is read and validated first (meta.json files,
// listings, file names and types, nested tensors' sizes); then every tensor file is mapped
// (RunParallel, memmap_writer.cc); then the TensorDicts that need their members complete (lazy
// stacks) are built, children before parents.
#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/format.h"
#include "td/backends/memmap/fs.h"
#include "td/backends/memmap/memmap_internal.h"
#include "td/backends/memmap/memmap_storage.h"
#include "td/backends/memmap/store.h"
#include "td/core/dtype.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {
namespace memmap {

namespace {

const std::string kMeta(kMetaFile);

// JoinPath, and after the "<archive>::" that names an archive's top (NOTE [ Memmap byte stores ]
// in store.h) no slash: "run.tdz::meta.json".
std::string Join(const std::string& dir, const std::string& name) {
  if (dir.size() >= 2 && dir.compare(dir.size() - 2, 2, "::") == 0) return dir + name;
  return JoinPath(dir, name);
}

// A DataLoss status: the message is `parts` concatenated.
template <class... Parts>
absl::Status Lost(const Parts&... parts) {
  return absl::DataLossError(absl::StrCat(parts...));
}

const char* TypeText(EntryType t) {
  return t == EntryType::kSymlink     ? "a symlink (refused)"
         : t == EntryType::kDirectory ? "a directory"
         : t == EntryType::kFile      ? "a file"
                                      : "a special file";
}

absl::Status Unexpected(const std::string& dir, const DirEntry& e) {
  return Lost(Join(dir, e.name), " is ", TypeText(e.type), " that ", Join(dir, kMeta),
              " does not describe (remove it, or restore the meta.json that lists it)");
}

// "0", "1", ... without leading zeros.
std::optional<int64_t> MemberIndex(const std::string& name) {
  if (name.empty() || name.size() > 9 || (name.size() > 1 && name[0] == '0') ||
      name.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(name);
}

// Nested tensors: LibTorch 1.13 takes the offsets as int[], later releases as a Tensor; this
// converts to whichever the linked LibTorch declares.
struct NestedOffsets {
  std::vector<int64_t> values;
  operator at::IntArrayRef() const { return values; }  // NOLINT
  operator at::Tensor() const {                         // NOLINT
    return at::tensor(values, at::TensorOptions().dtype(at::kLong));
  }
};

// What a mapped leaf still needs once the whole tree is validated.
struct MapJob {
  Store::Dir dir;
  std::string path;
  EntryMeta e;  // nested: the shape {elements} and their nbytes
  // Nested: [components, dims] int64 sizes and C-order strides, the components' offsets.
  at::Tensor nested_sizes, nested_strides;
  NestedOffsets nested_offsets;
  MemmapStorage* level;
  size_t index;
  at::Tensor result;
};

// A directory's content: TensorDict-like ones are a level of the structure (`node`, nullptr for
// non-tensor data); the value may only be complete once the files are mapped (a lazy stack is
// built from its loaded members).
struct Planned {
  const structure::Level* node = nullptr;
  std::shared_ptr<MemmapStorage> storage;  // a TensorDict level (or a tensorclass's tensors)
  std::shared_ptr<std::optional<Value>> value = std::make_shared<std::optional<Value>>();
};

absl::Status FromTorch(const std::string& path, const c10::Error& e) {
  return Lost(path, ": ", e.what_without_backtrace());
}

class Loader {
 public:
  // `lock`: every level is locked as it is loaded (before the lazy stacks over them are built,
  // which are then locked too), so nothing needs to walk the finished tree.
  Loader(const Store& store, MemmapMode mode, bool lock) : store_(store), mode_(mode), lock_(lock) {}

  // What `dir` (at `path`) holds, with every file mapped: a TensorDict, never non-tensor data.
  // It is the root of the structure (NOTE [ Structure codec ] in td/structure/structure.h), or,
  // with `parent_batch`, the sub-level of a stand-in parent. `root`: as LoadLevel's.
  absl::StatusOr<Planned> Load(const Store::Dir& dir, const std::string& path, bool root,
                               const std::vector<int64_t>* parent_batch,
                               const parallel::ParallelOptions& threads) {
    DirPlace place{&builder_, nullptr, "", nullptr};
    if (parent_batch != nullptr) {
      place = DirPlace{&builder_, &builder_.Root(structure::LevelKind::kTensorDict), "level"};
      absl::Status ok = builder_.SetBatchSize(*place.parent, *parent_batch);
      if (!ok.ok()) return ok;
    }
    absl::StatusOr<Planned> top = Dir(dir, path, root, 0, place);
    if (!top.ok()) return top.status();
    if (!top->node) {
      return Lost(path,
                  " holds non-tensor data (a NonTensorData, NonTensorStack or MetaData), not a "
                  "TensorDict: load the directory that contains it");
    }
    if (absl::Status s = Finish(threads); !s.ok()) return s;
    return top;
  }

 private:
  // The directory `dir` at `path`, as `place` in the structure (depth: of the directories,
  // for the empty levels older writers left under non-tensor data).
  absl::StatusOr<Planned> Dir(const Store::Dir& dir, const std::string& path, bool root,
                              int depth, const DirPlace& place) {
    const std::string meta_path = Join(path, kMeta);
    absl::StatusOr<std::string> text = store_.Read(dir, kMeta, kMaxMetaBytes, meta_path);
    if (!text.ok()) {
      if (absl::IsNotFound(text.status())) {
        return Lost(path, " is not a memmap directory: it has no meta.json (",
                    text.status().message(), ")");
      }
      return text.status();
    }
    absl::StatusOr<DirMeta> meta = ParseDirMeta(*text, meta_path, place);
    if (!meta.ok()) return meta.status();
    absl::StatusOr<std::vector<DirEntry>> listing = store_.List(dir, path);
    if (!listing.ok()) return listing.status();
    switch (meta->type) {
      case DirType::kTensorDict:
        return Level(dir, path, std::move(meta->level), *listing, root, depth, *meta->node);
      case DirType::kLazyStack:
        return LazyStack(dir, path, meta->stack_dim, *listing, depth, *meta->node);
      case DirType::kTensorClass:
        return TensorClass(dir, path, *meta, *listing, depth);
      case DirType::kNonTensorData:
      case DirType::kNonTensorStack: {
        absl::Status s = CheckLeftovers(dir, path, meta->type, *listing, depth);
        if (!s.ok()) return s;
        Planned out;
        // A NonTensorStack's values are checked against the level holding it (Level).
        *out.value =
            Value(NonTensorData(std::move(meta->data),
                                meta->type == DirType::kNonTensorStack ? NonTensorData::Kind::kStack
                                : meta->metadata ? NonTensorData::Kind::kMetaData
                                                 : NonTensorData::Kind::kData));
        return out;
      }
    }
    return absl::InternalError("unreachable");
  }

  // Maps every file (on the threads `threads` plans with the files as the cost), then completes
  // what waits for it.
  absl::Status Finish(const parallel::ParallelOptions& threads) {
    const int64_t files = static_cast<int64_t>(jobs_.size());
    absl::Status s = RunParallel(jobs_.size(), parallel::plan_threads(files, files, threads),
                                 [&](size_t i) -> absl::Status { return Map(jobs_[i]); });
    if (!s.ok()) return s;
    for (MapJob& job : jobs_) job.level->SetLoaded(job.index, Value(std::move(job.result)));
    if (lock_) {
      for (MemmapStorage* level : levels_) level->set_locked(true);
    }
    for (auto& f : finishers_) {
      if (absl::Status fs = f(); !fs.ok()) return fs;
    }
    return absl::OkStatus();
  }

  // The sub-directory `name` (at `path`) of the level `parent`: its entry `key`, or (`fill`) the
  // tensors of the tensorclass `parent`.
  absl::StatusOr<Planned> Child(const Store::Dir& parent_dir, const std::string& name,
                                const std::string& path, int depth, structure::Level& parent,
                                const std::string& key, bool fill = false) {
    absl::StatusOr<Store::Dir> sub = store_.Open(parent_dir, name, path);
    if (!sub.ok()) return sub.status();
    const DirPlace place{&builder_, fill ? nullptr : &parent, key, fill ? &parent : nullptr};
    return Dir(*sub, path, false, depth + 1, place);
  }

  absl::StatusOr<Planned> Level(const Store::Dir& dir, const std::string& path, LevelMeta meta,
                                const std::vector<DirEntry>& listing, bool root, int depth,
                                structure::Level& node) {
    const std::string meta_path = Join(path, kMeta);
    absl::flat_hash_map<std::string, EntryType> present;
    for (const DirEntry& e : listing) present.emplace(e.name, e.type);
    absl::Status resolved = ResolveEntryFiles(
        &meta.entries, [&](const std::string& n) { return present.contains(n); }, path);
    if (!resolved.ok()) return resolved;
    absl::flat_hash_set<std::string> described = {kMeta};
    const auto claim = [&](const std::string& name, const EntryMeta& e,
                           EntryType want) -> absl::Status {
      if (!described.insert(name).second) {
        return Lost(meta_path, ": two entries use the file name '", name, "' (the second is ",
                    NestedKey(e.key).repr(), ")");
      }
      auto it = present.find(name);
      if (it == present.end()) {
        return Lost(Join(path, name), " is missing: ", meta_path, " describes key ",
                    NestedKey(e.key).repr(), " as a nested tensor, whose sizes it holds");
      }
      if (it->second != want) {
        return Lost(Join(path, name), " is ", TypeText(it->second), ", but ", meta_path,
                    " describes key ", NestedKey(e.key).repr(), " as a ",
                    want == EntryType::kFile ? "tensor file" : "directory");
      }
      return absl::OkStatus();
    };
    for (const EntryMeta& e : meta.entries) {
      if (e.file_name.empty()) continue;  // a zero-element tensor without a file
      const EntryType want = e.kind == EntryKind::kTensor ? EntryType::kFile : EntryType::kDirectory;
      if (absl::Status s = claim(e.file_name, e, want); !s.ok()) return s;
      if (!e.is_nested) continue;
      if (absl::Status s = claim(NestedShapeFileName(e.file_name), e, EntryType::kFile); !s.ok()) {
        return s;
      }
    }
    for (const DirEntry& e : listing) {
      if (!described.contains(e.name) && !IsTempName(e.name)) return Unexpected(path, e);
    }
    Planned out;
    out.node = &node;
    out.storage = std::make_shared<MemmapStorage>(path, meta.batch_size, mode_, root);
    MemmapStorage* level = out.storage.get();
    levels_.push_back(level);
    for (EntryMeta& e : meta.entries) {
      const std::string entry_path = Join(path, e.file_name);
      if (e.file_name != EntryFileName(e.key, e.kind)) {
        level->SetFileName(e.key, e.file_name);  // a raw pre-0.13 name, or no file
      }
      if (e.kind == EntryKind::kTensor) {
        if (e.file_name.empty()) {
          level->AddLoaded(e.key, Value(at::empty(e.shape, at::TensorOptions().dtype(e.dtype))));
          continue;
        }
        const size_t index = level->AddLoaded(e.key, Value(at::Tensor()));
        MapJob job{dir, entry_path, std::move(e), {}, {}, {}, level, index, at::Tensor()};
        if (job.e.is_nested) {
          if (absl::Status s = ReadNestedSizes(path, meta.batch_size, &job); !s.ok()) return s;
        }
        jobs_.push_back(std::move(job));
        continue;
      }
      // Its batch size starts with this level's (structure::Builder::SetBatchSize).
      absl::StatusOr<Planned> child = Child(dir, e.file_name, entry_path, depth, node, e.key);
      if (!child.ok()) return child.status();
      std::optional<Value>& value = *child->value;
      if (value && value->is_non_tensor() && value->non_tensor_data().is_stack()) {
        absl::StatusOr<NonTensorData> stack =
            internal::StackFromFile(value->non_tensor_data().data, meta.batch_size);
        if (!stack.ok()) {
          return Lost(Join(entry_path, kMeta), ": ", stack.status().message());
        }
        *value = Value(*std::move(stack));
      }
      // A lazy stack is built once its members are loaded (Finish).
      const size_t index = level->AddLoaded(e.key, value.value_or(Value(at::Tensor())));
      if (!value) {
        finishers_.push_back([level, index, slot = child->value]() {
          level->SetLoaded(index, **slot);
          return absl::OkStatus();
        });
      }
    }
    *out.value = Value(TensorDict(out.storage));
    return out;
  }

  // Reads a nested tensor's sizes file, checks them against the batch size and lays the
  // components' elements one after the other, each in C order.
  absl::Status ReadNestedSizes(const std::string& path, const std::vector<int64_t>& batch,
                               MapJob* job) {
    EntryMeta& e = job->e;
    const std::string name = NestedShapeFileName(e.file_name);
    const std::string shape_path = Join(path, name);
    const std::string what = absl::StrCat("the nested tensor ", NestedKey(e.key).repr());
    absl::StatusOr<std::string> bytes =
        store_.Read(job->dir, name, static_cast<size_t>(e.nbytes), shape_path);
    if (!bytes.ok()) return bytes.status();
    if (static_cast<int64_t>(bytes->size()) != e.nbytes) {
      return Lost(shape_path, " has ", bytes->size(), " bytes; ", what, " of ", e.shape[0],
                  " components of ", e.shape[1], " dims needs ", e.nbytes);
    }
    at::Tensor sizes = at::empty(e.shape, at::TensorOptions().dtype(at::kLong));
    if (e.nbytes > 0) std::memcpy(sizes.data_ptr<int64_t>(), bytes->data(), bytes->size());
    at::Tensor strides = at::empty_like(sizes);
    const int64_t* s = sizes.data_ptr<int64_t>();
    int64_t* st = strides.data_ptr<int64_t>();
    const int64_t n = e.shape[0], dims = e.shape[1];
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t numel = 1;
      bool overflow = false;
      for (int64_t d = 0; d < dims; ++d) {
        const int64_t v = s[i * dims + d];
        if (v < 0) {
          return Lost(shape_path, ": component ", i, " of ", what, " has a negative size ", v);
        }
        if (d + 1 < static_cast<int64_t>(batch.size()) && v != batch[d + 1]) {
          return Lost(shape_path, ": component ", i, " of ", what, " has size ", v, " at dim ",
                      d + 1, ", but the batch size is ", SizeRepr(batch));
        }
        overflow = overflow || __builtin_mul_overflow(numel, v, &numel);
      }
      if (overflow || __builtin_add_overflow(total, numel, &total)) {
        return Lost(shape_path, ": the sizes of ", what, " overflow int64");
      }
      job->nested_offsets.values.push_back(total - numel);
      int64_t stride = 1;
      for (int64_t d = dims - 1; d >= 0; --d) {
        st[i * dims + d] = stride;
        stride *= s[i * dims + d];
      }
    }
    absl::StatusOr<int64_t> data_bytes = TensorBytes({total}, e.dtype, what);
    if (!data_bytes.ok()) return absl::DataLossError(data_bytes.status().message());
    e.shape = {total};
    e.nbytes = *data_bytes;
    job->nested_sizes = std::move(sizes);
    job->nested_strides = std::move(strides);
    return absl::OkStatus();
  }

  absl::Status Map(MapJob& job) {
    const std::string key = NestedKey(job.e.key).repr();
    absl::StatusOr<at::Tensor> t = store_.Map(job.dir, job.e.file_name, job.path, key, job.e.dtype,
                                              job.e.shape, job.e.nbytes, mode_);
    if (!t.ok()) return t.status();
    if (!job.nested_sizes.defined()) {
      job.result = *std::move(t);
      return absl::OkStatus();
    }
    if (t->storage().nbytes() != t->nbytes()) {
      // A nested tensor's buffer must be its whole storage: one in an archive, a view into the
      // archive's mapping, is copied, and writes to the copy could not reach the file.
      if (mode_ == MemmapMode::kReadWrite) {
        return Lost(job.path, ": the nested tensor ", key,
                    " is copied out of the archive's mapping, so writes could not reach the file: "
                    "load it read-only");
      }
      *t = t->clone();
    }
    try {
      job.result = at::_nested_view_from_buffer(*t, job.nested_sizes, job.nested_strides,
                                                job.nested_offsets);
    } catch (const c10::Error& e) {
      return Lost(job.path,
                  ": LibTorch cannot represent this nested tensor: ", e.what_without_backtrace());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Planned> LazyStack(const Store::Dir& dir, const std::string& path,
                                    int64_t stack_dim, const std::vector<DirEntry>& listing,
                                    int depth, structure::Level& node) {
    int64_t members = 0;
    absl::flat_hash_set<int64_t> seen;
    for (const DirEntry& e : listing) {
      if (e.name == kMeta || IsTempName(e.name)) continue;
      std::optional<int64_t> i = MemberIndex(e.name);
      if (!i || e.type != EntryType::kDirectory) return Unexpected(path, e);
      seen.insert(*i);
      members = std::max(members, *i + 1);
    }
    if (members == 0) {
      return Lost(path, ": a lazy stack without members (expected sub-directories 0, 1, ...)");
    }
    for (int64_t i = 0; i < members; ++i) {
      if (!seen.contains(i)) {
        return Lost(path, ": lazy stack member ", i, " is missing (",
                    Join(path, std::to_string(i)), ") but member ", members - 1, " exists");
      }
    }
    std::vector<Planned> parts;
    for (int64_t i = 0; i < members; ++i) {
      const std::string name = std::to_string(i);
      absl::StatusOr<Planned> part = Child(dir, name, Join(path, name), depth, node, name);
      if (!part.ok()) return part.status();
      if (!part->node) {
        return Lost(Join(path, name),
                    " holds non-tensor data; a lazy stack's members must be TensorDicts");
      }
      const std::vector<int64_t>& batch = part->node->batch_size();
      if (!parts.empty() && batch != parts.front().node->batch_size()) {
        return Lost(path, ": lazy stack members have different batch sizes: ", SizeRepr(batch),
                    " in ", Join(path, name), " and ", SizeRepr(parts.front().node->batch_size()),
                    " in ", Join(path, "0"));
      }
      parts.push_back(*std::move(part));
    }
    std::vector<int64_t> batch = parts.front().node->batch_size();
    if (stack_dim > static_cast<int64_t>(batch.size())) {
      return Lost(Join(path, kMeta), ": stack_dim ", stack_dim,
                  " is out of range for members of batch size ", SizeRepr(batch));
    }
    batch.insert(batch.begin() + stack_dim, members);
    Planned out;
    out.node = &node;
    if (absl::Status ok = SetBatchSize(builder_, node, batch, Join(path, kMeta)); !ok.ok()) {
      return ok;
    }
    std::shared_ptr<std::optional<Value>> slot = out.value;
    finishers_.push_back([parts = std::move(parts), slot, stack_dim, path]() -> absl::Status {
      std::vector<TensorDict> tds;
      tds.reserve(parts.size());
      for (const Planned& p : parts) tds.push_back((*p.value)->tensordict());
      try {
        *slot = Value(TensorDict(lazy_stack(tds, stack_dim)));
      } catch (const c10::Error& e) {
        return FromTorch(path, e);
      }
      return absl::OkStatus();
    });
    return out;
  }

  absl::StatusOr<Planned> TensorClass(const Store::Dir& dir, const std::string& path,
                                      const DirMeta& meta,
                                      const std::vector<DirEntry>& listing, int depth) {
    const std::string inner(kNonTensorInner);
    bool has_inner = false;
    for (const DirEntry& e : listing) {
      if (e.name == kMeta || IsTempName(e.name)) continue;
      if (e.name == inner && e.type == EntryType::kDirectory) {
        has_inner = true;
        continue;
      }
      if (e.name == "other.pickle") {
        return Lost(
            Join(path, e.name), ": fields of the tensorclass ", meta.type_name,
            " were pickled, and pickled data is never loaded (loading does not execute code)");
      }
      return Unexpected(path, e);
    }
    if (!has_inner) {
      return Lost(path, " holds the tensorclass ", meta.type_name,
                  " but has no _tensordict/ directory with its tensors");
    }
    absl::StatusOr<Planned> tensors =
        Child(dir, inner, Join(path, inner), depth, *meta.node, inner, /*fill=*/true);
    if (!tensors.ok()) return tensors.status();
    // Place() (format.cc) refused non-tensor data as _tensordict/, so `tensors` has a storage.
    for (const auto& [key, value] : meta.fields) {
      if (tensors->storage->contains(key)) {
        return Lost(Join(path, kMeta), ": field ", NestedKey(key).repr(), " is also a key of ",
                    Join(path, inner), " (the tensorclass is stored twice)");
      }
      tensors->storage->AddField(key, Value(NonTensorData(value)), Join(path, kMeta));
    }
    return tensors;
  }

  // What older writers left beside a non-tensor directory's meta.json (`type` kNonTensorData or
  // kNonTensorStack; `listing`: the directory's entries), or under it (kTensorDict): before 0.5,
  // an empty level per NonTensorData (_tensordict/) or stack member (0, 1, ...), holding only its
  // meta.json and sub-directories "0", "1", ... of the same.
  absl::Status CheckLeftovers(const Store::Dir& dir, const std::string& path, DirType type,
                              const std::vector<DirEntry>& listing, int depth) {
    const bool level = type == DirType::kTensorDict;
    for (const DirEntry& e : listing) {
      const bool file = e.type == EntryType::kFile;
      if (IsTempName(e.name) || (e.name == kMeta && !level)) continue;
      if (e.name == kMeta && file) {
        const std::string meta_path = Join(path, kMeta);
        absl::StatusOr<std::string> text = store_.Read(dir, kMeta, kMaxMetaBytes, meta_path);
        if (!text.ok()) return text.status();
        absl::StatusOr<LevelMeta> meta = ParseLevelMeta(*text, meta_path);
        if (!meta.ok()) return meta.status();
        if (!meta->entries.empty()) {
          return Lost(meta_path, ": the batch shape of non-tensor ", "data lists ",
                      meta->entries.size(), " entries; expected none");
        }
        continue;
      }
      // The data is in meta.json: a pickle beside it can only hold Python's bookkeeping fields
      // (each field goes to one or the other), so it is never needed and never read.
      if (!level && file &&
          (e.name == "other.pickle" ||
           (type == DirType::kNonTensorStack && e.name == "pickle.pkl"))) {
        continue;
      }
      const bool inner = type == DirType::kNonTensorData ? e.name == kNonTensorInner
                                                         : MemberIndex(e.name).has_value();
      if (!inner || e.type != EntryType::kDirectory) return Unexpected(path, e);
      const std::string sub_path = Join(path, e.name);
      if (depth + 1 > kMaxNestingDepth) {
        return Lost(sub_path, ": directories nested more than ", kMaxNestingDepth, " levels deep");
      }
      absl::StatusOr<Store::Dir> sub = store_.Open(dir, e.name, sub_path);
      if (!sub.ok()) return sub.status();
      absl::StatusOr<std::vector<DirEntry>> sub_listing = store_.List(*sub, sub_path);
      if (!sub_listing.ok()) return sub_listing.status();
      absl::Status s =
          CheckLeftovers(*sub, sub_path, DirType::kTensorDict, *sub_listing, depth + 1);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const Store& store_;
  MemmapMode mode_;
  bool lock_;
  structure::Builder builder_;
  std::vector<MemmapStorage*> levels_;
  std::vector<MapJob> jobs_;
  std::vector<std::function<absl::Status()>> finishers_;
};

// A directory on disk (NOTE [ Memmap byte stores ] in store.h).
class DiskStore final : public Store {
 public:
  absl::StatusOr<std::vector<DirEntry>> List(const Dir& dir,
                                             const std::string& path) const override {
    return ListDir(dir.fd->get(), path);
  }
  absl::StatusOr<Dir> Open(const Dir& dir, const std::string& name,
                           const std::string& path) const override {
    absl::StatusOr<UniqueFd> sub = OpenDirShared(dir.fd->get(), name, path);
    if (!sub.ok()) return sub.status();
    return Dir{std::make_shared<UniqueFd>(*std::move(sub)), ""};
  }
  absl::StatusOr<std::string> Read(const Dir& dir, const std::string& name, size_t max_bytes,
                                   const std::string& path) const override {
    return ReadFileAt(dir.fd->get(), name, max_bytes, path);
  }
  absl::StatusOr<at::Tensor> Map(const Dir& dir, const std::string& name, const std::string& path,
                                 const std::string& /*key*/, c10::ScalarType dtype,
                                 const std::vector<int64_t>& shape, int64_t /*nbytes*/,
                                 MemmapMode mode) const override {
    absl::StatusOr<UniqueFd> fd =
        OpenFileAt(dir.fd->get(), name, mode == MemmapMode::kReadWrite, path);
    if (!fd.ok()) return fd.status();
    return MapFile(fd->get(), path, dtype, shape, mode);
  }
  bool memmap_levels() const override { return true; }
};

// A new Store::Dir of the open directory `dirfd`.
absl::StatusOr<Store::Dir> DupDir(int dirfd, const std::string& path) {
  int own = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return ErrnoError(errno, "cannot duplicate the descriptor of", path);
  return Store::Dir{std::make_shared<UniqueFd>(own), ""};
}

// `t` with each memmap level made a dense level of the same values (a store whose levels are
// not memmap levels: Store::memmap_levels()).
TensorDict Dense(const TensorDict& t) {
  if (std::optional<LazyStackedTensorDict> stack = LazyStackedTensorDict::from(t)) {
    std::vector<TensorDict> members;
    for (const TensorDict& m : stack->tensordicts()) members.push_back(Dense(m));
    return TensorDict(lazy_stack(members, stack->stack_dim()));
  }
  std::vector<TensorDict::Item> items;
  for (const auto& [key, value] : t.items()) {
    items.emplace_back(key, value.is_tensordict() ? Value(Dense(value.tensordict())) : value);
  }
  return TensorDict(items, t.batch_size());
}

}  // namespace

absl::StatusOr<TensorDict> LoadTree(const Store& store, Store::Dir top, const std::string& path,
                                    MemmapMode mode, const parallel::ParallelOptions& threads) {
  Loader loader(store, mode, /*lock=*/store.memmap_levels());
  absl::StatusOr<Planned> planned = loader.Load(top, path, true, nullptr, threads);
  if (!planned.ok()) return planned.status();
  if (store.memmap_levels()) return (*planned->value)->tensordict();
  try {
    TensorDict out = Dense((*planned->value)->tensordict());
    out.lock_();
    return out;
  } catch (const c10::Error& e) {
    return FromTorch(path, e);
  }
}

absl::StatusOr<TensorDict> LoadDir(int dirfd, const std::string& path, MemmapMode mode,
                                   const parallel::ParallelOptions& threads) {
  absl::StatusOr<Store::Dir> top = DupDir(dirfd, path);
  if (!top.ok()) return top.status();
  return LoadTree(DiskStore(), *std::move(top), path, mode, threads);
}

absl::StatusOr<std::shared_ptr<MemmapStorage>> LoadLevel(int dirfd, const std::string& path,
                                                         MemmapMode mode, bool root,
                                                         const std::vector<int64_t>* parent_batch,
                                                         const parallel::ParallelOptions& threads) {
  absl::StatusOr<Store::Dir> dir = DupDir(dirfd, path);
  if (!dir.ok()) return dir.status();
  const DiskStore store;
  Loader loader(store, mode, /*lock=*/false);
  absl::StatusOr<Planned> top = loader.Load(*dir, path, root, parent_batch, threads);
  if (!top.ok()) return top.status();
  if (!top->storage) {
    return Lost(path, " does not hold a TensorDict level");
  }
  return top->storage;
}

absl::StatusOr<UniqueFd> OpenSubTensorDict(int dirfd, const std::string& key,
                                           const std::string& dir_path, std::string* sub_path) {
  const auto has_meta = [&](const std::string& name) {
    absl::StatusOr<UniqueFd> fd = OpenDirAt(dirfd, name, name);
    struct stat st;
    return fd.ok() && ::fstatat(fd->get(), kMeta.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  };
  std::string name = EscapeKey(key);
  const std::optional<std::string> legacy = LegacyFileName(key, EntryKind::kTensorDict);
  if (!has_meta(name) && legacy && has_meta(*legacy)) name = *legacy;
  *sub_path = JoinPath(dir_path, name);
  return OpenDirShared(dirfd, name, *sub_path);
}

}  // namespace memmap
}  // namespace internal
}  // namespace td
