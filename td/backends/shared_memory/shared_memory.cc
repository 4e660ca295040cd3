#include "td/backends/shared_memory/shared_memory.h"

#include <ATen/ATen.h>
#include <c10/util/strides.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "td/os/fd.h"
#include "td/backends/shared_memory/handle.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/core/internal/storage_access.h"

namespace td {
namespace {

namespace os = internal::os;

// ---- segments ------------------------------------------------------------------------------

constexpr char kMagic[8] = {'T', 'D', 'S', 'H', 'M', 0, 0, 1};
using internal::shm::kHeaderBytes;  // magic (8) | token (16) | payload (8) | pad
constexpr size_t kAlign = 64;
constexpr std::string_view kMemfdName = "td-shm";

// One memfd segment, mapped; the descriptor and the mapping are released with the last tensor.
struct Segment {
  os::UniqueFd fd;
  os::MappedRegion region;  // header + payload
  std::string token;        // 16 random bytes, also in the header
  void* addr() const { return region.addr(); }
};

// Maps the whole segment `fd` of `length` bytes read-write; c10::Error naming `what` otherwise
// (a segment's failures are c10::Error: NOTE [ Status to exception ] in td/core/errors.h).
os::MappedRegion MapSegment(int fd, size_t length, const std::string& what) {
  return ValueOrThrow<c10::Error>(
      os::MappedRegion::Map(fd, length, PROT_READ | PROT_WRITE, MAP_SHARED, what));
}

// The DataPtr context of every shared tensor, a new std::shared_ptr<Segment>, keeps it mapped.
void DeleteSegmentRef(void* ctx) { delete static_cast<std::shared_ptr<Segment>*>(ctx); }

// The segment of `t`, or nullptr.
const Segment* SegmentOf(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  const c10::DataPtr& dp = t.storage().data_ptr();
  if (dp.get_deleter() != &DeleteSegmentRef) return nullptr;
  return static_cast<const std::shared_ptr<Segment>*>(dp.get_context())->get();
}

std::shared_ptr<Segment> CreateSegment(size_t payload) {
  auto seg = std::make_shared<Segment>();
  seg->fd = os::UniqueFd(::memfd_create(std::string(kMemfdName).c_str(), MFD_CLOEXEC));
  const size_t length = kHeaderBytes + payload;
  if (!seg->fd.valid() || ::ftruncate(seg->fd.get(), static_cast<off_t>(length)) != 0) {
    const int err = errno;
    ThrowIfError<c10::Error>(os::ErrnoError(
        err, absl::StrCat("share_memory: cannot create a segment of ", length, " bytes"), ""));
  }
  seg->region = MapSegment(seg->fd.get(), length,
                           absl::StrCat("a new shared-memory segment of ", length, " bytes"));
  std::random_device rd;
  const uint32_t random[4] = {rd(), rd(), rd(), rd()};
  seg->token.assign(reinterpret_cast<const char*>(random), sizeof(random));
  char* h = static_cast<char*>(seg->addr());
  std::memcpy(h, kMagic, sizeof(kMagic));
  std::memcpy(h + 8, seg->token.data(), seg->token.size());
  const uint64_t n = payload;
  std::memcpy(h + 24, &n, sizeof(n));
  return seg;
}

// A tensor of `sizes`/`strides` at byte `offset` of the segment's mapping (header included).
at::Tensor ViewOf(const std::shared_ptr<Segment>& seg, size_t offset, c10::ScalarType dtype,
                  at::IntArrayRef sizes, at::IntArrayRef strides) {
  return at::for_blob(static_cast<char*>(seg->addr()) + offset, sizes)
      .strides(strides)
      .context(new std::shared_ptr<Segment>(seg), &DeleteSegmentRef)
      .target_device(at::Device(at::kCPU))
      .options(at::TensorOptions().dtype(dtype).device(at::kCPU))
      .make_tensor();
}

// A contiguous copy of `t` at byte `offset` of the segment's mapping.
at::Tensor CopyInto(const std::shared_ptr<Segment>& seg, size_t offset, const at::Tensor& t) {
  at::Tensor v =
      ViewOf(seg, offset, t.scalar_type(), t.sizes(), c10::contiguous_strides(t.sizes()));
  v.copy_(t);
  return v;
}

// The bytes of `t`'s slot in a segment (kAlign-aligned).
size_t SlotBytes(const at::Tensor& t) {
  const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
  return (n + kAlign - 1) / kAlign * kAlign;
}

// ValueError naming `what` (whose tensor `t` is) unless `t` is strided.
void CheckShareable(const at::Tensor& t, const char* what, const NestedKey* key = nullptr) {
  if (t.layout() != at::kStrided) {
    TD_FAIL(ValueError, what, key ? " " + key->repr() : "", " holds a ", t.layout(),
            " tensor; only strided (dense) tensors can be shared");
  }
}

// ---- share_memory_ -------------------------------------------------------------------------

struct Leaf {
  std::shared_ptr<Storage> level;  // an owner: a computed level (a lazy stack's) has no other
  std::string key;
  at::Tensor tensor;
  size_t offset;  // in the payload
};

// The levels of `td`, and its leaves not yet in shared memory with their offsets in a payload of
// `total` bytes.
struct Collected {
  std::vector<std::shared_ptr<Storage>> levels;
  std::vector<Leaf> leaves;
  size_t total = 0;

