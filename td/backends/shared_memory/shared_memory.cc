#include "td/backends/shared_memory/shared_memory.h"

#include <ATen/ATen.h>
#include <c10/util/strides.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/dtype.h"

namespace td {
namespace {

// ---- segments ------------------------------------------------------------------------------

constexpr char kMagic[8] = {'T', 'D', 'S', 'H', 'M', 0, 0, 1};
constexpr size_t kHeaderBytes = 64;  // magic (8) | token (16) | payload bytes (8) | padding
constexpr size_t kAlign = 64;
constexpr std::string_view kMemfdName = "td-shm";
constexpr size_t kMaxHandleBytes = size_t{64} << 20;

using Token = std::array<uint8_t, 16>;

struct Segment {
  int fd = -1;
  void* addr = nullptr;
  size_t length = 0;  // header + payload
  Token token{};
  ~Segment() {
    if (addr != nullptr) ::munmap(addr, length);
    if (fd >= 0) ::close(fd);
  }
  char* payload() const { return static_cast<char*>(addr) + kHeaderBytes; }
};

// The DataPtr context of every shared tensor: keeps its segment mapped.
struct SegmentRef {
  std::shared_ptr<Segment> segment;
};

void DeleteSegmentRef(void* ctx) { delete static_cast<SegmentRef*>(ctx); }

const SegmentRef* RefOf(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  const c10::DataPtr& dp = t.storage().data_ptr();
  if (dp.get_deleter() != &DeleteSegmentRef) return nullptr;
  return static_cast<const SegmentRef*>(dp.get_context());
}

[[noreturn]] void FailErrno(int err, const std::string& what) {
  Fail<c10::Error>(what, ": ", std::strerror(err));
}

Token RandomToken() {
  Token t;
  std::random_device rd;
  for (size_t i = 0; i < t.size(); i += 4) {
    const uint32_t r = rd();
    std::memcpy(t.data() + i, &r, 4);
  }
  return t;
}

std::shared_ptr<Segment> CreateSegment(size_t payload) {
  auto seg = std::make_shared<Segment>();
  seg->fd = ::memfd_create(std::string(kMemfdName).c_str(), MFD_CLOEXEC);
  if (seg->fd < 0) FailErrno(errno, "share_memory: memfd_create failed");
  seg->length = kHeaderBytes + payload;
  if (::ftruncate(seg->fd, static_cast<off_t>(seg->length)) != 0) {
    FailErrno(errno, absl::StrCat("share_memory: cannot size a segment of ", seg->length, " bytes"));
  }
  void* addr = ::mmap(nullptr, seg->length, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
  if (addr == MAP_FAILED) {
    FailErrno(errno, absl::StrCat("share_memory: cannot map a segment of ", seg->length, " bytes"));
  }
  seg->addr = addr;
  seg->token = RandomToken();
  char* h = static_cast<char*>(addr);
  std::memcpy(h, kMagic, sizeof(kMagic));
  std::memcpy(h + 8, seg->token.data(), seg->token.size());
  const uint64_t n = payload;
  std::memcpy(h + 24, &n, sizeof(n));
  return seg;
}

// A tensor of `sizes`/`strides` at byte `offset` of the segment's mapping (header included).
at::Tensor ViewOf(const std::shared_ptr<Segment>& seg, size_t offset, c10::ScalarType dtype,
                  at::IntArrayRef sizes, at::IntArrayRef strides) {
  return at::for_blob(static_cast<char*>(seg->addr) + offset, sizes)
      .strides(strides)
      .context(new SegmentRef{seg}, &DeleteSegmentRef)
      .target_device(at::Device(at::kCPU))
      .options(at::TensorOptions().dtype(dtype).device(at::kCPU))
      .make_tensor();
}

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void CheckShareable(const at::Tensor& t, const NestedKey& key) {
  if (t.layout() != at::kStrided) {
    Fail<ValueError>("share_memory_: key ", key.repr(), " holds a ", t.layout(),
                     " tensor; only strided (dense) tensors can be shared");
  }
}

// ---- share_memory_ -------------------------------------------------------------------------

struct Leaf {
  Storage* level;
  std::string key;
  at::Tensor tensor;
  size_t offset = 0;
};

void CollectLeaves(const TensorDict& td, const NestedKey* prefix, std::vector<Leaf>* out) {
  Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (v->is_tensor()) {
      if (IsSharedMemoryTensor(v->tensor())) continue;
      CheckShareable(v->tensor(), full);
      out->push_back({&s, k, v->tensor()});
    } else if (v->is_tensordict()) {
      CollectLeaves(v->tensordict(), &full, out);
    }
  }
}

void SetCpu(const TensorDict& td) {
  td.storage().set_device(at::Device(at::kCPU));
  for (const Value& v : td.values()) {
    if (v.is_tensordict()) SetCpu(v.tensordict());
  }
}

// ---- handles -------------------------------------------------------------------------------

using Json = nlohmann::json;

struct HandleWriter {
  Json segments = Json::array();
  absl::flat_hash_map<const Segment*, size_t> index;

