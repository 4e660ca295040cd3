// TensorDict printing (repr, operator<<, under the print options of td/core/print_options.h) and
// torch interop (IValue, to_dict, tolist, state dicts).
#include "td/core/tensordict.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "td/core/dtype.h"
#include "td/core/internal/repr.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/storage.h"

namespace td {
namespace {

using internal::StartsWith;

std::string NonTensorRepr(const nlohmann::json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

void Indent(std::string* out, int n) { out->append(static_cast<size_t>(n), ' '); }

const char* PyBool(bool b) { return b ? "True" : "False"; }

// Python's f"{x:.4g}".
std::string Format4g(double x) {
  if (std::isnan(x)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", x);
  return buf;
}

// The `plain` summary of upstream's repr: mean / std of floating-point and complex tensors (in
// float64), min / max of the others, [] when empty.
std::string PlainSummary(const at::Tensor& t) {
  if (t.numel() == 0) return "[]";
  if (t.is_floating_point() || t.is_complex()) {
    const at::Tensor d = (t.is_complex() ? at::real(t) : t).to(at::kDouble);
    return absl::StrCat("mean=", Format4g(d.mean().item<double>()),
                        ", std=", Format4g(d.std().item<double>()));
  }
  if (t.scalar_type() == at::kBool) {
    return absl::StrCat("min=", PyBool(t.min().item<bool>()), ", max=",
                        PyBool(t.max().item<bool>()));
  }
  return absl::StrCat("min=", t.min().item<int64_t>(), ", max=", t.max().item<int64_t>());
}

std::string TensorRepr(const TensorDict& level, const std::string& key, const EntryMeta& m,
                       const PrintOptions& o) {
  const bool shared = level.storage().capabilities().has(Capability::kCrossProcess);
  std::vector<std::string> parts;
  if (o.show_shape()) parts.push_back("shape=" + SizeRepr(m.shape));
  if (o.show_field_device()) parts.push_back("device=" + m.device.str());
  if (o.show_dtype()) parts.push_back("dtype=" + DtypeRepr(m.dtype));
  if (o.show_field_is_shared()) parts.push_back(absl::StrCat("is_shared=", PyBool(shared)));
  const bool extended = o.show_grad() || o.show_is_contiguous() || o.show_is_view() ||
                        o.show_storage_size() || o.plain();
  if (extended && !m.ragged()) {
    const at::Tensor t = level.storage().get(key)->tensor();  // computed on a lazy level
    if (!t.is_nested() && t.layout() == at::kStrided) {
      if (o.show_grad()) parts.push_back(absl::StrCat("requires_grad=", PyBool(t.requires_grad())));
      if (o.show_is_contiguous()) {
        parts.push_back(absl::StrCat("is_contiguous=", PyBool(t.is_contiguous())));
      }
      if (o.show_is_view()) parts.push_back(absl::StrCat("is_view=", PyBool(t.is_view())));
      if (o.show_storage_size()) {
        parts.push_back(absl::StrCat("storage_size=", t.storage().nbytes()));
      }
      if (o.plain() && !t.is_meta()) parts.push_back(PlainSummary(t));  // meta: no values
    }
  }
  return absl::StrCat("Tensor(", absl::StrJoin(parts, ", "), ")");
}

void ReprImpl(const TensorDict& td, int indent, const PrintOptions& o, std::string* out);

std::string EntryReprImpl(const TensorDict& level, const std::string& key, const PrintOptions& o,
                          int indent) {
  const Storage& s = level.storage();
  std::optional<EntryMeta> m = s.meta(key);  // ragged dims print as -1
  if (!m) TD_FAIL(KeyError, "no entry ", NestedKey(key).repr());
  if (m->kind == EntryMeta::Kind::kTensor) return TensorRepr(level, key, *m, o);
  std::optional<Value> v = s.get(key);
  if (v->is_tensordict()) {
    std::string out;
    ReprImpl(v->tensordict(), indent, o, &out);
    return out;
  }
  return absl::StrCat("NonTensorData(data=", NonTensorRepr(v->non_tensor()),
                      ", batch_size=", SizeRepr(level.batch_size()), ", device=",
                      level.device() ? level.device()->str() : "None", ")");
}

void ReprImpl(const TensorDict& td, int indent, const PrintOptions& o, std::string* out) {
  std::vector<std::string> keys = td.storage().keys();
  internal::SortForPrinting(keys, o);
  out->append("TensorDict(\n");
  Indent(out, indent + 4);
  out->append("fields={");
  for (size_t i = 0; i < keys.size(); ++i) {
    out->append(i ? ",\n" : "\n");
    Indent(out, indent + 8);
    out->append(keys[i]).append(": ");
    out->append(EntryReprImpl(td, keys[i], o, indent + 8));
  }
  if (keys.empty()) {
    out->append("\n");
    Indent(out, indent + 4);
  }
  out->append("}");
  for (const std::string& line : internal::LevelLines(td, o)) {
    out->append(",\n");
    Indent(out, indent + 4);
    out->append(line);
  }
  out->append(")");
}

c10::IValue JsonToIValue(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return c10::IValue();
    case nlohmann::json::value_t::boolean:
      return c10::IValue(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return c10::IValue(j.get<int64_t>());
    case nlohmann::json::value_t::number_float:
      return c10::IValue(j.get<double>());
    case nlohmann::json::value_t::string:
      return c10::IValue(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const auto& e : j) list.push_back(JsonToIValue(e));
      return c10::IValue(list);
    }
    case nlohmann::json::value_t::object: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& [k, e] : j.items()) dict.insert(k, JsonToIValue(e));
      return c10::IValue(dict);
    }
    default:
      TD_FAIL(TypeError, "non-tensor data ", j.dump(), " cannot be converted to an IValue");
  }
}

std::optional<nlohmann::json> IValueToJson(const c10::IValue& v) {
  if (v.isNone()) return nlohmann::json(nullptr);
  if (v.isBool()) return nlohmann::json(v.toBool());
  if (v.isInt()) return nlohmann::json(v.toInt());
  if (v.isDouble()) return nlohmann::json(v.toDouble());
  if (v.isString()) return nlohmann::json(v.toStringRef());
  if (v.isList()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const c10::IValue& e : v.toListRef()) {
      std::optional<nlohmann::json> je = IValueToJson(e);
      if (!je) return std::nullopt;
      arr.push_back(*std::move(je));
    }
    return arr;
  }
  return std::nullopt;
}

}  // namespace

