// td::TensorAttrs, td::attrs and td::to(td, attrs) (NOTE [ TensorAttrs records ] in
// td/attrs/attrs.h). attrs() reads each level's metadata (Storage::meta); to() checks the whole
// attrs TensorDict against the source's metadata first, then casts with the leaf map of NOTE
// [ Leaf maps ] (td/core/internal/leaves.h), as TensorDict::to does.
#include "td/attrs/attrs.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"

namespace td {
namespace {

constexpr std::string_view kTag = "TensorAttrs";

// A short description of a JSON value that is not a record, for errors.
std::string Describe(const nlohmann::json& j) {
  std::string text = j.dump();
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return "non-tensor data " + text;
}

// The entry `m` describes, for errors: "a Tensor", "a sub-TensorDict", "non-tensor data".
const char* KindOf(const EntryMeta& m) {
  switch (m.kind) {
    case EntryMeta::Kind::kTensor:
      return "a Tensor";
    case EntryMeta::Kind::kTensorDict:
      return "a sub-TensorDict";
    case EntryMeta::Kind::kNonTensor:
      break;
  }
  return "non-tensor data";
}

// Parses a record; `where` starts every message ("the record", "the attrs entry 'w'").
TensorAttrs ParseRecord(const nlohmann::json& j, const std::string& where) {
  if (!TensorAttrs::is_record(j)) {
    TD_FAIL(TypeError, where, " is ", Describe(j), "; expected a TensorAttrs record "
            "({\"_type\": \"TensorAttrs\", \"tgt_device\": ..., \"tgt_dtype\": ..., "
            "\"tgt_shape\": ...}, as td::attrs makes)");
  }
  TensorAttrs a;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& field = it.key();
    const nlohmann::json& value = it.value();
    if (field == "_type") continue;
    if (field != "tgt_device" && field != "tgt_dtype" && field != "tgt_shape") {
      TD_FAIL(ValueError, where, " has the unknown field \"", field,
              "\" (a TensorAttrs record has tgt_device, tgt_dtype and tgt_shape)");
    }
    if (value.is_null()) continue;
    if (field == "tgt_device") {
      if (!value.is_string()) {
        TD_FAIL(ValueError, where, ": tgt_device is ", value.dump(),
                "; expected a device string such as \"cpu\" or \"cuda:0\", or null");
      }
      try {
        a.tgt_device = at::Device(value.get<std::string>());
      } catch (const c10::Error& e) {
        TD_FAIL(ValueError, where, ": tgt_device ", value.dump(), " is not a device: ",
                e.what_without_backtrace());
      }
    } else if (field == "tgt_dtype") {
      std::optional<at::ScalarType> dtype;
      if (value.is_string()) dtype = ParseDtypeRepr(value.get<std::string>());
      if (!dtype) {
        TD_FAIL(ValueError, where, ": tgt_dtype is ", value.dump(), "; expected the name of "
                "a dtype of this LibTorch as Python spells it (\"torch.float32\"), or null");
      }
      a.tgt_dtype = dtype;
    } else {
      bool ok = value.is_array();
      std::vector<int64_t> shape;
      for (size_t i = 0; ok && i < value.size(); ++i) {
        // An unsigned JSON integer past INT64_MAX (2^64 - 1 reads as -1 through get<int64_t>)
        // is no size.
        ok = value[i].is_number_integer() &&
             (value[i].is_number_unsigned()
                  ? value[i].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                  : value[i].get<int64_t>() >= -1);
        if (ok) shape.push_back(value[i].get<int64_t>());
      }
      if (!ok) {
        TD_FAIL(ValueError, where, ": tgt_shape is ", value.dump(), "; expected a list of "
                "sizes (integers >= 0, or -1 for a size that varies), or null");
      }
      a.tgt_shape = std::move(shape);
    }
  }
  return a;
}

// A recorded shape matches the leaf's when they have the same dims and agree on every dim that
// neither side marks -1 (a size that varies between the members of a lazy stack).
bool ShapeMatches(at::IntArrayRef recorded, at::IntArrayRef leaf) {
  if (recorded.size() != leaf.size()) return false;
  for (size_t i = 0; i < leaf.size(); ++i) {
    if (recorded[i] != -1 && leaf[i] != -1 && recorded[i] != leaf[i]) return false;
  }
  return true;
}

TensorAttrs FromMeta(const EntryMeta& m, const AttrsFields& fields) {
  TensorAttrs a;
  if (fields.device()) a.tgt_device = m.device;
  if (fields.dtype()) a.tgt_dtype = m.dtype;
  if (fields.shape()) a.tgt_shape = std::vector<int64_t>(m.shape.begin(), m.shape.end());
  return a;
}

TensorDict AttrsLevel(const TensorDict& level, const AttrsFields& fields) {
  TensorDict out;
  const Storage& s = level.storage();
  for (const std::string& k : s.keys()) {
    const std::optional<EntryMeta> m = s.meta(k);
    if (!m) continue;
    if (m->kind == EntryMeta::Kind::kTensorDict) {
      out.set(k, AttrsLevel(s.get(k)->tensordict(), fields));
    } else if (m->kind == EntryMeta::Kind::kTensor) {
      out.set(k, FromMeta(*m, fields).to_non_tensor());
    }
  }
  return out;
}

// The records of `attrs` that apply to leaves of the source, by key, after every check of to().
struct CastPlan {
  absl::flat_hash_map<NestedKey, TensorAttrs> records;
  bool moves_device = false;  // some record moves its leaf to another device
};

// Checks one level of `attrs` against the source's level at the same key (`source`: nullptr
// when the source has none) and adds the records that cast a leaf to `plan`.
void PlanLevel(const TensorDict& attrs, const TensorDict* source,
               std::vector<std::string>& prefix, CastPlan* plan) {
  const Storage& s = attrs.storage();
  for (const std::string& k : s.keys()) {
    const std::optional<Value> v = s.get(k);
    if (!v) continue;
    prefix.push_back(k);
    const NestedKey key{NestedKey::Parts(prefix.begin(), prefix.end())};
    const std::optional<EntryMeta> m = source ? source->storage().meta(k) : std::nullopt;
    if (v->is_tensordict()) {
      if (m && m->kind != EntryMeta::Kind::kTensorDict) {
        TD_FAIL(TypeError, "to(attrs): the attrs entry ", key.repr(), " is a sub-TensorDict, but "
                "the TensorDict holds ", KindOf(*m), " there");
      }
      std::optional<TensorDict> sub;
      if (m) sub = source->storage().get(k)->tensordict();
      PlanLevel(v->tensordict(), sub ? &*sub : nullptr, prefix, plan);
    } else if (v->is_tensor()) {
      TD_FAIL(TypeError, "to(attrs): the attrs entry ", key.repr(), " is a Tensor; expected a "
              "TensorAttrs record (td::attrs makes them)");
    } else {
      const TensorAttrs r = ParseRecord(v->non_tensor(), "to(attrs): the attrs entry " + key.repr());
      if (m) {
        if (m->kind != EntryMeta::Kind::kTensor) {
          TD_FAIL(TypeError, "to(attrs): the attrs entry ", key.repr(), " is a TensorAttrs record, "
                  "but the TensorDict holds ", KindOf(*m), " there (records describe tensors)");
        }
        if (r.tgt_shape && !ShapeMatches(*r.tgt_shape, m->shape)) {
          TD_FAIL(ValueError, "to(attrs): the record for ", key.repr(), " has tgt_shape ",
                  SizeRepr(*r.tgt_shape), " but the leaf has shape ", SizeRepr(m->shape),
                  " (record without shapes, td::AttrsFields().shape(false), to cast TensorDicts "
                  "of other shapes with one spec)");
        }
        if (r.tgt_device || r.tgt_dtype) {
          if (r.tgt_device && *r.tgt_device != m->device) plan->moves_device = true;
          plan->records.emplace(key, r);
        }
      }
    }
    prefix.pop_back();
  }
}

}  // namespace