  size_t SegmentIndex(const Segment* seg) {
    auto [it, fresh] = index.emplace(seg, segments.size());
    if (fresh) {
      segments.push_back(Json{{"pid", static_cast<int64_t>(::getpid())},
                              {"fd", seg->fd},
                              {"size", static_cast<uint64_t>(seg->length)},
                              {"token", absl::BytesToHexString(absl::string_view(
                                            reinterpret_cast<const char*>(seg->token.data()),
                                            seg->token.size()))}});
    }
    return it->second;
  }

  Json Level(const TensorDict& td, const NestedKey* prefix) {
    Json entries = Json::array();
    const Storage& s = td.storage();
    for (const std::string& k : s.keys()) {
      std::optional<Value> v = s.get(k);
      if (!v) continue;
      const NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
      if (v->is_tensor()) {
        const at::Tensor& t = v->tensor();
        const SegmentRef* ref = RefOf(t);
        if (ref == nullptr) {
          Fail<ValueError>("SharedMemoryHandle: key ", full.repr(),
                           " is not in shared memory (call share_memory_() first)");
        }
        const size_t offset = static_cast<size_t>(static_cast<const char*>(t.data_ptr()) -
                                                  static_cast<const char*>(ref->segment->addr));
        entries.push_back(Json{{"key", k},
                               {"kind", "tensor"},
                               {"segment", SegmentIndex(ref->segment.get())},
                               {"offset", static_cast<uint64_t>(offset)},
                               {"dtype", DtypeName(t.scalar_type())},
                               {"shape", t.sizes().vec()},
                               {"strides", t.strides().vec()}});
      } else if (v->is_tensordict()) {
        entries.push_back(Json{{"key", k}, {"kind", "tensordict"},
                               {"value", Level(v->tensordict(), &full)}});
      } else {
        entries.push_back(Json{{"key", k}, {"kind", "non_tensor"}, {"data", v->non_tensor()}});
      }
    }
    return Json{{"batch_size", td.batch_size().vec()}, {"entries", std::move(entries)}};
  }
};

[[noreturn]] void BadHandle(const std::string& what) {
  Fail<ValueError>("AttachSharedMemory: malformed handle: ", what);
}

const Json& Field(const Json& obj, const char* name, Json::value_t type, const char* where) {
  auto it = obj.find(name);
  if (it == obj.end()) BadHandle(absl::StrCat(where, " has no \"", name, "\""));
  const bool ok = it->type() == type ||
                  (type == Json::value_t::number_integer && it->is_number_unsigned()) ||
                  (type == Json::value_t::number_unsigned && it->is_number_integer() &&
                   it->get<int64_t>() >= 0);
  if (!ok) BadHandle(absl::StrCat(where, ": \"", name, "\" is a ", it->type_name()));
  return *it;
}

std::vector<int64_t> IntList(const Json& j, const char* what) {
  std::vector<int64_t> out;
  if (j.size() > 64) BadHandle(absl::StrCat(what, " has more than 64 dims"));
  for (const Json& d : j) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      BadHandle(absl::StrCat(what, " must hold non-negative integers"));
    }
    out.push_back(d.get<int64_t>());
  }
  return out;
}

