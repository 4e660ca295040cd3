#include "td/backends/shared_memory/handle.h"

#include <c10/core/ScalarType.h>

#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"

namespace td {
namespace internal {
namespace shm {
namespace {

using Json = nlohmann::json;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed handle: ", absl::string_view(what.data(), what.size())));
}

// The field `name` of the object `obj` (described as `where` in messages), or an error.
absl::StatusOr<const Json*> Get(const Json& obj, const char* name, Json::value_t type,
                                const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end()) return Bad(absl::StrCat(where, " has no \"", name, "\""));
  const bool is_int = type == Json::value_t::number_integer;
  const bool ok = is_int ? (it->is_number_integer()) : it->type() == type;
  if (!ok) {
    const char* want = is_int ? "integer" : type == Json::value_t::string ? "string"
                                          : type == Json::value_t::array ? "array" : "object";
    return Bad(absl::StrCat(where, ": \"", name, "\" must be a", is_int ? "n " : " ", want,
                            ", got a ", it->type_name(), " (", it->dump(-1, ' ', true), ")"));
  }
  return &*it;
}

// A non-negative int64 field.
absl::StatusOr<int64_t> GetCount(const Json& obj, const char* name, const std::string& where) {
  absl::StatusOr<const Json*> j = Get(obj, name, Json::value_t::number_integer, where);
  if (!j.ok()) return j.status();
  if ((*j)->is_number_unsigned() && (*j)->get<uint64_t>() > static_cast<uint64_t>(kInt64Max)) {
    return Bad(absl::StrCat(where, ": \"", name, "\" is ", (*j)->dump(), ", more than 2^63-1"));
  }
  const int64_t v = (*j)->get<int64_t>();
  if (v < 0) return Bad(absl::StrCat(where, ": \"", name, "\" is ", v, "; expected >= 0"));
  return v;
}

// Checks NOTE [ Shared-memory handles ]'s bounds rule for the leaf `t` (its element count and
// bytes fit in int64: structure::Builder) in a segment of `size` bytes.
absl::Status CheckBounds(const structure::Entry& t, uint64_t size, const std::string& where) {
  const int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
  const uint64_t offset = static_cast<uint64_t>(t.location.start);
  const std::vector<int64_t>& strides = t.location.strides;
  if (offset < kHeaderBytes || offset % static_cast<uint64_t>(item) != 0 || offset > size) {
    return Bad(absl::StrCat(where, " lies outside its segment: offset ", offset,
                            " must be from ", kHeaderBytes, " to the segment's ", size,
                            " bytes and a multiple of the element size ", item));
  }
  if (t.nbytes == 0) return absl::OkStatus();
  // Elements from the first to the last one the view reaches.
  int64_t extent = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t span = 0;
    if (__builtin_mul_overflow(t.shape[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(extent, span, &extent)) {
      return Bad(absl::StrCat(where, " lies outside its segment: shape ", Json(t.shape).dump(),
                              " with strides ", Json(strides).dump(),
                              " reaches more than 2^63-1 elements"));
    }
  }
  int64_t end = 0;
  if (__builtin_mul_overflow(extent, item, &end) ||
      __builtin_add_overflow(end, static_cast<int64_t>(offset), &end) ||
      static_cast<uint64_t>(end) > size) {
    return Bad(absl::StrCat(where, " lies outside its segment: shape ", Json(t.shape).dump(),
                            " with strides ", Json(strides).dump(), " at offset ", offset,
                            " needs more than the segment's ", size, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SegmentRef> ParseSegment(const Json& j, size_t index) {
  const std::string where = absl::StrCat("segment ", index);
  if (!j.is_object()) return Bad(absl::StrCat(where, " must be an object, got a ", j.type_name()));
  SegmentRef s;
  absl::StatusOr<int64_t> pid = GetCount(j, "pid", where);
  if (!pid.ok()) return pid.status();
  absl::StatusOr<int64_t> fd = GetCount(j, "fd", where);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<int64_t> size = GetCount(j, "size", where);
  if (!size.ok()) return size.status();
  absl::StatusOr<const Json*> token = Get(j, "token", Json::value_t::string, where);
  if (!token.ok()) return token.status();
  const std::string& hex = (*token)->get_ref<const std::string&>();
  if (*pid == 0 || *pid > std::numeric_limits<int32_t>::max() ||
      *fd > std::numeric_limits<int32_t>::max()) {
    return Bad(absl::StrCat(where, ": pid ", *pid, " or fd ", *fd, " is out of range"));
  }
  if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Bad(absl::StrCat(where, ": \"token\" must be 32 lowercase hex digits"));
  }
  if (static_cast<uint64_t>(*size) < kHeaderBytes) {
    return Bad(absl::StrCat(where, ": \"size\" is ", *size, ", less than the ", kHeaderBytes,
                            "-byte header"));
  }
  s.pid = *pid;
  s.fd = *fd;
  s.size = static_cast<uint64_t>(*size);
  // Validated above: 32 lowercase hex digits.
  s.token.clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    s.token.push_back(static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1])));
  }
  return s;
}

// "key 'a'" for the path {"a"}, "key ('a', 'b')" for {"a", "b"} (as NestedKey prints).
std::string KeyText(const std::vector<std::string>& path) {
  if (path.size() == 1) return absl::StrCat("key '", path[0], "'");
  std::string out = "key (";
  for (size_t i = 0; i < path.size(); ++i) absl::StrAppend(&out, i ? ", '" : "'", path[i], "'");
  return out + ")";
}

// structure::Builder's finding `s` about `where`, in this format's words; `field` names the
// JSON field of a shape or batch size.
absl::Status Said(const absl::Status& s, const std::string& where, const char* field) {
  switch (structure::RuleOf(s)) {
    case structure::Rule::kNestingDepth: return Bad(std::string(s.message()));
    case structure::Rule::kShape:
    case structure::Rule::kBatchSize:
      return Bad(absl::StrCat(where, ": ", field, " ", s.message()));
    case structure::Rule::kSubBatch:
      return Bad(absl::StrCat(where, ": ", s.message(), " of its parent"));
    default: return Bad(absl::StrCat(where, ": ", s.message()));
  }
}

// The element count of a shape structure::Builder took, past 2^63-1 (its bytes surely are).
bool NumelOverflows(const Json& shape) {
  int64_t numel = 1;
  for (const Json& d : shape) {
    if (d.get<int64_t>() == 0) return false;
  }
  for (const Json& d : shape) {
    if (__builtin_mul_overflow(numel, d.get<int64_t>(), &numel)) return true;
  }
  return false;
}

// The level `j` (`where` in messages; `path`: its key) into `level`, made by `b`, which applies
// the structure rules (NOTE [ Structure codec ] in td/structure/structure.h).
absl::Status ParseLevel(const Json& j, const std::vector<SegmentRef>& segments,
                        const std::string& where, std::vector<std::string>* path,
                        structure::Builder& b, structure::Level& level) {
  if (!j.is_object()) return Bad(absl::StrCat(where, " must be an object, got a ", j.type_name()));
  absl::StatusOr<const Json*> batch = Get(j, "batch_size", Json::value_t::array, where);
  if (!batch.ok()) return batch.status();
  if (absl::Status ok = b.SetBatchSize(level, **batch); !ok.ok()) {
    return Said(ok, where, "\"batch_size\"");
  }
  absl::StatusOr<const Json*> entries = Get(j, "entries", Json::value_t::array, where);
  if (!entries.ok()) return entries.status();
  size_t i = 0;
  for (const Json& e : **entries) {
    const std::string ewhere = absl::StrCat(where, ": entry ", i++);
    if (!e.is_object()) return Bad(absl::StrCat(ewhere, " must be an object, got a ", e.type_name()));
    absl::StatusOr<const Json*> key_json = Get(e, "key", Json::value_t::string, ewhere);
    if (!key_json.ok()) return key_json.status();
    const std::string& key = (*key_json)->get_ref<const std::string&>();
    path->push_back(key);
    const std::string kwhere = KeyText(*path);
    absl::StatusOr<const Json*> kind = Get(e, "kind", Json::value_t::string, kwhere);
    if (!kind.ok()) return kind.status();
    const std::string& k = (*kind)->get_ref<const std::string&>();
    if (k == "tensor") {
      absl::StatusOr<int64_t> seg = GetCount(e, "segment", kwhere);
      if (!seg.ok()) return seg.status();
      if (static_cast<uint64_t>(*seg) >= segments.size()) {
        return Bad(absl::StrCat(kwhere, ": segment ", *seg, " does not exist (the handle has ",
                                segments.size(), ")"));
      }
      structure::Location at;
      at.index = *seg;
      absl::StatusOr<int64_t> offset = GetCount(e, "offset", kwhere);
      if (!offset.ok()) return offset.status();
      at.start = *offset;
      absl::StatusOr<const Json*> dtype = Get(e, "dtype", Json::value_t::string, kwhere);
      if (!dtype.ok()) return dtype.status();
      absl::StatusOr<const Json*> shape = Get(e, "shape", Json::value_t::array, kwhere);
      if (!shape.ok()) return shape.status();
      absl::StatusOr<const structure::Entry*> leaf = b.AddLeaf(
          level, key, structure::Dtype::Name((*dtype)->get_ref<const std::string&>()), **shape);
      if (!leaf.ok()) {
        if (structure::RuleOf(leaf.status()) == structure::Rule::kBytes &&
            NumelOverflows(**shape)) {
          return Bad(absl::StrCat(kwhere, ": shape ", (*shape)->dump(),
                                  " has more than 2^63-1 elements"));
        }
        return Said(leaf.status(), kwhere, "\"shape\"");
      }
      absl::StatusOr<const Json*> strides_json = Get(e, "strides", Json::value_t::array, kwhere);
      if (!strides_json.ok()) return strides_json.status();
      absl::StatusOr<std::vector<int64_t>> strides = structure::Sizes(**strides_json).Read();
      if (!strides.ok()) {
        return Bad(absl::StrCat(kwhere, ": \"strides\" ", strides.status().message()));
      }
      if ((*leaf)->shape.size() != strides->size()) {
        return Bad(absl::StrCat(kwhere, " has ", (*leaf)->shape.size(), " sizes but ",
                                strides->size(), " strides"));
      }
      at.strides = *std::move(strides);
      b.SetLocation(**leaf, std::move(at));
      absl::Status ok = CheckBounds(**leaf, segments[static_cast<size_t>(*seg)].size, kwhere);
      if (!ok.ok()) return ok;
    } else if (k == "tensordict") {
      absl::StatusOr<const Json*> value = Get(e, "value", Json::value_t::object, kwhere);
      if (!value.ok()) return value.status();
      absl::StatusOr<structure::Level*> sub =
          b.AddLevel(level, key, structure::LevelKind::kTensorDict);
      if (!sub.ok()) return Said(sub.status(), kwhere, "");
      absl::Status ok = ParseLevel(**value, segments, kwhere, path, b, **sub);
      if (!ok.ok()) return ok;
    } else if (k == "non_tensor") {
      auto it = e.find("data");
      if (it == e.end()) return Bad(absl::StrCat(kwhere, " is non-tensor data without \"data\""));
      auto c = e.find("cls");
      absl::StatusOr<structure::NonTensorKind> cls =
          structure::NonTensorKindOf(c == e.end() ? nullptr : &*c);
      if (!cls.ok()) return Bad(absl::StrCat(kwhere, ": ", cls.status().message()));
      absl::StatusOr<const structure::Entry*> data = b.AddNonTensor(level, key, *it, *cls);
      if (!data.ok()) return Said(data.status(), kwhere, "");
    } else {
      return Bad(absl::StrCat(kwhere, " has the unknown kind ", (*kind)->dump(-1, ' ', true),
                              " (expected \"tensor\", \"tensordict\" or \"non_tensor\")"));
    }
    path->pop_back();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Handle> ParseHandle(std::string_view text) {
  if (text.size() > kMaxHandleBytes) {
    return Bad(absl::StrCat("it has ", text.size(), " bytes, more than ", kMaxHandleBytes));
  }
  absl::StatusOr<Json> parsed = structure::ParseJson<Json>(text);
  if (!parsed.ok()) return Bad(std::string(parsed.status().message()));
  const Json& j = *parsed;
  if (!j.is_object()) return Bad(absl::StrCat("expected a JSON object, got a ", j.type_name()));
  auto format = j.find("format");
  auto version = j.find("version");
  if (format == j.end() || !format->is_string() || *format != "tensordict-shm") {
    return Bad(absl::StrCat("\"format\" must be \"tensordict-shm\", got ",
                            format == j.end() ? std::string("nothing")
                                              : format->dump(-1, ' ', true)));
  }
  if (version == j.end() || !version->is_number_integer() || *version != 1) {
    return Bad(absl::StrCat("\"version\" must be the integer 1, got ",
                            version == j.end() ? std::string("nothing")
                                               : version->dump(-1, ' ', true)));
  }
  std::vector<SegmentRef> segs;
  absl::StatusOr<const Json*> segments = Get(j, "segments", Json::value_t::array, "the handle");
  if (!segments.ok()) return segments.status();
  size_t i = 0;
  for (const Json& s : **segments) {
    absl::StatusOr<SegmentRef> seg = ParseSegment(s, i++);
    if (!seg.ok()) return seg.status();
    segs.push_back(*std::move(seg));
  }
  absl::StatusOr<const Json*> root = Get(j, "root", Json::value_t::object, "the handle");
  if (!root.ok()) return root.status();
  structure::Builder b;
  std::vector<std::string> path;
  absl::Status ok = ParseLevel(**root, segs, "the root", &path, b,
                               b.Root(structure::LevelKind::kTensorDict));
  if (!ok.ok()) return ok;
  absl::StatusOr<structure::Description> structure = std::move(b).Finish();
  if (!structure.ok()) return structure.status();
  return Handle{std::move(segs), *std::move(structure)};
}

}  // namespace shm
}  // namespace internal
}  // namespace td
