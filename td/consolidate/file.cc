#include "td/consolidate/file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/compat/dtypes.h"
#include "td/consolidate/internal/file.h"
#include "td/consolidate/metadata.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/core/mapped_copy.h"
#include "td/executor/executor.h"
#include "td/os/files.h"

namespace td {

using internal::BufferLayout;
using internal::IsReservedLevelKey;
using Json = nlohmann::ordered_json;
namespace os = internal::os;

namespace {

constexpr auto Bad = internal::BadConsolidatedFile;

// Numbers the temporaries "<filename>.tmp.<pid>.<n>" of internal::PendingFile.
std::atomic<int64_t> temporaries{0};

Json NewLevel(const char* cls) {
  return {{"cls", cls}, {"non_tensors", Json::object()}, {"leaves", Json::object()}};
}

// A NonTensorStack level over `batch` as upstream writes one (NOTE [ Consolidated file format ]);
// `names`: the holding level's dim names from this stack's first dim on, as upstream names them.
Json StackJson(const Json& values, at::IntArrayRef batch,
               at::ArrayRef<std::optional<std::string>> names) {
  Json level = NewLevel("NonTensorStack");
  level["cls_metadata"] = {
      {"stack_dim", 0},
      {"stack_dim_name", !names.empty() && names[0] ? Json(*names[0]) : Json(nullptr)},
      {"is_locked", false}};
  const std::vector<int64_t> rest(batch.begin() + 1, batch.end());
  for (size_t i = 0; i < values.size(); ++i) {
    if (rest.empty()) {
      level["non_tensors"][std::to_string(i)] = Json::array({values[i], rest, nullptr});
    } else {
      level[std::to_string(i)] =
          StackJson(values[i], rest, names.empty() ? names : names.slice(1));
    }
  }
  return level;
}

// The level objects of `t`, its leaves at the byte ranges of `layout`'s slots from `*slot` on
// (depth first, the layout's order). `*float8`: the first float8 leaf's key and dtype name, for
// MetadataTail to refuse after this walk's ValueErrors.
Json LevelJson(const TensorDict& t, const std::vector<std::string>& prefix,
               const BufferLayout& layout, size_t* slot,
               std::optional<std::pair<std::string, std::string>>* float8) {
  Json level = NewLevel("TensorDict");
  Json subs = Json::object();
  const std::vector<int64_t> batch = t.batch_size().vec();
  for (const auto& [key, value] : t.items()) {
    const std::string& k = key.front();
    std::vector<std::string> parts = prefix;
    parts.push_back(k);
    if (value.is_tensor()) {
      if (k.rfind("<NJT", 0) == 0) {
        TD_FAIL(ValueError, "consolidated file: the leaf ", NestedKey(parts).repr(),
                         " starts with \"<NJT\", which the format reserves for nested tensors");
      }
      TORCH_INTERNAL_ASSERT(*slot < layout.slots.size(), "MetadataTail: more leaves than slots");
      const BufferLayout::Slot& s = layout.slots[(*slot)++];
      if (const compat::NewerDtypeInfo* d = compat::FindNewerDtype(s.dtype);
          d && d->is_float8 && !*float8) {
        float8->emplace(NestedKey(parts).repr(), std::string(d->name));
      }
      level["leaves"][k] =
          Json::array({DtypeName(s.dtype), std::vector<int64_t>(s.shape.begin(), s.shape.end()),
                       s.offset, s.offset + s.nbytes, 0});
      continue;
    }
    const bool stack = !value.is_tensordict() && value.non_tensor_data().is_stack();
    // A sub-level; Python's reader takes any key for a NonTensorStack, ours refuses them too.
    if ((value.is_tensordict() || stack) && IsReservedLevelKey(k)) {
      TD_FAIL(ValueError, "consolidated file: the ", stack ? "NonTensorStack " : "sub-TensorDict ",
              NestedKey(parts).repr(), " has a name the format uses for its own fields (cls, ",
              "non_tensors, leaves, cls_metadata, size)");
    }
    if (value.is_tensordict()) {
      subs[k] = LevelJson(value.tensordict(), parts, layout, slot, float8);
    } else if (stack) {
      const DimNames names = t.names();
      subs[k] = StackJson(Json::parse(value.non_tensor().dump()), t.batch_size(), names);
    } else if (value.is_non_tensor()) {  // NonTensorData and MetaData alike, as upstream
      level["non_tensors"][k] = Json::array({Json(value.non_tensor()), batch, nullptr});
    }
  }
  // Python's _reduce_get_metadata: one name (or null) per batch dim.
  Json names = Json::array();
  for (const auto& name : t.names()) names.push_back(name ? Json(*name) : Json(nullptr));
  std::optional<at::Device> device = t.device();
  level["cls_metadata"] = {{"device", device ? Json(device->str()) : Json(nullptr)},
                           {"names", std::move(names)},
                           {"batch_size", batch},
                           {"is_locked", t.is_locked()}};
  for (auto& [k, v] : subs.items()) level[k] = std::move(v);
  return level;
}

// The TensorDict of a level that ParseFileMetadata validated: leaves are views into `storage`
// (copies when not aligned for their dtype). Recurses at most td::kMaxNestingDepth deep.
struct Builder {
  std::string file;
  c10::Storage storage;
  const uint8_t* data;
  // The leaves' slots in the mapping, depth first; `views` false once a leaf is not a view
  // into it, or is stacked by a lazy stack.
  mutable std::vector<BufferLayout::Slot> slots = {};
  mutable bool views = true;