std::shared_ptr<Segment> OpenSegment(const Json& j) {
  const int64_t pid = Field(j, "pid", Json::value_t::number_integer, "a segment").get<int64_t>();
  const int64_t fd = Field(j, "fd", Json::value_t::number_integer, "a segment").get<int64_t>();
  const uint64_t size = Field(j, "size", Json::value_t::number_unsigned, "a segment").get<uint64_t>();
  const std::string& hex = Field(j, "token", Json::value_t::string, "a segment").get_ref<const std::string&>();
  if (pid <= 0 || fd < 0 || hex.size() != 32 ||
      hex.find_first_not_of("0123456789abcdef") != std::string::npos || size < kHeaderBytes) {
    BadHandle("a segment has an invalid pid, fd, size or token");
  }
  const std::string where = absl::StrCat("/proc/", pid, "/fd/", fd);
  char link[256];
  const ssize_t n = ::readlink(where.c_str(), link, sizeof(link) - 1);
  if (n < 0) {
    FailErrno(errno, absl::StrCat("AttachSharedMemory: cannot reach segment ", where,
                                  " (is process ", pid, " still running and holding it?)"));
  }
  link[n] = '\0';
  const std::string expected = absl::StrCat("/memfd:", std::string(kMemfdName), " ");
  if (std::strncmp(link, expected.c_str(), expected.size()) != 0) {
    Fail<c10::Error>("AttachSharedMemory: ", where, " is ", link, ", not a tensordict segment");
  }
  auto seg = std::make_shared<Segment>();
  seg->fd = ::open(where.c_str(), O_RDWR | O_CLOEXEC);
  if (seg->fd < 0) FailErrno(errno, absl::StrCat("AttachSharedMemory: cannot open ", where));
  struct stat st;
  if (::fstat(seg->fd, &st) != 0) FailErrno(errno, absl::StrCat("AttachSharedMemory: stat ", where));
  if (static_cast<uint64_t>(st.st_size) != size) {
    Fail<c10::Error>("AttachSharedMemory: segment ", where, " has ", st.st_size,
                     " bytes, the handle says ", size);
  }
  seg->length = size;
  void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg->fd, 0);
  if (addr == MAP_FAILED) FailErrno(errno, absl::StrCat("AttachSharedMemory: cannot map ", where));
  seg->addr = addr;
  const std::string token = absl::HexStringToBytes(hex);
  const char* h = static_cast<const char*>(addr);
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0 || std::memcmp(h + 8, token.data(), 16) != 0) {
    Fail<c10::Error>("AttachSharedMemory: segment ", where,
                     " does not carry the handle's token (a different segment now uses that "
                     "descriptor)");
  }
  std::memcpy(seg->token.data(), token.data(), 16);
  return seg;
}

