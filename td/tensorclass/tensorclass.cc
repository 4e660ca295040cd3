// Non-template helpers of td::TensorClass (td/tensorclass/tensorclass.h): error messages and
// printing.
#include "td/tensorclass/tensorclass.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Functions.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/core/internal/repr.h"
#include "td/core/storage.h"

namespace td {
namespace internal::tensorclass {
namespace {

std::string JsonTypeName(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "bool";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "integer";
    case nlohmann::json::value_t::number_float:
      return "number";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::object:
      return "object";
    default:
      return "value";
  }
}

std::string NamesRepr(const std::vector<std::string_view>& names) {
  std::string s = "[";
  for (size_t i = 0; i < names.size(); ++i) absl::StrAppend(&s, i ? ", '" : "'", std::string(names[i]), "'");
  return s + "]";
}

}  // namespace

std::string FieldValue::kind() const {
  switch (v_.index()) {
    case 0:
      return "None";
    case 1:
      return "Tensor";
    case 2:
      return "TensorDict";
    default:
      return "JSON " + JsonTypeName(json());
  }
}

std::string JsonMismatch(const nlohmann::json& j, std::string_view want) {
  bool ok = want == "json" || (want == "string" && j.is_string()) ||
            (want == "bool" && j.is_boolean()) ||
            (want == "integer" && j.is_number_integer()) || (want == "number" && j.is_number());
  return ok ? std::string() : "a JSON " + JsonTypeName(j) + " (" + j.dump() + ")";
}

std::string IntegerOutOfRange(const nlohmann::json& j, int64_t lo, uint64_t hi,
                              std::string_view type) {
  bool ok = true;
  if (j.is_number_unsigned()) {
    ok = j.get<uint64_t>() <= hi;
  } else if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    ok = v >= lo && (v < 0 || static_cast<uint64_t>(v) <= hi);
  }
  if (ok) return std::string();
  return absl::StrCat("a JSON integer (", j.dump(), ") outside the range of ", std::string(type), " (", lo,
                      " to ", hi, ")");
}

std::string FloatOutOfRange(const nlohmann::json& j) {
  const double d = j.get<double>();
  if (!std::isfinite(d) || std::abs(d) <= static_cast<double>(std::numeric_limits<float>::max())) {
    return std::string();
  }
  return absl::StrCat("a JSON number (", j.dump(),
                      ") outside the range of float (magnitude at most ",
                      std::numeric_limits<float>::max(), ")");
}

void FailFieldType(std::string_view cls, std::string_view name, std::string_view what,
                   std::string_view declared) {
  TD_FAIL(TypeError, cls, " field '", name, "' holds ", what, ", but it is declared as ", declared);
}

void FailMissing(std::string_view cls, const std::vector<std::string>& missing,
                 const std::vector<std::string_view>& fields) {
  std::vector<std::string_view> m(missing.begin(), missing.end());
  TD_FAIL(KeyError, cls, ": missing required field", m.size() > 1 ? "s " : " ", NamesRepr(m),
                 " (fields: ", NamesRepr(fields), ")");
}

void CheckDefault(std::string_view cls, std::string_view name, const Value& value,
                  at::IntArrayRef batch_size) {
  const bool tensor = value.is_tensor();
  if (!tensor && !value.is_tensordict()) return;
  const at::IntArrayRef shape = tensor ? value.tensor().sizes() : value.tensordict().batch_size();
  if (shape.size() >= batch_size.size() && shape.slice(0, batch_size.size()) == batch_size) return;
  TD_FAIL(BatchSizeError, cls, ": the default of field '", name, "' has ",
          tensor ? "shape " : "batch size ", shape, ", which does not start with the batch size ",
          batch_size);
}

std::optional<nlohmann::json> NonTensorTreeAsJson(const TensorDict& td) {
  nlohmann::json out = nlohmann::json::object();
  bool ok = true;
  td.for_each_entry([&](const std::string& k, const Value& v) {
    if (!ok) return;
    if (v.is_tensor()) {
      ok = false;
    } else if (v.is_tensordict()) {
      std::optional<nlohmann::json> j = NonTensorTreeAsJson(v.tensordict());
      if (j) {
        out[k] = *std::move(j);
      } else {
        ok = false;
      }
    } else {
      out[k] = v.non_tensor();
    }
  });
  if (!ok) return std::nullopt;
  return out;
}

void FailFrozen(std::string_view cls, std::string_view what, std::string_view field,
                const char* frozen_by) {
  const std::string of_field = field.empty() ? std::string() : " of field '" + std::string(field) + "'";
  if (frozen_by != nullptr) {
    TD_FAIL(LockedError, cls, " was read from an object of the frozen class ", frozen_by,
            " (kFrozen): ", what, of_field, " is refused; objects of a frozen class, and the "
            "nested classes read from them, stay locked");
  }
  TD_FAIL(LockedError, cls, " is frozen (kFrozen): ", what, of_field,
          " is refused; objects of a frozen class stay locked from construction on");
}