  void Walk(const TensorDict& td, const NestedKey* prefix) {
    std::shared_ptr<Storage> s = internal::MutableStoragePtr(td);
    levels.push_back(s);
    for (const std::string& k : s->keys()) {
      std::optional<Value> v = s->get(k);
      if (!v) continue;
      const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
      if (v->is_tensor() && !IsSharedMemoryTensor(v->tensor())) {
        CheckShareable(v->tensor(), "share_memory_: key", &full);
        leaves.push_back({s, k, v->tensor(), total});
        total += SlotBytes(v->tensor());
      } else if (v->is_tensordict()) {
        Walk(v->tensordict(), &full);
      }
    }
  }
};

// ---- handles -------------------------------------------------------------------------------

using Json = nlohmann::json;

struct HandleWriter {
  Json segments = Json::array();
  absl::flat_hash_map<const Segment*, size_t> index;

  Json Level(const TensorDict& td, const NestedKey* prefix) {
    Json entries = Json::array();
    const Storage& s = td.storage();
    for (const std::string& k : s.keys()) {
      std::optional<Value> v = s.get(k);
      if (!v) continue;
      const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
      if (v->is_tensor()) {
        const at::Tensor& t = v->tensor();
        const Segment* seg = SegmentOf(t);
        if (seg == nullptr) {
          TD_FAIL(ValueError, "SharedMemoryHandle: key ", full.repr(),
                           " is not in shared memory (call share_memory_() first)");
        }
        auto [index_of, fresh] = index.emplace(seg, segments.size());
        if (fresh) {
          segments.push_back(Json{{"pid", static_cast<int64_t>(::getpid())},
                                  {"fd", seg->fd.get()},
                                  {"size", static_cast<uint64_t>(seg->region.length())},
                                  {"token", absl::BytesToHexString(seg->token)}});
        }
        // An empty tensor's data pointer is null: the first data byte, where nothing is read.
        const size_t offset =
            t.numel() == 0 ? kHeaderBytes
                           : static_cast<size_t>(static_cast<const char*>(t.data_ptr()) -
                                                 static_cast<const char*>(seg->addr()));
        entries.push_back(Json{{"key", k},
                               {"kind", "tensor"},
                               {"segment", index_of->second},
                               {"offset", static_cast<uint64_t>(offset)},
                               {"dtype", DtypeName(t.scalar_type())},
                               {"shape", t.sizes().vec()},
                               {"strides", t.strides().vec()}});
      } else if (v->is_tensordict()) {
        entries.push_back(Json{{"key", k}, {"kind", "tensordict"},
                               {"value", Level(v->tensordict(), &full)}});
      } else {
        Json e{{"key", k}, {"kind", "non_tensor"}, {"data", v->non_tensor()}};
        if (v->kind() != "NonTensorData") e["cls"] = std::string(v->kind());
        entries.push_back(std::move(e));
      }
    }
    return Json{{"batch_size", td.batch_size().vec()}, {"entries", std::move(entries)}};
  }
};

std::shared_ptr<Segment> OpenSegment(const internal::shm::SegmentRef& ref) {
  const std::string where = absl::StrCat("/proc/", ref.pid, "/fd/", ref.fd);
  std::error_code err;
  const std::string link = std::filesystem::read_symlink(where, err);
  if (err) {
    ThrowIfError<c10::Error>(os::ErrnoError(
        err.value(), "AttachSharedMemory: cannot reach segment",
        absl::StrCat(where, " (is process ", ref.pid, " still running and holding it?)")));
  }
  if (link.rfind(absl::StrCat("/memfd:", std::string(kMemfdName), " "), 0) != 0) {
    TD_FAIL(c10::Error, "AttachSharedMemory: ", where, " is ", link, ", not a tensordict segment");
  }
  auto seg = std::make_shared<Segment>();
  seg->fd = os::UniqueFd(::open(where.c_str(), O_RDWR | O_CLOEXEC));
  struct stat st;
  if (!seg->fd.valid() || ::fstat(seg->fd.get(), &st) != 0) {
    ThrowIfError<c10::Error>(os::ErrnoError(errno, "AttachSharedMemory: cannot open", where));
  }
  if (static_cast<uint64_t>(st.st_size) != ref.size) {
    TD_FAIL(c10::Error, "AttachSharedMemory: segment ", where, " has ", st.st_size,
                     " bytes, the handle says ", ref.size);
  }
  seg->region = MapSegment(seg->fd.get(), static_cast<size_t>(ref.size),
                           absl::StrCat("AttachSharedMemory: segment ", where));
  const char* h = static_cast<const char*>(seg->addr());
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0 ||
      std::memcmp(h + 8, ref.token.data(), 16) != 0) {
    TD_FAIL(c10::Error, "AttachSharedMemory: segment ", where,
                     " does not carry the handle's token (a different segment now uses that "
                     "descriptor)");
  }
  seg->token = ref.token;
  return seg;
}

// The level `level` of a handle ParseHandle accepted (every bound already checked).
TensorDict AttachLevel(const structure::Level& level,
                       const std::vector<std::shared_ptr<Segment>>& segments) {
  auto storage = std::make_shared<SharedMemoryStorage>(level.batch_size());
  for (const structure::Entry& e : level.entries()) {
    const structure::Location& at = e.location;
    if (e.kind == structure::EntryKind::kLeaf) {
      storage->set_unchecked(e.key, ViewOf(segments[static_cast<size_t>(at.index)],
                                           static_cast<size_t>(at.start), e.dtype, e.shape,
                                           at.strides));
    } else if (e.kind == structure::EntryKind::kLevel) {
      storage->set_unchecked(e.key, AttachLevel(*e.level, segments));
    } else if (e.non_tensor == structure::NonTensorKind::kStack) {
      storage->set_unchecked(e.key, ValueOrThrow<c10::Error>(
                                        internal::StackFromFile(e.data, level.batch_size()),
                                        "shared-memory handle: NonTensorStack '" + e.key + "'"));
    } else {
      storage->set_unchecked(e.key, e.non_tensor == structure::NonTensorKind::kMetaData
                                        ? NonTensorData::meta(e.data)
                                        : NonTensorData(e.data));
    }
  }
  return TensorDict(storage);
}

}  // namespace