TensorDict AttachLevel(const Json& level, const std::vector<std::shared_ptr<Segment>>& segments,
                       const std::vector<int64_t>* parent_batch, int depth) {
  if (depth > 128) BadHandle("TensorDicts nested more than 128 levels deep");
  if (!level.is_object()) BadHandle("a level is not an object");
  std::vector<int64_t> batch =
      IntList(Field(level, "batch_size", Json::value_t::array, "a level"), "batch_size");
  if (parent_batch && (batch.size() < parent_batch->size() ||
                       !std::equal(parent_batch->begin(), parent_batch->end(), batch.begin()))) {
    BadHandle("a nested batch size does not start with its parent's");
  }
  auto storage = std::make_shared<SharedMemoryStorage>(batch);
  for (const Json& e : Field(level, "entries", Json::value_t::array, "a level")) {
    if (!e.is_object()) BadHandle("an entry is not an object");
    const std::string& key = Field(e, "key", Json::value_t::string, "an entry").get_ref<const std::string&>();
    const std::string& kind = Field(e, "kind", Json::value_t::string, "an entry").get_ref<const std::string&>();
    if (storage->contains(key)) BadHandle(absl::StrCat("key '", key, "' appears twice"));
    if (kind == "tensor") {
      const uint64_t si = Field(e, "segment", Json::value_t::number_unsigned, "a tensor").get<uint64_t>();
      const uint64_t offset = Field(e, "offset", Json::value_t::number_unsigned, "a tensor").get<uint64_t>();
      std::optional<c10::ScalarType> dtype =
          ParseDtypeName(Field(e, "dtype", Json::value_t::string, "a tensor").get_ref<const std::string&>());
      if (!dtype) BadHandle(absl::StrCat("key '", key, "' has an unknown dtype"));
      std::vector<int64_t> shape = IntList(Field(e, "shape", Json::value_t::array, "a tensor"), "shape");
      std::vector<int64_t> strides =
          IntList(Field(e, "strides", Json::value_t::array, "a tensor"), "strides");
      if (si >= segments.size() || shape.size() != strides.size()) {
        BadHandle(absl::StrCat("key '", key, "' has a bad segment index or strides"));
      }
      if (shape.size() < batch.size() || !std::equal(batch.begin(), batch.end(), shape.begin())) {
        BadHandle(absl::StrCat("key '", key, "' does not start with the batch size"));
      }
      // Every element must lie inside the segment's payload.
      const Segment& seg = *segments[si];
      const uint64_t item = c10::elementSize(*dtype);
      bool empty = false;
      unsigned __int128 last = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d] == 0) empty = true;
        if (shape[d] > 0) last += static_cast<unsigned __int128>(shape[d] - 1) * strides[d];
      }
      const unsigned __int128 end = offset + (last + 1) * item;
      if (offset < kHeaderBytes || offset % item != 0 || offset > seg.length ||
          (!empty && end > seg.length)) {
        BadHandle(absl::StrCat("key '", key, "' lies outside its segment"));
      }
      storage->set_unchecked(key, ViewOf(segments[si], offset, *dtype, shape, strides));
    } else if (kind == "tensordict") {
      storage->set_unchecked(key, AttachLevel(Field(e, "value", Json::value_t::object, "a TensorDict"),
                                              segments, &batch, depth + 1));
    } else if (kind == "non_tensor") {
      auto it = e.find("data");
      if (it == e.end()) BadHandle("non-tensor data without \"data\"");
      storage->set_unchecked(key, NonTensorData(*it));
    } else {
      BadHandle(absl::StrCat("unknown entry kind '", kind, "'"));
    }
  }
  return TensorDict(storage);
}

}  // namespace

// ---- public functions ----------------------------------------------------------------------

bool IsSharedMemoryTensor(const at::Tensor& tensor) { return RefOf(tensor) != nullptr; }

at::Tensor ToSharedMemory(const at::Tensor& tensor) {
  TORCH_CHECK_VALUE(tensor.defined(), "ToSharedMemory: undefined tensor");
  if (tensor.layout() != at::kStrided) {
    Fail<ValueError>("ToSharedMemory: a ", tensor.layout(),
                     " tensor cannot be shared; only strided (dense) tensors can");
  }
  const size_t nbytes = static_cast<size_t>(tensor.numel()) * tensor.element_size();
  std::shared_ptr<Segment> seg = CreateSegment(AlignUp(nbytes));
  at::Tensor out = ViewOf(seg, kHeaderBytes, tensor.scalar_type(), tensor.sizes(),
                          c10::contiguous_strides(tensor.sizes()));
  out.copy_(tensor);
  return out;
}