TensorDict FrozenOwner(const TensorDict& td, std::string_view cls) {
  // The key names the class in the LockedError that unlock_() on a handle to `td` raises
  // (NOTE [ Locks span levels ] in td/core/structure.cc).
  TensorDict owner({}, {});
  owner.set(std::string(cls) + " (a kFrozen class: its objects stay locked)", td);
  owner.lock_();
  return owner;
}

std::string UpdateWhat(const TensorDict& other) {
  std::string keys;
  for (const std::string& k : other.storage().keys()) {
    keys += (keys.empty() ? "'" : ", '") + k + "'";
  }
  return keys.empty() ? std::string("update()") : "update() of fields " + keys;
}

void FailUnknown(std::string_view cls, const std::string& name,
                 const std::vector<std::string_view>& fields) {
  TD_FAIL(KeyError, cls, " has no field '", name, "' (fields: ", NamesRepr(fields), ")");
}

std::string KeyMismatch(std::string_view cls, const std::vector<std::string>& missing,
                        const std::vector<std::string>& extra,
                        const std::vector<std::string_view>& fields) {
  if (missing.empty() && extra.empty()) return std::string();
  std::string msg;
  if (!missing.empty()) {
    msg = absl::StrCat("missing field", missing.size() > 1 ? "s " : " ",
                       NamesRepr(std::vector<std::string_view>(missing.begin(), missing.end())));
  }
  if (!extra.empty()) {
    absl::StrAppend(&msg, msg.empty() ? "" : "; ", "key", extra.size() > 1 ? "s " : " ",
                    NamesRepr(std::vector<std::string_view>(extra.begin(), extra.end())),
                    extra.size() > 1 ? " are not fields" : " is not a field");
  }
  absl::StrAppend(&msg, " (fields of ", std::string(cls), ": ", NamesRepr(fields), ")");
  return msg;
}

namespace {
TensorDict FieldsEqualAt(const TensorDict& a, const TensorDict& b, bool equal,
                         const std::string& where) {
  const std::vector<std::string> ka = a.storage().keys();
  const std::vector<std::string> kb = b.storage().keys();
  std::vector<std::string_view> only_a, only_b;
  for (const std::string& k : ka) {
    if (!b.storage().contains(k)) only_a.push_back(k);
  }
  for (const std::string& k : kb) {
    if (!a.storage().contains(k)) only_b.push_back(k);
  }
  if (!only_a.empty() || !only_b.empty()) {
    TD_FAIL(KeyError, "cannot compare: different fields",
                   where.empty() ? std::string() : absl::StrCat(" under '", where, "'"),
                   ": only in the first: ",
                   NamesRepr(only_a), ", only in the second: ", NamesRepr(only_b));
  }
  std::vector<TensorDict::Item> items;
  items.reserve(ka.size());
  for (const std::string& k : ka) {
    Value va = *a.storage().get(k);
    Value vb = *b.storage().get(k);
    if (va.is_tensor() && vb.is_tensor()) {
      items.emplace_back(k, equal ? va.tensor().eq(vb.tensor()) : va.tensor().ne(vb.tensor()));
    } else if (va.is_tensordict() && vb.is_tensordict()) {
      items.emplace_back(k, FieldsEqualAt(va.tensordict(), vb.tensordict(), equal,
                                          where.empty() ? k : absl::StrCat(where, ".", k)));
    } else {
      const bool same = va.is_non_tensor() && vb.is_non_tensor() &&
                        va.non_tensor_data() == vb.non_tensor_data();
      items.emplace_back(k, at::full(a.batch_size(), same == equal, at::kBool));
    }
  }
  return TensorDict(items, a.batch_size(), a.device());
}
}  // namespace

TensorDict FieldsEqual(const TensorDict& a, const TensorDict& b, bool equal) {
  return FieldsEqualAt(a, b, equal, "");
}

std::string PythonTypeString(std::string_view python_name) {
  return absl::StrCat("<class '", std::string(python_name), "'>");
}

std::string Reindent(const std::string& text, int indent) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out.append(static_cast<size_t>(indent), ' ');
  }
  return out;
}

std::string EntryRepr(const TensorDict& td, const std::string& key) {
  return internal::EntryRepr(td, key, get_printoptions(), /*indent=*/0);
}

std::string ClassRepr(std::string_view cls, const TensorDict& td,
                      std::vector<std::pair<std::string, std::string>> fields) {
  const PrintOptions options = get_printoptions();
  std::vector<std::string> names;
  names.reserve(fields.size());
  for (const auto& field : fields) names.push_back(field.first);
  internal::SortForPrinting(names, options);
  std::vector<std::string> lines;
  for (const std::string& name : names) {
    const auto it = std::find_if(fields.begin(), fields.end(),
                                 [&](const auto& f) { return f.first == name; });
    lines.push_back(absl::StrCat("    ", name, "=", Reindent(it->second, 4)));
  }
  for (const std::string& line : internal::LevelLines(td, options)) {
    lines.push_back("    " + line);
  }
  return absl::StrCat(std::string(cls), "(\n", absl::StrJoin(lines, ",\n"), ")");
}

}  // namespace internal::tensorclass
}  // namespace td