  at::Tensor Leaf(const structure::Entry& m) const {
    const int64_t start = m.location.start;
    if (start % static_cast<int64_t>(c10::elementSize(m.dtype)) == 0) {
      slots.push_back({m.dtype, {m.shape.begin(), m.shape.end()}, start, m.nbytes});
      return internal::ViewInto(storage, m.dtype, m.shape, start);
    }
    views = false;  // not aligned for its dtype (never written by Python or by us): a copy
    at::Tensor out = at::empty(m.shape, at::TensorOptions().dtype(m.dtype));
    void* dst = out.data_ptr();
    const auto n = static_cast<size_t>(m.nbytes);
    if (n > 0 && !internal::GuardedCopy([&] { std::memcpy(dst, data + start, n); })) {
      Bad(file, "leaf '" + m.key + "': reading it raised SIGBUS: the file is shorter than when " +
                    "it was mapped (truncated by another process?)");
    }
    return out;
  }

  // `cpu`: a level above is on the CPU, and so is this one (a lazy stack set into a TensorDict
  // of another device would be made dense).
  TensorDict Level(const structure::Level& m, bool cpu = false) const {
    if (m.kind() == structure::LevelKind::kLazyStack) {
      views = false;
      std::vector<TensorDict> members;
      members.reserve(m.entries().size());
      for (const auto& e : m.entries()) members.push_back(Level(*e.level, cpu));
      TensorDict stack = lazy_stack(members, m.info.stack_dim);
      if (m.info.stack_dim_name) {
        DimNames names = stack.names();
        names[static_cast<size_t>(m.info.stack_dim)] = m.info.stack_dim_name;
        stack.set_names(names);
      }
      return stack;
    }
    std::optional<at::Device> device;
    cpu = cpu || m.info.device == "cpu";
    if (cpu) device = at::kCPU;
    TensorDict level({}, m.batch_size(), device, m.info.names);
    for (const auto& e : m.entries()) {  // non-tensors, leaves, sub-levels (ParseFileMetadata)
      if (e.kind == structure::EntryKind::kNonTensor) {
        level.set_non_tensor(e.key, e.data);
      } else if (e.kind == structure::EntryKind::kLeaf) {
        level.set(e.key, Leaf(e));
      } else if (e.level->kind() == structure::LevelKind::kNonTensorStack) {
        // NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h
        absl::StatusOr<NonTensorData> stack =
            internal::StackFromFile(e.level->info.data, m.batch_size());
        if (!stack.ok()) {
          Bad(file, absl::StrCat("NonTensorStack ", NestedKey(e.key).repr(), ": ",
                                 stack.status().message()));
        }
        level.set(e.key, *std::move(stack));
      } else {
        level.set(e.key, Level(*e.level, cpu));
      }
    }
    return level;
  }