std::string SharedMemoryHandle(const TensorDict& td) {
  HandleWriter w;
  Json root = w.Level(td, nullptr);
  return Json{{"format", "tensordict-shm"}, {"version", 1}, {"segments", std::move(w.segments)},
              {"root", std::move(root)}}
      .dump();
}

TensorDict AttachSharedMemory(const std::string& handle) {
  if (handle.size() > kMaxHandleBytes) BadHandle("larger than 64 MiB");
  Json j;
  try {
    j = Json::parse(handle);
  } catch (const Json::exception& e) {
    BadHandle(e.what());
  }
  if (!j.is_object() || j.value("format", "") != "tensordict-shm" || j.value("version", 0) != 1) {
    BadHandle("not a tensordict-shm version 1 handle");
  }
  std::vector<std::shared_ptr<Segment>> segments;
  for (const Json& s : Field(j, "segments", Json::value_t::array, "the handle")) {
    segments.push_back(OpenSegment(s));
  }
  TensorDict out = AttachLevel(Field(j, "root", Json::value_t::object, "the handle"), segments,
                               nullptr, 0);
  out.lock_();
  return out;
}

TensorDict& TensorDict::share_memory_() {
  if (is_memmap()) {
    Fail<ValueError>("share_memory_: this TensorDict is memory-mapped to files; memmap and "
                     "shared memory are mutually exclusive");
  }
  std::vector<Leaf> leaves;
  CollectLeaves(*this, nullptr, &leaves);
  if (!leaves.empty()) {
    size_t total = 0;
    for (Leaf& l : leaves) {
      l.offset = total;
      total += AlignUp(static_cast<size_t>(l.tensor.numel()) * l.tensor.element_size());
    }
    std::shared_ptr<Segment> seg = CreateSegment(total);
    std::vector<at::Tensor> views;
    views.reserve(leaves.size());
    for (const Leaf& l : leaves) {  // copy everything before replacing anything
      at::Tensor v = ViewOf(seg, kHeaderBytes + l.offset, l.tensor.scalar_type(), l.tensor.sizes(),
                            c10::contiguous_strides(l.tensor.sizes()));
      v.copy_(l.tensor);
      views.push_back(std::move(v));
    }
    for (size_t i = 0; i < leaves.size(); ++i) leaves[i].level->set(leaves[i].key, views[i]);
  }
  SetCpu(*this);
  lock_();
  return *this;
}

bool TensorDict::is_shared() const {
  if (backend() == "shared_memory") return true;
  bool any = false;
  for (const Value& v : values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!IsSharedMemoryTensor(v.tensor())) return false;
    any = true;
  }
  return any;
}

// ---- SharedMemoryStorage -------------------------------------------------------------------

SharedMemoryStorage::SharedMemoryStorage(std::vector<int64_t> batch_size)
    : EntryStorage(std::move(batch_size), at::Device(at::kCPU)) {}

void SharedMemoryStorage::set_unchecked(std::string key, Value value) {
  entries_.set(key, std::move(value));
}

void SharedMemoryStorage::set(std::string_view key, Value value) {
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    if (!IsSharedMemoryTensor(t)) {
      CheckShareable(t, NestedKey(key));
      value = Value(ToSharedMemory(t));
    }
  } else if (value.is_tensordict() && value.tensordict().backend() != "shared_memory") {
    const TensorDict& src = value.tensordict();
    auto level = std::make_shared<SharedMemoryStorage>(src.batch_size().vec());
    for (const std::string& k : src.storage().keys()) {
      level->set(k, *src.storage().get(k));
    }
    level->set_locked(src.is_locked());
    value = Value(TensorDict(std::move(level)));
  }
  set_unchecked(std::string(key), std::move(value));
}

bool SharedMemoryStorage::erase(std::string_view key) { return entries_.erase(key); }

TD_REGISTER_STORAGE_BACKEND("shared_memory", [](const StorageSpec& spec)
                                                 -> absl::StatusOr<std::shared_ptr<Storage>> {
  return std::make_shared<SharedMemoryStorage>(spec.batch_size());
});

}  // namespace td
