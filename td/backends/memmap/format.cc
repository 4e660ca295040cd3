#include "td/backends/memmap/format.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/dtype.h"

namespace td {
namespace memmap_format {
namespace {

using Json = nlohmann::ordered_json;

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool NeedsEscape(unsigned char c) {
  if (c < 0x20 || c == 0x7f) return true;
  switch (c) {
    case '/': case '<': case '>': case ':': case '"': case '|': case '?': case '*': case '\\':
    case ' ': case '%':
      return true;
    default:
      return false;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Quoted key for messages ('a' as Python prints it; control bytes shown escaped).
std::string Quote(std::string_view key) {
  std::string out = "'";
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('\'');
  return out;
}

const char* JsonTypeName(const Json& j) { return j.type_name(); }

absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::DataLossError(absl::StrCat(AV(path), ": ", AV(what)));
}

// Deepest nesting of [ and { in `text` (outside strings), or -1 past `limit`.
int MaxDepth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return -1;
      max_depth = std::max(max_depth, depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view path) {
  if (text.size() > kMaxMetaBytes) {
    return Bad(path, absl::StrCat("file of ", text.size(), " bytes is larger than the ",
                                  kMaxMetaBytes, " bytes a meta.json may have"));
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Bad(path, "empty file (an interrupted write?), expected a JSON object");
  }
  if (MaxDepth(text, kMaxJsonDepth) < 0) {
    return Bad(path, absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    return Bad(path, absl::StrCat("malformed JSON: ", e.what()));
  }
}

// A list of non-negative int64 (a shape).
absl::StatusOr<std::vector<int64_t>> ParseShape(const Json& j, std::string_view path,
                                                std::string_view what) {
  if (!j.is_array()) {
    return Bad(path, absl::StrCat(AV(what), " must be a list of non-negative integers, got a ",
                                  JsonTypeName(j), " (", j.dump(), ")"));
  }
  if (j.size() > kMaxDims) {
    return Bad(path, absl::StrCat(AV(what), " has ", j.size(), " dims; at most ", kMaxDims,
                                  " are supported"));
  }
  std::vector<int64_t> out;
  out.reserve(j.size());
  for (const Json& d : j) {
    if (d.is_number_unsigned()) {
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Bad(path, absl::StrCat(AV(what), " has a dim too large for int64: ", v));
      }
      out.push_back(static_cast<int64_t>(v));
    } else if (d.is_number_integer()) {
      const int64_t v = d.get<int64_t>();
      if (v < 0) return Bad(path, absl::StrCat(AV(what), " has a negative dim: ", j.dump()));
      out.push_back(v);
    } else {
      return Bad(path, absl::StrCat(AV(what), " must be a list of non-negative integers, found ",
                                    d.dump(), " (a ", JsonTypeName(d), ") in ", j.dump()));
    }
  }
  return out;
}

std::string SizeText(const std::vector<int64_t>& s) { return SizeRepr(s); }

bool StartsWith(const std::vector<int64_t>& shape, const std::vector<int64_t>& prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

absl::Status CheckDevice(const Json& level, std::string_view path, std::string_view what) {
  auto it = level.find("device");
  if (it == level.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return Bad(path, absl::StrCat(AV(what), "\"device\" must be a string, got a ",
                                  JsonTypeName(*it), " (", it->dump(), ")"));
  }
  const std::string& d = it->get_ref<const std::string&>();
  if (d == "cpu" || d == "None" || (d.rfind("cpu:", 0) == 0 && d.size() > 4 &&
                                    d.find_first_not_of("0123456789", 4) == std::string::npos)) {
    return absl::OkStatus();
  }
  return Bad(path, absl::StrCat(AV(what), "device '", d,
                                "' is not supported: memory-mapped tensors live on the CPU"));
}

bool IsTensorDictType(const std::string& t) {
  // "<class 'tensordict._td.TensorDict'>" and older module paths ("tensordict.tensordict...").
  static constexpr std::string_view kSuffix = ".TensorDict'>";
  return t.rfind("<class 'tensordict.", 0) == 0 && t.size() >= kSuffix.size() &&
         t.compare(t.size() - kSuffix.size(), kSuffix.size(), kSuffix.data(), kSuffix.size()) == 0;
}

// True when nlohmann::json can write `s` (valid UTF-8).
bool Utf8Ok(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

absl::Status CheckWritableJsonImpl(const nlohmann::json& j, int depth, std::string_view what) {
  if (depth > kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(AV(what), ": JSON nested deeper than ", kMaxJsonDepth, " levels"));
  }
  switch (j.type()) {
    case nlohmann::json::value_t::number_float:
      if (!std::isfinite(j.get<double>())) {
        return absl::InvalidArgumentError(absl::StrCat(
            AV(what), ": the number ", j.get<double>(),
            " cannot be stored in JSON (it would be written as null)"));
      }
      return absl::OkStatus();
    case nlohmann::json::value_t::string:
      if (!Utf8Ok(j.get_ref<const std::string&>())) {
        return absl::InvalidArgumentError(
            absl::StrCat(AV(what), ": a string is not valid UTF-8, which JSON cannot hold"));
      }
      return absl::OkStatus();
    case nlohmann::json::value_t::array:
      for (const auto& e : j) {
        absl::Status s = CheckWritableJsonImpl(e, depth + 1, what);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    case nlohmann::json::value_t::object:
      for (const auto& [k, e] : j.items()) {
        if (!Utf8Ok(k)) {
          return absl::InvalidArgumentError(absl::StrCat(
              AV(what), ": an object key is not valid UTF-8, which JSON cannot hold"));
        }
        absl::Status s = CheckWritableJsonImpl(e, depth + 1, what);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded:
      return absl::InvalidArgumentError(
          absl::StrCat(AV(what), ": a ", j.type_name(), " JSON value cannot be written"));
    default:
      return absl::OkStatus();
  }
}

}  // namespace

std::string EscapeKey(std::string_view key) {
  if (key.empty()) return "%";
  if (key == ".") return "%2E";
  if (key == "..") return "%2E%2E";
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(key.size());
  for (unsigned char c : key) {
    if (NeedsEscape(c)) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::optional<std::string> UnescapeKey(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      out.push_back(name[i]);
      continue;
    }
    if (name.size() == 1) return std::string();  // "%" is the empty key
    if (i + 2 >= name.size()) return std::nullopt;
    const int hi = HexValue(name[i + 1]), lo = HexValue(name[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  // Only the spelling EscapeKey produces names a key (no lowercase hex, no needless escapes).
  if (EscapeKey(out) != name) return std::nullopt;
  return out;
}

bool IsReservedKey(std::string_view key) {
  return key == "shape" || key == "device" || key == "_type";
}

std::string EntryFileName(std::string_view key, EntryKind kind) {
  std::string name = EscapeKey(key);
  if (kind == EntryKind::kTensor) name.append(kTensorSuffix);
  return name;
}

absl::StatusOr<int64_t> TensorBytes(const std::vector<int64_t>& shape, c10::ScalarType dtype,
                                    std::string_view what) {
  if (shape.size() > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(AV(what), ": ", shape.size(),
                                                   " dims; at most ", kMaxDims,
                                                   " are supported"));
  }
  int64_t n = static_cast<int64_t>(c10::elementSize(dtype));
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(AV(what), ": negative dim in ", SizeText(shape)));
    }
    if (d == 0) zero = true;
  }
  if (zero) return int64_t{0};
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(absl::StrCat(
          AV(what), ": a tensor of shape ", SizeText(shape), " and dtype ", DtypeName(dtype),
          " has more bytes than fit in int64"));
    }
    n *= d;
  }
  return n;
}

absl::StatusOr<LevelMeta> ParseLevelMeta(std::string_view text, std::string_view path) {
  absl::StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  if (!j.is_object()) {
    return Bad(path, absl::StrCat("expected a JSON object, got a ", JsonTypeName(j)));
  }
  LevelMeta meta;
  auto shape_it = j.find("shape");
  if (shape_it == j.end()) {
    return Bad(path, "missing \"shape\" (the batch size), expected e.g. \"shape\": [3, 4]");
  }
  absl::StatusOr<std::vector<int64_t>> batch = ParseShape(*shape_it, path, "\"shape\"");
  if (!batch.ok()) return batch.status();
  meta.batch_size = *std::move(batch);
  absl::Status dev = CheckDevice(j, path, "");
  if (!dev.ok()) return dev;
  auto type_it = j.find("_type");
  if (type_it != j.end()) {
    if (!type_it->is_string()) {
      return Bad(path, absl::StrCat("\"_type\" must be a string, got a ", JsonTypeName(*type_it)));
    }
    const std::string& t = type_it->get_ref<const std::string&>();
    if (!IsTensorDictType(t)) {
      return Bad(path, absl::StrCat("\"_type\" is ", t,
                                    ", which is not supported (only TensorDict levels, ",
                                    AV(kTensorDictType), ", are)"));
    }
  }
  for (const auto& [key, entry] : j.items()) {
    if (IsReservedKey(key)) continue;
    const std::string what = absl::StrCat("entry ", Quote(key));
    if (!entry.is_object()) {
      return Bad(path, absl::StrCat(what, " must be an object describing a tensor, TensorDict or "
                                          "NonTensorData, got a ",
                                    JsonTypeName(entry), " (", entry.dump(), ")"));
    }
    EntryMeta e;
    e.key = key;
    auto t = entry.find("type");
    if (t != entry.end()) {
      if (!t->is_string()) {
        return Bad(path, absl::StrCat(what, ": \"type\" must be a string, got a ",
                                      JsonTypeName(*t)));
      }
      const std::string& ts = t->get_ref<const std::string&>();
      if (ts == "TensorDict") {
        e.kind = EntryKind::kTensorDict;
      } else if (ts == "NonTensorData") {
        e.kind = EntryKind::kNonTensor;
      } else {
        return Bad(path, absl::StrCat(what, " has type '", ts,
                                      "', which is not supported (TensorDict and NonTensorData "
                                      "are)"));
      }
      e.file_name = EntryFileName(key, e.kind);
      meta.entries.push_back(std::move(e));
      continue;
    }
    auto dt = entry.find("dtype");
    if (dt == entry.end()) {
      return Bad(path, absl::StrCat(what, " has neither \"type\" nor \"dtype\": ", entry.dump()));
    }
    if (!dt->is_string()) {
      return Bad(path, absl::StrCat(what, ": \"dtype\" must be a string such as "
                                          "\"torch.float32\", got a ",
                                    JsonTypeName(*dt), " (", dt->dump(), ")"));
    }
    std::optional<c10::ScalarType> dtype = ParseDtypeName(dt->get_ref<const std::string&>());
    if (!dtype) {
      return Bad(path, absl::StrCat(what, " has unknown dtype '",
                                    dt->get_ref<const std::string&>(),
                                    "' (expected torch.float32, torch.int64, torch.bool, ...)"));
    }
    e.dtype = *dtype;
    auto sh = entry.find("shape");
    if (sh == entry.end()) return Bad(path, absl::StrCat(what, " has no \"shape\""));
    absl::StatusOr<std::vector<int64_t>> shape =
        ParseShape(*sh, path, absl::StrCat(what, "'s \"shape\""));
    if (!shape.ok()) return shape.status();
    e.shape = *std::move(shape);
    auto nested = entry.find("is_nested");
    if (nested != entry.end()) {
      if (!nested->is_boolean()) {
        return Bad(path, absl::StrCat(what, ": \"is_nested\" must be true or false, got ",
                                      nested->dump()));
      }
      if (nested->get<bool>()) {
        return Bad(path, absl::StrCat(what, " is a nested (jagged) tensor, which is not "
                                            "supported"));
      }
    }
    absl::Status edev = CheckDevice(entry, path, absl::StrCat(what, ": "));
    if (!edev.ok()) return edev;
    if (!StartsWith(e.shape, meta.batch_size)) {
      return Bad(path, absl::StrCat(what, " has shape ", SizeText(e.shape),
                                    ", which does not start with the batch size ",
                                    SizeText(meta.batch_size)));
    }
    absl::StatusOr<int64_t> nbytes = TensorBytes(e.shape, e.dtype, what);
    if (!nbytes.ok()) return Bad(path, std::string(nbytes.status().message()));
    e.nbytes = *nbytes;
    e.file_name = EntryFileName(key, e.kind);
    meta.entries.push_back(std::move(e));
  }
  return meta;
}

absl::StatusOr<nlohmann::json> ParseNonTensorMeta(std::string_view text, std::string_view path) {
  absl::StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  if (!j.is_object()) {
    return Bad(path, absl::StrCat("expected a JSON object, got a ", JsonTypeName(j)));
  }
  auto t = j.find("_type");
  if (t == j.end() || !t->is_string() ||
      t->get_ref<const std::string&>().find("NonTensorData") == std::string::npos) {
    return Bad(path, absl::StrCat("expected \"_type\": \"", AV(kNonTensorType), "\", got ",
                                  t == j.end() ? std::string("nothing") : t->dump()));
  }
  auto d = j.find("data");
  if (d == j.end()) {
    return Bad(path, "has no \"data\": the value was not stored as JSON (Python pickles such "
                     "values into other.pickle, which is never loaded: loading does not execute "
                     "code)");
  }
  // ordered_json -> json (object keys sorted, like every NonTensorData in the core). The parser
  // accepted only valid UTF-8, so dump() cannot fail; the catch keeps that a status regardless.
  try {
    return nlohmann::json::parse(d->dump());
  } catch (const nlohmann::json::exception& e) {
    return Bad(path, absl::StrCat("\"data\" cannot be read: ", e.what()));
  }
}

std::string LevelMetaJson(const LevelMeta& meta) {
  Json j = Json::object();
  for (const EntryMeta& e : meta.entries) {
    switch (e.kind) {
      case EntryKind::kTensor: {
        Json entry = Json::object();
        entry["device"] = "cpu";
        entry["shape"] = e.shape;
        entry["dtype"] = DtypeName(e.dtype);
        entry["is_nested"] = false;
        j[e.key] = std::move(entry);
        break;
      }
      case EntryKind::kTensorDict:
        j[e.key] = Json{{"type", "TensorDict"}};
        break;
      case EntryKind::kNonTensor:
        j[e.key] = Json{{"type", "NonTensorData"}};
        break;
    }
  }
  j["shape"] = meta.batch_size;
  j["device"] = "cpu";
  j["_type"] = std::string(kTensorDictType);
  return j.dump();
}

std::string NonTensorMetaJson(const nlohmann::json& data) {
  Json j = Json::object();
  j["_type"] = std::string(kNonTensorType);
  j["data"] = Json::parse(data.dump());
  j["_metadata"] = nullptr;
  j["_is_non_tensor"] = true;
  return j.dump();
}

absl::Status CheckWritableJson(const nlohmann::json& data, std::string_view what) {
  return CheckWritableJsonImpl(data, 0, what);
}

absl::Status CheckWritableKey(std::string_view key, std::string_view what) {
  if (IsReservedKey(key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        AV(what), ": key ", Quote(key),
        " cannot be memory-mapped: meta.json uses that name for the level's own ", AV(key),
        " (rename the key)"));
  }
  if (!Utf8Ok(std::string(key))) {
    return absl::InvalidArgumentError(absl::StrCat(
        AV(what), ": key ", Quote(key), " is not valid UTF-8, which meta.json cannot hold"));
  }
  return absl::OkStatus();
}

}  // namespace memmap_format
}  // namespace td
