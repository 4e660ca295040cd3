#include "td/consolidate/metadata.h"

#include <limits>
#include <map>
#include <set>
#include <utility>

#include "td/core/dtype.h"
#include "td/core/internal/structure_check.h"
#include "td/core/nested_key.h"

namespace td {
namespace internal {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void Bad(const std::string& file, const std::string& what) {
  TD_FAIL(MemmapError, "consolidated file ", file, ": ", what);
}

bool IsReservedLevelKey(std::string_view k) {
  return k == "cls" || k == "non_tensors" || k == "leaves" || k == "cls_metadata" || k == "size";
}

// At most this many characters of a JSON value in a message.
std::string Short(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

// An integer that fits int64 (JSON numbers above 2^63-1 parse as unsigned).
int64_t GetInt(const Json& v, const std::string& file, const std::string& what) {
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Bad(file, c10::str(what, " is out of range: ", v.get<uint64_t>(), " is larger than ",
                       std::numeric_limits<int64_t>::max(), " (int64)"));
  }
  if (!v.is_number_integer()) Bad(file, what + " is not an integer: " + Short(v));
  return v.get<int64_t>();
}


// Parses `text`, refusing an object that names one key twice (nlohmann would keep the last value
// and drop the other silently).
Json ParseUnique(std::string_view text, const std::string& file) {
  std::vector<std::set<std::string>> open;  // the keys seen in each enclosing object
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Json::parse_event_t::key && !open.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!open.back().insert(k).second) {
        Bad(file, c10::str("the metadata names the key ", NestedKey(k).repr(),
                           " twice in one JSON object; every key must be unique"));
      }
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::exception& e) {
    Bad(file, std::string("malformed metadata JSON: ") + e.what());
  }
}

struct Parser {
  const std::string& file;
  int64_t data_bytes;

  std::string Repr(const std::vector<std::string>& parts) const {
    return parts.empty() ? std::string("(root)") : NestedKey(parts).repr();
  }

  // Shape that starts with `batch`, or a MemmapError naming `what`.
  void CheckBatchPrefix(const std::string& what, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& batch, const char* shape_name) const {
    absl::Status ok = internal::CheckStartsWith(shape, batch, shape_name);
    if (!ok.ok()) Bad(file, c10::str(what, ": ", ok.message(), " of its level"));
  }

  LeafMeta Leaf(const std::string& key, const std::string& where, const Json& m) const {
    if (!m.is_array() || (m.size() != 5 && m.size() != 6)) {
      Bad(file, "leaf " + where + ": expected [dtype, shape, start, stop, pad], got " + Short(m));
    }
    if (m.size() == 6) Bad(file, "leaf " + where + " is part of a nested tensor (unsupported)");
    if (!m[0].is_string()) Bad(file, "leaf " + where + ": dtype is not a string");
    // NOTE [ Structure validation ]: dtype, shape and byte count by the shared rules.
    absl::StatusOr<at::ScalarType> dtype = internal::DtypeFromName(m[0].get<std::string>());
    if (!dtype.ok()) Bad(file, c10::str("leaf ", where, ": ", dtype.status().message()));
    absl::StatusOr<std::vector<int64_t>> shape = internal::ShapeFromJson(m[1]);
    if (!shape.ok()) Bad(file, c10::str("leaf ", where, ": the shape ", shape.status().message()));
    absl::StatusOr<int64_t> nbytes = internal::TensorBytes(*shape, *dtype);
    if (!nbytes.ok()) Bad(file, c10::str("leaf ", where, ": ", nbytes.status().message()));
    LeafMeta leaf;
    leaf.key = key;
    leaf.dtype = *dtype;
    leaf.shape = *std::move(shape);
    leaf.start = GetInt(m[2], file, "leaf " + where + ": start");
    leaf.stop = GetInt(m[3], file, "leaf " + where + ": stop");
    leaf.pad = GetInt(m[4], file, "leaf " + where + ": pad");
    const int64_t es = static_cast<int64_t>(c10::elementSize(*dtype));
    leaf.nbytes = *nbytes;
    const int64_t start = leaf.start, stop = leaf.stop, pad = leaf.pad;
    if (start < 0 || stop < start || stop > data_bytes || pad < 0 || pad > stop - start) {
      Bad(file, c10::str("leaf ", where, ": byte range [", start, ", ", stop, ") pad ", pad,
                         " is outside the data (", data_bytes, " bytes)"));
    }
    if ((stop - start) % es != 0 ||
        (pad == 0 ? leaf.nbytes != stop - start : leaf.nbytes > stop - start)) {
      Bad(file, c10::str("leaf ", where, ": byte range [", start, ", ", stop, ") pad ", pad,
                         " does not hold ", SizeRepr(leaf.shape), " ", DtypeName(*dtype)));
    }
    return leaf;
  }