// ---- printing and interop -----------------------------------------------------------------

namespace internal {

std::string EntryRepr(const TensorDict& level, const std::string& key,
                      const PrintOptions& options, int indent) {
  return EntryReprImpl(level, key, options, indent);
}

void SortForPrinting(std::vector<std::string>& keys, const PrintOptions& options) {
  if (options.sort_key()) {
    std::vector<std::pair<std::string, std::string>> by;  // (sort key, key)
    by.reserve(keys.size());
    for (std::string& k : keys) by.emplace_back(options.sort_key()(k), std::move(k));
    std::stable_sort(by.begin(), by.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = std::move(by[i].second);
  } else if (options.sort_keys() == KeyOrder::kAlphabetical) {
    std::sort(keys.begin(), keys.end());
  }
}

std::vector<std::string> LevelLines(const TensorDict& td, const PrintOptions& options) {
  std::vector<std::string> out;
  if (options.show_batch_size()) out.push_back("batch_size=" + SizeRepr(td.batch_size()));
  if (options.show_device()) {
    out.push_back(absl::StrCat("device=", td.device() ? td.device()->str() : "None"));
  }
  if (options.show_is_shared()) {
    out.push_back(absl::StrCat(
        "is_shared=", PyBool(td.storage().capabilities().has(Capability::kCrossProcess))));
  }
  return out;
}

}  // namespace internal

std::string TensorDict::repr() const {
  std::string out;
  ReprImpl(*this, 0, get_printoptions(), &out);
  return out;
}

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

namespace {

// The entries of `td` as a nested dict; with `metadata`, each level also holds its batch size and
// device (to_ivalue), read back by from_ivalue (the "__batch_size" / "__device" entries of
// upstream's legacy state dicts).
c10::IValue ToDict(const TensorDict& td, bool metadata) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  if (metadata) {
    dict.insert(std::string(kIValueBatchSizeKey), c10::IValue(td.batch_size().vec()));
    dict.insert(std::string(kIValueDeviceKey),
                td.device() ? c10::IValue(td.device()->str()) : c10::IValue());
  }
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    if (v.is_tensor()) {
      dict.insert(k, v.tensor());
    } else if (v.is_tensordict()) {
      dict.insert(k, ToDict(v.tensordict(), metadata));
    } else {
      dict.insert(k, JsonToIValue(v.non_tensor()));
    }
  }
  return c10::IValue(dict);
}

}  // namespace