  // Locks the levels the file says were locked, once the tree is built: a sub-level set into a
  // parent with a device may be stored as a copy moved there, which is not the one Level() made.
  static void Lock(const structure::Level& m, TensorDict t) {
    if (m.kind() == structure::LevelKind::kLazyStack) {
      const LazyStackedTensorDict stack(t);
      const std::vector<TensorDict>& members = stack.tensordicts();
      for (size_t i = 0; i < m.entries().size(); ++i) Lock(*m.entries()[i].level, members[i]);
    } else {
      for (const auto& e : m.entries()) {
        if (e.level && e.level->kind() != structure::LevelKind::kNonTensorStack) {
          Lock(*e.level, t.get_tensordict(e.key));
        }
      }
    }
    if (m.info.locked && !t.is_locked()) t.lock_();
  }
};

}  // namespace

namespace internal {

std::string MetadataTail(const TensorDict& td, const BufferLayout& layout,
                         const std::string& filename) {
  size_t slot = 0;
  std::optional<std::pair<std::string, std::string>> float8;
  Json root = LevelJson(td, {}, layout, &slot, &float8);
  TORCH_INTERNAL_ASSERT(slot == layout.slots.size(), "MetadataTail: ", slot, " leaves for ",
                        layout.slots.size(), " slots");
  if (float8) {
    // NOTE [ Dtypes by LibTorch version ] in td/compat/dtypes.h: Python tensordict 0.14's
    // consolidate(filename=) and from_consolidated look dtypes up in a table without float8.
    TD_FAIL(TypeError, "consolidated file: key ", float8->first, " has dtype ", float8->second,
            ", which Python tensordict 0.14 can neither write to nor read from a "
            "consolidated file (its dtype table has no float8); store it in a memmap directory");
  }
  try {
    std::string tail = root.dump();
    const int64_t meta_bytes = static_cast<int64_t>(tail.size());
    tail.append(reinterpret_cast<const char*>(&meta_bytes), 8);  // little-endian hosts only
    return tail;
  } catch (const nlohmann::json::exception& e) {
    TD_FAIL(ValueError, "consolidated file ", filename,
                     ": a key or non-tensor value is not valid UTF-8 (", e.what(), ")");
  }
}

PendingFile::PendingFile(std::string filename, int64_t data_bytes, const std::string& tail,
                         bool map)
    : filename_(std::move(filename)),
      file_(ValueOrThrow<MemmapError>(
          os::FileReplacement::Begin(AT_FDCWD, filename_,
                                     c10::str(filename_, ".tmp.", ::getpid(), ".", temporaries++),
                                     filename_),
          "consolidated file " + filename_)) {
  const int64_t total = data_bytes + static_cast<int64_t>(tail.size());
  if (::ftruncate(file_.fd(), total) != 0) {
    const int err = errno;
    ThrowIfError<MemmapError>(
        os::ErrnoError(err, "cannot size", c10::str(file_.temp(), " to ", total, " bytes")),
        "consolidated file " + filename_);
  }
  ThrowIfError<MemmapError>(
      os::WriteAll(file_.fd(), tail.data(), tail.size(), file_.temp(), data_bytes),
      "consolidated file " + filename_);
  if (!map) return;
  try {
    mapping_ =
        at::from_file(file_.temp(), /*shared=*/true, total, at::TensorOptions().dtype(at::kByte));
  } catch (const c10::Error& e) {
    TD_FAIL(MemmapError, "consolidated file ", filename_, ": cannot map ", file_.temp(), ": ",
                      e.what_without_backtrace());
  }
}

void PendingFile::Commit() {
  ThrowIfError<MemmapError>(file_.Commit(/*sync=*/false), "consolidated file " + filename_);
}

void WriteFile(const std::string& filename, const std::string& tail, const at::Tensor& bytes) {
  // pwrite(2), not a fresh shared mapping (which would fault in every page first), in 1 MiB pieces
  // (td/os/fd.cc) over td::parallel's threads (NOTE [ Thread policy ] in td/executor/executor.h).
  constexpr int64_t kWriteChunk = int64_t{1} << 20;
  const int64_t data_bytes = bytes.numel();
  const auto* data = static_cast<const char*>(bytes.data_ptr());
  const int64_t chunks = (data_bytes + kWriteChunk - 1) / kWriteChunk;
  PendingFile file(filename, data_bytes, tail, /*map=*/false);
  std::vector<absl::Status> written(static_cast<size_t>(chunks));
  parallel::parallel_for(chunks, data_bytes, parallel::ParallelOptions(), [&](int64_t c) {
    const int64_t b = c * kWriteChunk;
    written[c] = os::WriteAll(file.file().fd(), data + b, std::min(kWriteChunk, data_bytes - b),
                              file.file().temp(), b);
  });
  absl::Status first;
  for (const absl::Status& s : written) first.Update(s);
  ThrowIfError<MemmapError>(first, "consolidated file " + filename);
  file.Commit();
}

}  // namespace internal

TensorDict load_consolidated(const std::string& filename) {
  struct stat st;
  if (::stat(filename.c_str(), &st) != 0) {
    Bad(filename, std::string("cannot stat: ") + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) Bad(filename, "not a regular file");
  const int64_t size = static_cast<int64_t>(st.st_size);
  if (size < 8) Bad(filename, c10::str("the file has ", size, " bytes, fewer than the 8 of the "
                                       "metadata length"));
  at::Tensor mapping =
      at::from_file(filename, /*shared=*/false, size, at::TensorOptions().dtype(at::kByte));
  const auto* p = static_cast<const uint8_t*>(mapping.data_ptr());
  int64_t meta_bytes = 0;
  std::memcpy(&meta_bytes, p + size - 8, 8);
  if (meta_bytes < 0 || meta_bytes > size - 8) {
    Bad(filename, c10::str("the metadata length ", meta_bytes, " does not fit in the file's ",
                           size, " bytes"));
  }
  const int64_t data_bytes = size - 8 - meta_bytes;
  const structure::Description parsed = internal::ParseFileMetadata(
      std::string_view(reinterpret_cast<const char*>(p + data_bytes),
                       static_cast<size_t>(meta_bytes)),
      filename, data_bytes);
  const structure::Level& meta = parsed.root();
  Builder builder{filename, mapping.storage(), p};
  TensorDict out;
  try {
    out = builder.Level(meta);
    Builder::Lock(meta, out);
  } catch (const c10::Error& e) {
    // ParseFileMetadata checked what TensorDict checks; should it ever disagree, the file is named.
    Bad(filename, e.what_without_backtrace());
  }

  // Registered as consolidated (NOTE [ Consolidated buffer layout ]) only when every leaf is a
  // view into the mapping (no lazy stack) and no two overlap.
  if (!builder.views || builder.slots.empty()) return out;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const BufferLayout::Slot& s : builder.slots) {
    if (s.nbytes > 0) ranges.emplace_back(s.offset, s.offset + s.nbytes);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return out;
  }
  auto layout = std::make_shared<BufferLayout>();
  layout->slots = std::move(builder.slots);
  layout->nbytes = data_bytes;
  internal::Adopt(mapping.narrow(0, 0, data_bytes), layout);
  return out;
}

}  // namespace td