TensorAttrs TensorAttrs::from_tensor(const at::Tensor& tensor, const AttrsFields& fields) {
  if (!tensor.defined()) TD_FAIL(ValueError, "TensorAttrs::from_tensor: the tensor is undefined");
  TensorAttrs a;
  if (fields.device()) a.tgt_device = tensor.device();
  if (fields.dtype()) a.tgt_dtype = tensor.scalar_type();
  if (fields.shape()) a.tgt_shape = tensor.sizes().vec();
  return a;
}

TensorAttrs TensorAttrs::get(const TensorDict& attrs, KeyRef key) {
  const Value v = attrs.get_value(key);
  if (!v.is_non_tensor()) {
    TD_FAIL(TypeError, "the attrs entry ", key.repr(), " is a ", v.kind(),
            "; expected a TensorAttrs record (td::attrs makes them)");
  }
  return ParseRecord(v.non_tensor(), "the attrs entry " + key.repr());
}

nlohmann::json TensorAttrs::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["_type"] = kTag;
  j["tgt_device"] = tgt_device ? nlohmann::json(tgt_device->str()) : nlohmann::json();
  j["tgt_dtype"] = tgt_dtype ? nlohmann::json(DtypeRepr(*tgt_dtype)) : nlohmann::json();
  j["tgt_shape"] = tgt_shape ? nlohmann::json(*tgt_shape) : nlohmann::json();
  return j;
}

bool TensorAttrs::is_record(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  const auto it = j.find("_type");
  return it != j.end() && it->is_string() && it->get<std::string>() == kTag;
}

TensorAttrs TensorAttrs::from_json(const nlohmann::json& j) { return ParseRecord(j, "the record"); }

std::ostream& operator<<(std::ostream& os, const TensorAttrs& a) {
  os << "TensorAttrs(tgt_device=" << (a.tgt_device ? a.tgt_device->str() : "None")
     << ", tgt_dtype=" << (a.tgt_dtype ? DtypeRepr(*a.tgt_dtype) : "None")
     << ", tgt_shape=" << (a.tgt_shape ? SizeRepr(*a.tgt_shape) : "None") << ")";
  return os;
}

TensorDict attrs(const TensorDict& td, const AttrsFields& fields) {
  return AttrsLevel(td, fields);
}

TensorDict to(const TensorDict& td, const TensorDict& attrs, bool non_blocking) {
  CastPlan plan;
  std::vector<std::string> prefix;
  PlanLevel(attrs, &td, prefix, &plan);
  internal::LeafTree tree(td);
  std::vector<at::Tensor> out = internal::MapEach(
      tree,
      [&](size_t i, const at::Tensor& x) {
        if (plan.records.empty()) return x;
        const auto it = plan.records.find(tree.key(i));
        if (it == plan.records.end()) return x;
        const TensorAttrs& r = it->second;
        if (r.tgt_device && r.tgt_dtype) return x.to(*r.tgt_device, *r.tgt_dtype, non_blocking);
        if (r.tgt_device) return x.to(*r.tgt_device, x.scalar_type(), non_blocking);
        return x.to(*r.tgt_dtype, non_blocking);
      },
      "casting", parallel::ParallelOptions());
  TensorDict result = tree.Rebuild(std::move(out), td.batch_size(), /*check=*/false);
  if (plan.moves_device) result.clear_device_();
  return result;
}

}  // namespace td
