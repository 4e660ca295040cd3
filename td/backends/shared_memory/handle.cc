#include "td/backends/shared_memory/handle.h"

#include <c10/core/ScalarType.h>

#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace td {
namespace internal {
namespace shm {
namespace {

using Json = nlohmann::json;

// What is wrong with a handle: thrown inside this file, returned by ParseHandle.
struct Malformed {
  std::string what;
};

template <class... Parts>
[[noreturn]] void Bad(const Parts&... parts) {
  throw Malformed{absl::StrCat(parts...)};
}

// The field `name` of the object `obj` (described as `where` in messages), of JSON type `type`.
const Json& Get(const Json& obj, const char* name, Json::value_t type, const std::string& where) {
  auto it = obj.find(name);
  if (it == obj.end()) Bad(where, " has no \"", name, "\"");
  const bool is_int = type == Json::value_t::number_integer;
  if (is_int ? !it->is_number_integer() : it->type() != type) {
    const char* want = is_int                          ? "an integer"
                       : type == Json::value_t::string ? "a string"
                       : type == Json::value_t::array  ? "an array"
                                                       : "an object";
    Bad(where, ": \"", name, "\" must be ", want, ", got a ", it->type_name(), " (",
        it->dump(-1, ' ', true), ")");
  }
  return *it;
}

// A non-negative int64 field.
int64_t GetCount(const Json& obj, const char* name, const std::string& where) {
  const Json& j = Get(obj, name, Json::value_t::number_integer, where);
  const std::optional<int64_t> v = internal::SizeFromJson(j);
  if (!v) {
    Bad(where, ": \"", name, "\" is ", j.dump(),
        j.is_number_unsigned() ? ", more than 2^63-1" : "; expected >= 0");
  }
  return *v;
}

// The Builder's finding `s` about `where`; `field` names a shape's or batch size's JSON field.
void Check(const absl::Status& s, const std::string& where, const char* field = "") {
  if (s.ok()) return;
  using R = structure::Rule;
  const R rule = structure::RuleOf(s);
  if (rule == R::kNestingDepth) Bad(s.message());
  const bool sizes = rule == R::kShape || rule == R::kBatchSize;
  Bad(where, ": ", sizes ? field : "", sizes ? " " : "", s.message(),
      rule == R::kSubBatch ? " of its parent" : rule == R::kBytes ? " (more than 2^63-1)" : "");
}

// NOTE [ Shared-memory handles ]'s bounds rule for the leaf `t` in a segment of `size` bytes.
void CheckBounds(const structure::Entry& t, uint64_t size, const std::string& where) {
  const int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
  const uint64_t offset = static_cast<uint64_t>(t.location.start);
  const std::vector<int64_t>& strides = t.location.strides;
  if (offset < kHeaderBytes || offset % static_cast<uint64_t>(item) != 0 || offset > size) {
    Bad(where, " lies outside its segment: offset ", offset, " must be from ", kHeaderBytes,
        " to the segment's ", size, " bytes and a multiple of the element size ", item);
  }
  if (t.nbytes == 0) return;
  int64_t extent = 1, end = 0;  // elements from the first to the last one the view reaches
  bool overflow = false;
  for (size_t d = 0; d < t.shape.size() && !overflow; ++d) {
    int64_t span = 0;
    overflow = __builtin_mul_overflow(t.shape[d] - 1, strides[d], &span) ||
               __builtin_add_overflow(extent, span, &extent);
  }
  if (overflow || __builtin_mul_overflow(extent, item, &end) ||
      __builtin_add_overflow(end, static_cast<int64_t>(offset), &end) ||
      static_cast<uint64_t>(end) > size) {
    Bad(where, " lies outside its segment: shape ", Json(t.shape).dump(), " with strides ",
        Json(strides).dump(), " at offset ", offset, " needs more than the segment's ", size,
        " bytes");
  }
}

SegmentRef ParseSegment(const Json& j, size_t index) {
  const std::string where = absl::StrCat("segment ", index);
  if (!j.is_object()) Bad(where, " must be an object, got a ", j.type_name());
  SegmentRef s;
  s.pid = GetCount(j, "pid", where);
  s.fd = GetCount(j, "fd", where);
  const int64_t size = GetCount(j, "size", where);
  const std::string& hex =
      Get(j, "token", Json::value_t::string, where).get_ref<const std::string&>();
  if (s.pid == 0 || s.pid > std::numeric_limits<int32_t>::max() ||
      s.fd > std::numeric_limits<int32_t>::max()) {
    Bad(where, ": pid ", s.pid, " or fd ", s.fd, " is out of range");
  }
  if (hex.size() != 32 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    Bad(where, ": \"token\" must be 32 lowercase hex digits");
  }
  if (static_cast<uint64_t>(size) < kHeaderBytes) {
    Bad(where, ": \"size\" is ", size, ", less than the ", kHeaderBytes, "-byte header");
  }
  s.size = static_cast<uint64_t>(size);
  // Checked above: 32 lowercase hex digits (absl's HexStringToBytes differs by version).
  const auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < hex.size(); i += 2) {
    s.token.push_back(static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1])));
  }
  return s;
}

// The levels of a handle onto a structure::Builder (NOTE [ Structure codec ]).
struct Parser {
  std::vector<SegmentRef> segments;
  std::vector<std::string> path;  // the key of the level being parsed
  structure::Builder b;