// ---- public functions ----------------------------------------------------------------------

bool IsSharedMemoryTensor(const at::Tensor& tensor) { return SegmentOf(tensor) != nullptr; }

at::Tensor ToSharedMemory(const at::Tensor& tensor) {
  TORCH_CHECK_VALUE(tensor.defined(), "ToSharedMemory: undefined tensor");
  CheckShareable(tensor, "ToSharedMemory: its argument");
  return CopyInto(CreateSegment(SlotBytes(tensor)), kHeaderBytes, tensor);
}

std::string SharedMemoryHandle(const TensorDict& td) {
  HandleWriter w;
  Json root = w.Level(td, nullptr);
  return Json{{"format", "tensordict-shm"}, {"version", 1}, {"segments", std::move(w.segments)},
              {"root", std::move(root)}}
      .dump();
}

TensorDict AttachSharedMemory(const std::string& handle) {
  internal::shm::Handle parsed = ValueOrThrow(internal::shm::ParseHandle(handle), "AttachSharedMemory");
  std::vector<std::shared_ptr<Segment>> segments;
  for (const internal::shm::SegmentRef& s : parsed.segments) segments.push_back(OpenSegment(s));
  TensorDict out = AttachLevel(parsed.structure.root(), segments);
  out.lock_();
  return out;
}