c10::IValue TensorDict::to_ivalue() const { return ToDict(*this, /*metadata=*/true); }

c10::IValue TensorDict::to_dict() const { return ToDict(*this, /*metadata=*/false); }

c10::IValue TensorDict::tolist() const {
  if (batch_dims() == 0) return to_dict();
  c10::impl::GenericList list(c10::AnyType::get());
  for (const TensorDict& element : unbind(0)) list.push_back(element.tolist());
  return c10::IValue(list);
}

TensorDict TensorDict::from_ivalue(const c10::IValue& value, at::IntArrayRef batch_size,
                                   std::optional<at::Device> device) {
  if (!value.isGenericDict()) {
    TD_FAIL(TypeError, "from_ivalue needs a dict, got ", value.tagKind());
  }
  const c10::impl::GenericDict dict = value.toGenericDict();
  // Without a batch size, the one to_ivalue recorded (NOTE in tensordict.h at from_ivalue).
  const bool recorded = batch_size.empty() && dict.contains(std::string(kIValueBatchSizeKey));
  std::vector<int64_t> batch = batch_size.vec();
  if (recorded) {
    const c10::IValue& b = dict.at(std::string(kIValueBatchSizeKey));
    if (!b.isIntList()) {
      TD_FAIL(TypeError, "from_ivalue: '", kIValueBatchSizeKey, "' must be a list of ints, got ",
                      b.tagKind());
    }
    batch = b.toIntVector();
    const c10::IValue& d = dict.contains(std::string(kIValueDeviceKey))
                               ? dict.at(std::string(kIValueDeviceKey))
                               : c10::IValue();
    if (!device && d.isString()) device = at::Device(d.toStringRef());
  }
  TensorDict out({}, batch, device);
  for (const auto& entry : dict) {
    if (!entry.key().isString()) {
      TD_FAIL(TypeError, "from_ivalue needs string keys, got a ", entry.key().tagKind(), " key");
    }
    const std::string& k = entry.key().toStringRef();
    if (k == kIValueBatchSizeKey || k == kIValueDeviceKey) continue;
    const c10::IValue& v = entry.value();
    if (v.isTensor()) {
      out.set(NestedKey(k), v.toTensor());
    } else if (v.isGenericDict()) {
      out.set(NestedKey(k), from_ivalue(v, recorded ? at::IntArrayRef() : batch_size, device));
    } else if (std::optional<nlohmann::json> j = IValueToJson(v)) {
      out.set(NestedKey(k), NonTensorData(*std::move(j)));
    } else {
      TD_FAIL(TypeError, "from_ivalue: key '", k, "' holds a ", v.tagKind(),
                      ", which is not a tensor, dict or JSON-like value");
    }
  }
  return out;
}

torch::OrderedDict<std::string, at::Tensor> TensorDict::state_dict(
    std::string_view separator) const {
  torch::OrderedDict<std::string, at::Tensor> out;
  for (const Item& item : items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (item.second.is_tensor()) out.insert(item.first.join(separator), item.second.tensor());
  }
  return out;
}