  // The level `j` (`where` in messages) into `level`.
  void Level(const Json& j, const std::string& where, structure::Level& level) {
    if (!j.is_object()) Bad(where, " must be an object, got a ", j.type_name());
    Check(b.SetBatchSize(level, Get(j, "batch_size", Json::value_t::array, where)), where,
          "\"batch_size\"");
    size_t i = 0;
    for (const Json& e : Get(j, "entries", Json::value_t::array, where)) {
      const std::string ewhere = absl::StrCat(where, ": entry ", i++);
      if (!e.is_object()) Bad(ewhere, " must be an object, got a ", e.type_name());
      const std::string& key =
          Get(e, "key", Json::value_t::string, ewhere).get_ref<const std::string&>();
      path.push_back(key);
      const std::string kwhere = "key " + NestedKey(path).repr();
      const Json& kind = Get(e, "kind", Json::value_t::string, kwhere);
      if (kind == "tensor") {
        Tensor(e, kwhere, key, level);
      } else if (kind == "tensordict") {
        const Json& value = Get(e, "value", Json::value_t::object, kwhere);
        absl::StatusOr<structure::Level*> sub =
            b.AddLevel(level, key, structure::LevelKind::kTensorDict);
        Check(sub.status(), kwhere);
        Level(value, kwhere, **sub);
      } else if (kind == "non_tensor") {
        auto data = e.find("data");
        if (data == e.end()) Bad(kwhere, " is non-tensor data without \"data\"");
        auto c = e.find("cls");
        absl::StatusOr<structure::NonTensorKind> cls =
            structure::NonTensorKindOf(c == e.end() ? nullptr : &*c);
        Check(cls.status(), kwhere);
        Check(b.AddNonTensor(level, key, *data, *cls).status(), kwhere);
      } else {
        Bad(kwhere, " has the unknown kind ", kind.dump(-1, ' ', true),
            " (expected \"tensor\", \"tensordict\" or \"non_tensor\")");
      }
      path.pop_back();
    }
  }

  void Tensor(const Json& e, const std::string& where, const std::string& key,
              structure::Level& level) {
    structure::Location at;
    at.index = GetCount(e, "segment", where);
    if (static_cast<uint64_t>(at.index) >= segments.size()) {
      Bad(where, ": segment ", at.index, " does not exist (the handle has ", segments.size(), ")");
    }
    at.start = GetCount(e, "offset", where);
    const Json& dtype = Get(e, "dtype", Json::value_t::string, where);
    absl::StatusOr<const structure::Entry*> leaf =
        b.AddLeaf(level, key, structure::Dtype::Name(dtype.get_ref<const std::string&>()),
                  Get(e, "shape", Json::value_t::array, where));
    Check(leaf.status(), where, "\"shape\"");
    absl::StatusOr<std::vector<int64_t>> strides =
        structure::Sizes(Get(e, "strides", Json::value_t::array, where)).Read();
    if (!strides.ok()) Bad(where, ": \"strides\" ", strides.status().message());
    if ((*leaf)->shape.size() != strides->size()) {
      Bad(where, " has ", (*leaf)->shape.size(), " sizes but ", strides->size(), " strides");
    }
    at.strides = *std::move(strides);
    const uint64_t size = segments[static_cast<size_t>(at.index)].size;
    b.SetLocation(**leaf, std::move(at));
    CheckBounds(**leaf, size, where);
  }
};

Handle Parse(std::string_view text) {
  if (text.size() > kMaxHandleBytes) {
    Bad("it has ", text.size(), " bytes, more than ", kMaxHandleBytes);
  }
  absl::StatusOr<Json> parsed = structure::ParseJson<Json>(text);
  if (!parsed.ok()) Bad(parsed.status().message());
  const Json& j = *parsed;
  if (!j.is_object()) Bad("expected a JSON object, got a ", j.type_name());
  const auto shown = [&j](const char* name) {
    return j.contains(name) ? j[name].dump(-1, ' ', true) : std::string("nothing");
  };
  if (j.value("format", Json()) != "tensordict-shm") {
    Bad("\"format\" must be \"tensordict-shm\", got ", shown("format"));
  }
  const Json version = j.value("version", Json());
  if (!version.is_number_integer() || version != 1) {
    Bad("\"version\" must be the integer 1, got ", shown("version"));
  }
  Parser p;
  // Named: GCC 16 (-Wdangling-reference) flags a temporary argument to a call returning one.
  const std::string top = "the handle";
  for (const Json& s : Get(j, "segments", Json::value_t::array, top)) {
    p.segments.push_back(ParseSegment(s, p.segments.size()));
  }
  const Json& root = Get(j, "root", Json::value_t::object, top);
  p.Level(root, "the root", p.b.Root(structure::LevelKind::kTensorDict));
  absl::StatusOr<structure::Description> structure = std::move(p.b).Finish();
  if (!structure.ok()) Bad(structure.status().message());  // every level has its batch size
  return Handle{std::move(p.segments), *std::move(structure)};
}

}  // namespace

absl::StatusOr<Handle> ParseHandle(std::string_view text) {
  try {
    return Parse(text);
  } catch (const Malformed& m) {
    return absl::InvalidArgumentError(absl::StrCat("malformed handle: ", m.what));
  }
}

}  // namespace shm
}  // namespace internal
}  // namespace td