  // The level `m` at `parts` (the root: none), `depth` levels below the root. A sub-level's depth
  // is checked before descending into it (td::kMaxNestingDepth).
  LevelMeta Level(const Json& m, const std::vector<std::string>& parts, int depth) const {
    const std::string where = Repr(parts);
    if (!m.is_object()) Bad(file, "level " + where + " is not an object");
    auto need = [&](const char* field) -> const Json& {
      auto it = m.find(field);
      if (it == m.end()) Bad(file, c10::str("level ", where, " has no \"", field, "\""));
      return *it;
    };
    const Json& cls = need("cls");
    if (!cls.is_string() || cls.get<std::string>() != "TensorDict") {
      Bad(file, "level " + where + " is a " + Short(cls) +
                    "; only TensorDict levels are supported");
    }
    LevelMeta level;
    if (!parts.empty()) level.key = parts.back();
    const Json& meta = need("cls_metadata");
    if (!meta.is_object()) Bad(file, "level " + where + ": cls_metadata is not an object");
    auto bs = meta.find("batch_size");
    if (bs == meta.end() || !bs->is_array()) {
      Bad(file, "level " + where + ": cls_metadata has no batch_size list");
    }
    absl::StatusOr<std::vector<int64_t>> batch = internal::ShapeFromJson(*bs);
    if (!batch.ok()) {
      Bad(file, c10::str("level ", where, ": the batch_size ", batch.status().message()));
    }
    level.batch_size = *std::move(batch);
    auto dev = meta.find("device");
    level.cpu = dev != meta.end() && dev->is_string() && dev->get<std::string>() == "cpu";
    auto locked = meta.find("is_locked");
    level.locked = locked != meta.end() && locked->is_boolean() && locked->get<bool>();

    // Every name of the level is one entry: a leaf, a non-tensor or a sub-TensorDict.
    std::map<std::string, const char*> kinds;
    auto sub_parts = [&](const std::string& k) {
      std::vector<std::string> p = parts;
      p.push_back(k);
      return p;
    };
    auto claim = [&](const std::string& k, const char* kind) {
      if (k.empty()) {
        Bad(file, c10::str("level ", where, " has ", kind, " with an empty key ''"));
      }
      auto [it, fresh] = kinds.emplace(k, kind);
      if (!fresh) {
        Bad(file, c10::str("the key ", Repr(sub_parts(k)), " is both ", it->second, " and ", kind,
                           " of level ", where, "; each name of a level is one entry"));
      }
    };
    const Json& non_tensors = need("non_tensors");
    if (!non_tensors.is_object()) Bad(file, "level " + where + ": non_tensors is not an object");
    for (const auto& [k, v] : non_tensors.items()) {
      claim(k, "a non-tensor entry");
      if (!v.is_array() || v.size() < 2 || v.size() > 3) {
        Bad(file, "non-tensor " + Repr(sub_parts(k)) +
                      ": expected [data, batch_size(, device)], got " + Short(v));
      }
      level.non_tensors.push_back({k, v[0]});
    }
    const Json& leaves = need("leaves");
    if (!leaves.is_object()) Bad(file, "level " + where + ": leaves is not an object");
    for (const auto& [k, v] : leaves.items()) {
      claim(k, "a leaf");
      const std::string leaf_where = Repr(sub_parts(k));
      if (k.rfind("<NJT", 0) == 0) {
        Bad(file, "leaf " + leaf_where + " is part of a nested tensor (unsupported)");
      }
      level.leaves.push_back(Leaf(k, leaf_where, v));
      CheckBatchPrefix("leaf " + leaf_where, level.leaves.back().shape, level.batch_size,
                       "shape");
    }
    for (const auto& [k, v] : m.items()) {
      if (IsReservedLevelKey(k)) continue;
      claim(k, "a sub-TensorDict");
      const std::vector<std::string> sp = sub_parts(k);
      if (absl::Status ok = internal::CheckNestingDepth(depth + 1); !ok.ok()) {
        Bad(file, c10::str("level ", Repr(sp), " is nested ", depth + 1, " levels deep: ",
                           ok.message()));
      }
      level.subs.push_back(Level(v, sp, depth + 1));
      CheckBatchPrefix("sub-TensorDict " + Repr(sp), level.subs.back().batch_size,
                       level.batch_size, "batch size");
    }
    return level;
  }
};

}  // namespace

LevelMeta ParseFileMetadata(std::string_view text, const std::string& file, int64_t data_bytes) {
  if (absl::Status ok = internal::CheckJsonDepth(text); !ok.ok()) {
    Bad(file, c10::str("the metadata ", ok.message(), " (TensorDicts nest at most ",
                       kMaxNestingDepth, " levels, td::kMaxNestingDepth)"));
  }
  const Json meta = ParseUnique(text, file);
  return Parser{file, data_bytes}.Level(meta, {}, 0);
}

}  // namespace internal
}  // namespace td
