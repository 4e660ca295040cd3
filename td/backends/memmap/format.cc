#include "td/backends/memmap/format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"
#include "td/core/internal/structure_check.h"

namespace td {
namespace internal {
namespace memmap {
namespace {

using Json = nlohmann::ordered_json;
using structure::LevelKind;

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool NeedsEscape(unsigned char c) {
  static constexpr std::string_view kEscaped = "/<>:\"|?*\\ %";
  return c < 0x20 || c == 0x7f || kEscaped.find(static_cast<char>(c)) != std::string_view::npos;
}

// EscapeKey's hex digits: the only spelling UnescapeKey accepts.
constexpr std::string_view kHex = "0123456789ABCDEF";

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

// True for "shape", "device" and "_type", which cannot be keys in meta.json.
bool IsReservedKey(std::string_view key) {
  return key == "shape" || key == "device" || key == "_type";
}

template <class... Parts>
absl::Status Bad(std::string_view path, const Parts&... parts) {
  return absl::DataLossError(absl::StrCat(AV(path), ": ", parts...));
}

absl::StatusOr<Json> ParseJson(std::string_view text, std::string_view path) {
  if (text.size() > kMaxMetaBytes) {
    return Bad(path, "file of ", text.size(), " bytes is larger than the ", kMaxMetaBytes,
               " bytes a meta.json may have");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Bad(path, "empty file (an interrupted write?), expected a JSON object");
  }
  absl::StatusOr<Json> j = structure::ParseJson<Json>(text);
  if (j.ok()) return j;
  const std::string m(j.status().message());
  return Bad(path, structure::RuleOf(j.status()) == structure::Rule::kJsonSyntax
                       ? absl::StrCat("malformed JSON: ", m)
                       : m);
}

absl::Status CheckDevice(const Json& level, std::string_view path, std::string_view what) {
  auto it = level.find("device");
  if (it == level.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return Bad(path, AV(what), "\"device\" must be a string, got a ", it->type_name(), " (",
               it->dump(), ")");
  }
  const std::string& d = it->get_ref<const std::string&>();
  if (d == "cpu" || d == "None" || (d.rfind("cpu:", 0) == 0 && d.size() > 4 &&
                                    d.find_first_not_of("0123456789", 4) == std::string::npos)) {
    return absl::OkStatus();
  }
  return Bad(path, AV(what), "device '", d,
             "' is not supported: memory-mapped tensors live on the CPU");
}

// True when nlohmann::json can write the string `j` (valid UTF-8).
bool Utf8Ok(const nlohmann::json& j) {
  try {
    (void)j.dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// Python's class name in "<class 'module.Name'>": {module, Name}; nullopt for another spelling.
std::optional<std::pair<std::string, std::string>> SplitClass(const std::string& t) {
  static constexpr std::string_view kOpen = "<class '", kClose = "'>";
  if (t.size() < kOpen.size() + kClose.size() || t.compare(0, kOpen.size(), kOpen.data()) != 0 ||
      t.compare(t.size() - kClose.size(), kClose.size(), kClose.data()) != 0) {
    return std::nullopt;
  }
  const std::string q = t.substr(kOpen.size(), t.size() - kOpen.size() - kClose.size());
  // A typed MetaData is "tensordict.tensorclass.MetaData[int]": the brackets may hold dots.
  const size_t bracket = q.find('[');
  const size_t dot = q.rfind('.', bracket == std::string::npos ? std::string::npos : bracket);
  if (dot == std::string::npos) return std::make_pair(std::string(), q);
  return std::make_pair(q.substr(0, dot), q.substr(dot + 1));
}

bool IsNonTensorName(std::string_view name) {
  return name == "NonTensorData" || name == "MetaData" ||
         (name.size() > 9 && name.substr(0, 9) == "MetaData[");
}

// The TensorDict level `level` of the structure `b` builds, from its meta.json `j` (NOTE
// [ Structure codec ] in td/structure/structure.h: the builder applies the structure rules).
absl::StatusOr<LevelMeta> ParseLevelJson(const Json& j, std::string_view path,
                                         structure::Builder& b, structure::Level& level) {
  LevelMeta meta;
  auto shape_it = j.find("shape");
  if (shape_it == j.end()) {
    return Bad(path, "missing \"shape\" (the batch size), expected e.g. \"shape\": [3, 4]");
  }
  absl::Status batch = SetBatchSize(b, level, *shape_it, path, "\"shape\" ");
  if (!batch.ok()) return batch;
  meta.batch_size = level.batch_size();
  if (absl::Status dev = CheckDevice(j, path, ""); !dev.ok()) return dev;
  const auto add = [&](EntryMeta e) {
    e.file_name = EntryFileName(e.key, e.kind);
    e.legacy_file_name = LegacyFileName(e.key, e.kind).value_or("");
    if (e.legacy_file_name == e.file_name) e.legacy_file_name.clear();
    meta.entries.push_back(std::move(e));
  };
  for (const auto& [key, entry] : j.items()) {
    if (IsReservedKey(key)) continue;
    // Python's reader skips fields that are not objects ("there can be other metadata").
    if (!entry.is_object()) continue;
    const std::string what = absl::StrCat("entry ", Quote(key));
    EntryMeta e;
    e.key = key;
    auto t = entry.find("type");
    if (t != entry.end()) {
      if (!t->is_string() || t->get_ref<const std::string&>().empty()) {
        return Bad(path, what, ": \"type\" must be a class name such as \"TensorDict\", got ",
                   t->dump());
      }
      e.type_name = t->get_ref<const std::string&>();
      e.kind = IsNonTensorName(e.type_name) || e.type_name == "NonTensorStack"
                   ? EntryKind::kNonTensor
                   : EntryKind::kTensorDict;
      add(std::move(e));
      continue;
    }
    auto dt = entry.find("dtype");
    if (dt == entry.end()) {
      return Bad(path, what, " has neither \"type\" nor \"dtype\": ", entry.dump());
    }
    if (!dt->is_string()) {
      return Bad(path, what, ": \"dtype\" must be a string such as \"torch.float32\", got a ",
                 dt->type_name(), " (", dt->dump(), ")");
    }
    // The dtype and shape by the builder's readers, in the order this reader always read them.
    absl::StatusOr<c10::ScalarType> dtype =
        structure::Dtype::Name(dt->get_ref<const std::string&>()).Read();
    if (!dtype.ok()) {
      return Bad(path, what, ": ", dtype.status().message(),
                 " (expected torch.float32, torch.int64, torch.bool, ...)");
    }
    e.dtype = *dtype;
    auto sh = entry.find("shape");
    if (sh == entry.end()) return Bad(path, what, " has no \"shape\"");
    absl::StatusOr<std::vector<int64_t>> shape = structure::Sizes(*sh).Read();
    if (!shape.ok()) {
      return Bad(path, what, "'s \"shape\" ", shape.status().message());
    }
    e.shape = *std::move(shape);
    auto nested = entry.find("is_nested");
    if (nested != entry.end() && !nested->is_null()) {
      if (!nested->is_boolean()) {
        return Bad(path, what, ": \"is_nested\" must be true or false, got ", nested->dump());
      }
      e.is_nested = nested->get<bool>();
    }
    absl::Status edev = CheckDevice(entry, path, absl::StrCat(what, ": "));
    if (!edev.ok()) return edev;
    if (e.is_nested) {
      // The shape of the sizes: [number of components, dims of each].
      if (e.shape.size() != 2) {
        return Bad(path, what, " is a nested tensor whose \"shape\" (the shape of its sizes) is ",
                   SizeRepr(e.shape), "; expected [components, dims]");
      }
      if (!meta.batch_size.empty() && e.shape[0] != meta.batch_size[0]) {
        return Bad(path, what, " is a nested tensor of ", e.shape[0],
                   " components, which does not match the batch size ", SizeRepr(meta.batch_size));
      }
      if (e.shape[1] + 1 < static_cast<int64_t>(meta.batch_size.size())) {
        return Bad(path, what, " is a nested tensor of ", e.shape[1] + 1,
                   " dims, fewer than the batch size ", SizeRepr(meta.batch_size));
      }
      absl::StatusOr<int64_t> nbytes = TensorBytes(e.shape, c10::kLong, what);
      if (!nbytes.ok()) return Bad(path, nbytes.status().message());
      e.nbytes = *nbytes;
    } else {
      // The builder's leaf: its shape starts with the batch size, its bytes fit in int64.
      absl::StatusOr<const structure::Entry*> leaf = b.AddLeaf(level, key, e.dtype, e.shape);
      if (!leaf.ok()) return Bad(path, what, ": ", leaf.status().message());
      e.nbytes = (*leaf)->nbytes;
    }
    add(std::move(e));
  }
  return meta;
}

absl::Status ParseStackDim(const Json& j, std::string_view path, int64_t* dim) {
  auto it = j.find("stack_dim");
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > static_cast<int64_t>(kMaxDims)) {
    return Bad(path, "a stack needs \"stack_dim\": a dim from 0 to ", kMaxDims, ", got ",
               it == j.end() ? std::string("nothing") : it->dump());
  }
  *dim = it->get<int64_t>();
  return absl::OkStatus();
}

// Makes `out`'s level, of kind `kind` (none: non-tensor data), at `place` (the directory at
// `path`).
absl::Status Place(const DirPlace& place, std::optional<LevelKind> kind, std::string_view path,
                   DirMeta* out) {
  if (place.fill != nullptr && kind != LevelKind::kTensorDict) {
    return Bad(path, "must hold a TensorDict level (the tensorclass's tensors)");
  }
  if (!kind) return absl::OkStatus();
  out->node = place.fill;
  if (out->node != nullptr) return absl::OkStatus();
  if (place.parent == nullptr) {
    out->node = &place.builder->Root(*kind);
    return absl::OkStatus();
  }
  absl::StatusOr<structure::Level*> level =
      place.builder->AddLevel(*place.parent, place.key, *kind);
  if (!level.ok()) return Bad(path, level.status().message());
  out->node = *level;
  return absl::OkStatus();
}

absl::StatusOr<DirMeta> ParseDirJson(const Json& j, std::string_view path, const DirPlace& place) {
  if (!j.is_object()) {
    return Bad(path, "expected a JSON object, got a ", j.type_name());
  }
  DirMeta out;
  auto type_it = j.find("_type");
  if (type_it != j.end()) {
    if (!type_it->is_string()) {
      return Bad(path, "\"_type\" must be a string, got a ", type_it->type_name());
    }
    out.type_name = type_it->get_ref<const std::string&>();
  }
  std::optional<std::pair<std::string, std::string>> cls;
  if (!out.type_name.empty()) {
    cls = SplitClass(out.type_name);
    if (!cls) {
      return Bad(path, "\"_type\" is ", out.type_name, ", expected a Python class such as ",
                 AV(kTensorDictType));
    }
  }
  const bool ours = cls && (cls->first == "tensordict" || cls->first.rfind("tensordict.", 0) == 0);
  const std::string name = cls ? cls->second : "TensorDict";
  if (ours && name == "LazyStackedTensorDict") {
    out.type = DirType::kLazyStack;
    if (absl::Status ok = Place(place, LevelKind::kLazyStack, path, &out); !ok.ok()) return ok;
    if (absl::Status ok = ParseStackDim(j, path, &out.stack_dim); !ok.ok()) return ok;
    return out;
  }
  const bool stack = ours && name == "NonTensorStack";
  if (stack || (ours && IsNonTensorName(name))) {
    out.type = stack ? DirType::kNonTensorStack : DirType::kNonTensorData;
    out.metadata = !stack && name != "NonTensorData";
    if (absl::Status ok = Place(place, std::nullopt, path, &out); !ok.ok()) return ok;
    auto d = j.find("data");
    if (stack) {
      if (absl::Status ok = ParseStackDim(j, path, &out.stack_dim); !ok.ok()) return ok;
      if (d == j.end() || d->is_null()) {
        return Bad(
            path, "a NonTensorStack without \"data\" (expected the stacked values as a JSON list)");
      }
      if (d->is_string()) {
        return Bad(path, "the NonTensorStack's values were pickled into ",
                   d->get_ref<const std::string&>(),
                   ", which is never loaded (loading does not execute code)");
      }
      if (!d->is_array()) {
        return Bad(path, "a NonTensorStack's \"data\" must be a list, got a ", d->type_name());
      }
    } else if (d == j.end()) {
      return Bad(path,
                 "has no \"data\": the value was not stored as JSON (Python pickles such values "
                 "into other.pickle, which is never loaded: loading does not execute code)");
    }
    out.data = nlohmann::json(*d);  // object keys sorted, like every NonTensorData in the core
    return out;
  }
  if (j.contains("custom_op")) {
    return Bad(path, "\"_type\" is ", out.type_name, ", a lazy view (", j["custom_op"].dump(),
               ") of the TensorDict in _source/, which is not supported: load ",
               AV(path.substr(0, path.rfind('/') + 1)), "_source instead");
  }
  if (j.contains("shape") || !cls || (ours && name == "TensorDict")) {
    // A TensorDict level (also subclasses, and older module paths such as
    // "tensordict.tensordict.TensorDict").
    out.type = DirType::kTensorDict;
    if (absl::Status ok = Place(place, LevelKind::kTensorDict, path, &out); !ok.ok()) return ok;
    absl::StatusOr<LevelMeta> level = ParseLevelJson(j, path, *place.builder, *out.node);
    if (!level.ok()) return level.status();
    out.level = *std::move(level);
    return out;
  }
  if (ours) {
    return Bad(path, "\"_type\" is ", out.type_name,
               ", which is not supported (TensorDict, LazyStackedTensorDict, NonTensorData, "
               "NonTensorStack, MetaData and tensorclasses are)");
  }
  // A tensorclass: its non-tensor fields are here, its tensors in _tensordict/ (which fills the
  // same level, DirPlace::fill).
  out.type = DirType::kTensorClass;
  if (absl::Status ok = Place(place, LevelKind::kTensorClass, path, &out); !ok.ok()) return ok;
  for (const auto& [key, value] : j.items()) {
    if (key == "_type") continue;
    out.fields.emplace_back(key, nlohmann::json(value));
  }
  return out;
}

}  // namespace

std::string EscapeKey(std::string_view key) {
  if (key.empty()) return "%";
  if (key == ".") return "%2E";
  if (key == "..") return "%2E%2E";
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
    const size_t hi = kHex.find(name[i + 1]), lo = kHex.find(name[i + 2]);
    if (hi == std::string_view::npos || lo == std::string_view::npos) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  // Only the spelling EscapeKey produces names a key (no lowercase hex, no needless escapes).
  if (EscapeKey(out) != name) return std::nullopt;
  return out;
}

std::string EntryFileName(std::string_view key, EntryKind kind) {
  std::string name = EscapeKey(key);
  if (kind == EntryKind::kTensor) name.append(kTensorSuffix);
  return name;
}

absl::StatusOr<int64_t> TensorBytes(const std::vector<int64_t>& shape, c10::ScalarType dtype,
                                    std::string_view what) {
  absl::StatusOr<int64_t> n = internal::TensorBytes(shape, dtype);
  if (!n.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(AV(what), ": ", n.status().message()));
  }
  return n;
}

absl::StatusOr<DirMeta> ParseDirMeta(std::string_view text, std::string_view path,
                                     const DirPlace& place) {
  absl::StatusOr<Json> parsed = ParseJson(text, path);
  if (!parsed.ok()) return parsed.status();
  structure::Builder own;  // no builder: a root of its own
  const DirPlace own_place{&own, nullptr, "", nullptr};
  absl::StatusOr<DirMeta> dir = ParseDirJson(*parsed, path, place.builder ? place : own_place);
  if (dir.ok() && !place.builder) dir->node = nullptr;
  return dir;
}

absl::Status SetBatchSize(structure::Builder& b, structure::Level& level,
                          const structure::Sizes& batch, std::string_view meta_path,
                          std::string_view what) {
  absl::Status ok = b.SetBatchSize(level, batch);
  if (ok.ok()) return ok;
  if (structure::RuleOf(ok) != structure::Rule::kSubBatch) {
    return Bad(meta_path, AV(what), ok.message());
  }
  return Bad(meta_path, "batch size ", SizeRepr(*batch.Read()),
             " does not start with the parent's batch size ",
             SizeRepr(level.parent()->batch_size()));
}

absl::StatusOr<LevelMeta> ParseLevelMeta(std::string_view text, std::string_view path) {
  absl::StatusOr<DirMeta> dir = ParseDirMeta(text, path);
  if (!dir.ok()) return dir.status();
  if (dir->type != DirType::kTensorDict) {
    return Bad(path, "\"_type\" is ", dir->type_name, ", expected a TensorDict level (",
               AV(kTensorDictType), ")");
  }
  return std::move(dir->level);
}

std::optional<std::string> LegacyFileName(std::string_view key, EntryKind kind) {
  if (key.find_first_of(std::string_view("/\\\0", 3)) != std::string_view::npos) {
    return std::nullopt;
  }
  const auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (key.size() >= 2 && alpha(key[0]) && key[1] == ':') return std::nullopt;
  if (kind != EntryKind::kTensor) {
    if (key.empty() || key == "." || key == "..") return std::nullopt;
    return std::string(key);
  }
  return absl::StrCat(AV(key), AV(kTensorSuffix));
}

std::string NestedShapeFileName(std::string_view file_name) {
  // Path(name).with_suffix(".shape.memmap"): the suffix is from the last dot, unless that dot
  // is the first character or the last.
  const size_t dot = file_name.rfind('.');
  std::string_view stem = file_name;
  if (dot != std::string_view::npos && dot > 0 && dot + 1 < file_name.size()) {
    stem = file_name.substr(0, dot);
  }
  return absl::StrCat(AV(stem), ".shape.memmap");
}

absl::Status ResolveEntryFiles(std::vector<EntryMeta>* entries,
                               const std::function<bool(const std::string&)>& present,
                               std::string_view dir) {
  const auto needs_file = [](const EntryMeta& e) {
    return e.kind != EntryKind::kTensor || e.is_nested || e.nbytes > 0;
  };
  // Written by a writer before 0.13 when some entry that needs a file has only its raw name.
  const auto has_legacy = [&](const EntryMeta& e) {
    return !e.legacy_file_name.empty() && present(e.legacy_file_name);
  };
  const bool legacy = std::any_of(entries->begin(), entries->end(), [&](const EntryMeta& e) {
    return needs_file(e) && !present(e.file_name) && has_legacy(e);
  });
  for (EntryMeta& e : *entries) {
    const bool escaped = present(e.file_name);
    std::string chosen = has_legacy(e) && (legacy || !escaped) ? e.legacy_file_name
                         : escaped                             ? e.file_name
                                                               : "";
    if (chosen.empty() && needs_file(e)) {
      static constexpr const char* kWhat[] = {  // by EntryKind
          "tensor file", "TensorDict directory", "NonTensorData directory"};
      return absl::DataLossError(absl::StrCat(
          AV(dir), "/", e.file_name, " is missing: ", AV(dir), "/meta.json describes key ",
          Quote(e.key), " as a ", kWhat[static_cast<int>(e.kind)],
          e.legacy_file_name.empty()
              ? std::string()
              : absl::StrCat(" (nor is there ", AV(dir), "/", e.legacy_file_name,
                             ", the name writers before 0.13 used)")));
    }
    e.file_name = std::move(chosen);
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ParseNonTensorMeta(std::string_view text, std::string_view path) {
  absl::StatusOr<DirMeta> dir = ParseDirMeta(text, path);
  if (!dir.ok()) return dir.status();
  if (dir->type != DirType::kNonTensorData || dir->type_name.empty()) {
    return Bad(path, "expected \"_type\": \"", AV(kNonTensorType), "\", got ",
               dir->type_name.empty() ? std::string("nothing") : dir->type_name);
  }
  return std::move(dir->data);
}

std::string LevelMetaJson(const LevelMeta& meta) {
  Json j = Json::object();
  for (const EntryMeta& e : meta.entries) {
    if (e.kind == EntryKind::kTensor) {
      j[e.key] = Json{{"device", "cpu"},
                      {"shape", e.shape},
                      {"dtype", DtypeName(e.dtype)},
                      {"is_nested", e.is_nested}};
    } else {
      const char* type = e.kind == EntryKind::kTensorDict ? "TensorDict" : "NonTensorData";
      j[e.key] = Json{{"type", e.type_name.empty() ? type : e.type_name}};
    }
  }
  j["shape"] = meta.batch_size;
  j["device"] = "cpu";
  j["_type"] = std::string(kTensorDictType);
  return j.dump();
}

std::string StackMetaJson(int64_t stack_dim, const nlohmann::json* values) {
  if (values == nullptr) {
    return Json{{"_type", std::string(kLazyStackType)}, {"stack_dim", stack_dim}}.dump();
  }
  return Json{{"_type", std::string(kNonTensorStackType)},
              {"stack_dim", stack_dim},
              {"device", nullptr},
              {"data", Json::parse(values->dump())}}
      .dump();
}

std::string NonTensorMetaJson(const nlohmann::json& data, bool metadata) {
  return Json{{"_type", std::string(metadata ? kMetaDataType : kNonTensorType)},
              {"data", Json::parse(data.dump())},
              {"_metadata", nullptr},
              {"_is_non_tensor", true}}
      .dump();
}

namespace {

// CheckWritableJson of `j`, `depth` levels into the value checked.
absl::Status CheckJsonAt(const nlohmann::json& j, std::string_view what, int depth) {
  const auto bad = [&](const auto&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(AV(what), ": ", parts...));
  };
  if (depth > kMaxJsonDepth) return bad("JSON nested deeper than ", kMaxJsonDepth, " levels");
  if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    return bad("the number ", j.get<double>(),
               " cannot be stored in JSON (it would be written as null)");
  }
  if (j.is_string() && !Utf8Ok(j)) {
    return bad("a string is not valid UTF-8, which JSON cannot hold");
  }
  if (j.is_binary() || j.is_discarded()) {
    return bad("a ", j.type_name(), " JSON value cannot be written");
  }
  if (!j.is_structured()) return absl::OkStatus();
  for (const auto& it : j.items()) {
    if (j.is_object() && !Utf8Ok(nlohmann::json(it.key()))) {
      return bad("an object key is not valid UTF-8, which JSON cannot hold");
    }
    if (absl::Status s = CheckJsonAt(it.value(), what, depth + 1); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWritableJson(const nlohmann::json& data, std::string_view what) {
  return CheckJsonAt(data, what, 0);
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

}  // namespace memmap
}  // namespace internal
}  // namespace td