TensorDict& TensorDict::load_state_dict(const torch::OrderedDict<std::string, at::Tensor>& state,
                                        bool strict, std::string_view separator) {
  std::vector<std::pair<NestedKey, at::Tensor>> existing, fresh;
  absl::flat_hash_set<NestedKey> seen;
  std::vector<std::string> unexpected;
  for (const auto& entry : state) {
    std::vector<std::string> parts = absl::StrSplit(entry.key(), absl::string_view(separator.data(), separator.size()));
    NestedKey key(parts);
    seen.insert(key);
    std::optional<Value> mine = find(key);
    if (mine && mine->is_tensor()) {
      if (mine->tensor().sizes() != entry.value().sizes()) {
        TD_FAIL(ValueError, "load_state_dict: key '", entry.key(), "' has shape ",
                         SizeRepr(entry.value().sizes()), " but the TensorDict holds ",
                         SizeRepr(mine->tensor().sizes()));
      }
      existing.emplace_back(key, entry.value());
    } else if (mine) {
      TD_FAIL(TypeError, "load_state_dict: key '", entry.key(), "' is a ", mine->kind(),
                      " in the TensorDict, not a Tensor");
    } else if (strict) {
      unexpected.push_back(entry.key());
    } else {
      if (!StartsWith(entry.value().sizes(), batch_size())) {
        TD_FAIL(BatchSizeError, "load_state_dict: key '", entry.key(), "' has shape ",
                             SizeRepr(entry.value().sizes()),
                             ", which does not start with the batch size ",
                             SizeRepr(batch_size()));
      }
      fresh.emplace_back(key, entry.value());
    }
  }
  if (strict) {
    std::vector<NestedKey> missing;
    for (const NestedKey& k : keys(KeysOptions().include_nested(true).leaves_only(true))) {
      if (!seen.contains(k) && get_value(k).is_tensor()) missing.push_back(k);
    }
    if (!missing.empty() || !unexpected.empty()) {
      TD_FAIL(KeyError, "load_state_dict: missing keys ", KeysRepr(missing), ", unexpected keys ",
                     KeysRepr(unexpected));
    }
  }
  for (auto& [k, t] : existing) set_(k, t);
  for (auto& [k, t] : fresh) set(k, t);
  return *this;
}

// ---- state dict with metadata -------------------------------------------------------------

StateDict TensorDict::state_dict_with_metadata(std::string_view separator) const {
  StateDict out;
  out.tensors = state_dict(separator);
  out.metadata.insert("", LevelMetadata{batch_size().vec(), device()});
  for (const Item& item : items(KeysOptions().include_nested(true))) {
    if (!item.second.is_tensordict()) continue;
    const TensorDict& sub = item.second.tensordict();
    out.metadata.insert(item.first.join(separator),
                        LevelMetadata{sub.batch_size().vec(), sub.device()});
  }
  return out;
}

TensorDict& TensorDict::load_state_dict(const StateDict& state, bool strict,
                                        std::string_view separator) {
  for (const auto& entry : state.metadata) {
    const std::optional<at::Device>& d = entry.value().device;
    if (entry.key().empty() && d && device() && *d != *device()) {
      TD_FAIL(ValueError, "load_state_dict: the state dict was saved on device ", d->str(),
                       " but this TensorDict is on ", device()->str());
    }
  }
  load_state_dict(state.tensors, strict, separator);
  // Root first, then each nested level (whose batch size starts with its parent's).
  for (const auto& entry : state.metadata) {
    TensorDict level = *this;
    if (!entry.key().empty()) {
      std::vector<std::string> parts;
      std::string_view rest = entry.key();
      for (size_t p; (p = rest.find(separator)) != std::string_view::npos;
           rest.remove_prefix(p + separator.size())) {
        parts.emplace_back(rest.substr(0, p));
      }
      parts.emplace_back(rest);
      const NestedKey k(parts);
      if (!contains(k)) continue;
      level = get_tensordict(k);
    }
    if (level.batch_size() != at::IntArrayRef(entry.value().batch_size)) {
      level.set_batch_size(entry.value().batch_size);
    }
  }
  return *this;
}

TensorDict TensorDict::from_state_dict(const StateDict& state, std::string_view separator) {
  std::optional<at::Device> device;
  if (state.metadata.contains("")) device = state.metadata[""].device;
  TensorDict out({}, {}, device);
  out.load_state_dict(state, /*strict=*/false, separator);
  return out;
}

}  // namespace td