namespace {

// TensorDict::share_memory_ (registered as a hook: NOTE [ Backend entry points ]).
TensorDict& ShareMemory(TensorDict& td) {
  if (td.is_memmap()) {
    TD_FAIL(ValueError, "share_memory_: this TensorDict is memory-mapped to files; memmap and "
                     "shared memory are mutually exclusive");
  }
  Collected c;
  c.Walk(td, nullptr);
  if (!c.leaves.empty()) {
    std::shared_ptr<Segment> seg = CreateSegment(c.total);
    // Copy everything before replacing anything.
    for (Leaf& l : c.leaves) l.tensor = CopyInto(seg, kHeaderBytes + l.offset, l.tensor);
    for (const Leaf& l : c.leaves) l.level->set(l.key, l.tensor);
  }
  for (const std::shared_ptr<Storage>& level : c.levels) level->set_device(at::Device(at::kCPU));
  td.lock_();
  return td;
}

// TensorDict::is_shared.
bool IsShared(const TensorDict& td) {
  if (td.backend() == "shared_memory") return true;
  bool any = false;
  for (const Value& v : td.values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!IsSharedMemoryTensor(v.tensor())) return false;
    any = true;
  }
  return any;
}

// The TensorDict members this backend implements (NOTE [ Backend entry points ]).
const bool kSharedMemoryHooksRegistered =
    internal::hooks::share_memory_.Register(&ShareMemory) &&
    internal::hooks::is_shared.Register(&IsShared);

}  // namespace

// ---- SharedMemoryStorage -------------------------------------------------------------------

SharedMemoryStorage::SharedMemoryStorage(std::vector<int64_t> batch_size)
    : EntryStorage(std::move(batch_size), at::Device(at::kCPU)) {}

void SharedMemoryStorage::set_unchecked(std::string key, Value value) {
  entries().set(key, std::move(value));
}

void SharedMemoryStorage::set(std::string_view key, Value value) {
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    if (!IsSharedMemoryTensor(t)) {
      const NestedKey k(key);
      CheckShareable(t, "share_memory_: key", &k);
      value = Value(ToSharedMemory(t));
    }
  } else if (value.is_tensordict() && value.tensordict().backend() != "shared_memory") {
    const TensorDict& src = value.tensordict();
    auto level = std::make_shared<SharedMemoryStorage>(src.batch_size().vec());
    for (const std::string& k : src.storage().keys()) level->set(k, *src.storage().get(k));
    level->set_locked(src.is_locked());
    value = Value(TensorDict(std::move(level)));
  }
  set_unchecked(std::string(key), std::move(value));
}

bool SharedMemoryStorage::erase(std::string_view key) { return entries().erase(key); }

TD_REGISTER_STORAGE_BACKEND("shared_memory", [](const StorageSpec& spec)
                                                 -> absl::StatusOr<std::shared_ptr<Storage>> {
  return std::make_shared<SharedMemoryStorage>(spec.batch_size());
});

}  // namespace td
