#include "td/core/tensordict.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "td/core/dtype.h"
#include "td/core/leaves.h"
#include "td/core/storage.h"

namespace td {
namespace {

bool StartsWith(at::IntArrayRef shape, at::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

std::vector<int64_t> CheckedBatch(at::IntArrayRef batch_size) {
  for (int64_t d : batch_size) {
    if (d < 0) Fail<ValueError>("batch size ", SizeRepr(batch_size), " has a negative dim");
  }
  return batch_size.vec();
}

// The entry `key` of `s`, without copying it when the backend holds Values; a lazy backend's
// results are kept alive in `*holder`. nullptr when absent.
const Value* Lookup(const Storage& s, std::string_view key, std::optional<Value>* holder) {
  if (s.holds_values()) return s.peek(key);
  *holder = s.get(key);
  return *holder ? &**holder : nullptr;
}

// Walks a nested key; nullptr when any level is missing or is not a TensorDict. The result is
// valid while `holders` lives and the TensorDict is not written.
const Value* LookupNested(const Storage& root, const NestedKey& key,
                          std::optional<Value> (&holders)[2]) {
  const Storage* s = &root;
  const Value* v = nullptr;
  for (size_t i = 0; i < key.size(); ++i) {
    v = Lookup(*s, key[i], &holders[i % 2]);
    if (v == nullptr) return nullptr;
    if (i + 1 < key.size()) {
      if (!v->is_tensordict()) return nullptr;
      s = &v->tensordict().storage();
    }
  }
  return v;
}

// Calls fn(full_key, value) for each entry of `td` as KeysOptions asks, depth first.
template <class Fn>
void ForEachEntry(const TensorDict& td, const KeysOptions& options, const NestedKey* prefix,
                  const Fn& fn) {
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    const bool is_td = v->is_tensordict();
    if (!(is_td && options.leaves_only())) fn(full, *v);
    if (is_td && options.include_nested()) ForEachEntry(v->tensordict(), options, &full, fn);
  }
}

// Adds "while <what> key K" context to an exception thrown by user code, keeping its type.
template <class Body>
auto WithKeyContext(const NestedKey& key, const char* what, Body&& body) {
  try {
    return body();
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("while ", what, " key ", key.repr()));
    throw;
  } catch (const std::exception& e) {
    Fail<c10::Error>(e.what(), "\n(while ", what, " key ", key.repr(), ")");
  }
}

// Entry-wise binary op over two TensorDicts with the same keys.
TensorDict ZipImpl(const TensorDict& a, const TensorDict& b,
                   const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& fn,
                   const std::function<at::Tensor(const Value&, const Value&)>& other_fn,
                   const NestedKey* prefix) {
  const Storage& sa = a.storage();
  const Storage& sb = b.storage();
  std::vector<std::string> ka = sa.keys();
  std::vector<std::string> kb = sb.keys();
  std::vector<std::string> only_a, only_b;
  for (const auto& k : ka) {
    if (!sb.contains(k)) only_a.push_back(k);
  }
  for (const auto& k : kb) {
    if (!sa.contains(k)) only_b.push_back(k);
  }
  if (!only_a.empty() || !only_b.empty()) {
    Fail<KeyError>("the TensorDicts have different keys", prefix ? " under " : "",
                   prefix ? prefix->repr() : "", ": only in the first: ", KeysRepr(only_a),
                   ", only in the second: ", KeysRepr(only_b));
  }
  TensorDict out(MakeDenseStorage(a.batch_size().vec(), a.device()));
  for (const std::string& k : ka) {
    Value va = *sa.get(k);
    Value vb = *sb.get(k);
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (va.is_tensordict() && vb.is_tensordict()) {
      out.set(k, ZipImpl(va.tensordict(), vb.tensordict(), fn, other_fn, &full));
    } else if (va.is_tensor() && vb.is_tensor()) {
      out.set(k, WithKeyContext(full, "combining", [&] { return fn(va.tensor(), vb.tensor()); }));
    } else {
      out.set(k, other_fn(va, vb));
    }
  }
  return out;
}

void SetLockedRecursive(const TensorDict& td, bool locked) {
  td.storage().set_locked(locked);
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (v && v->is_tensordict()) SetLockedRecursive(v->tensordict(), locked);
  }
}

// Checks that every entry of `td` fits batch size `nb` (nested TensorDicts either start with it
// or can be given it); throws BatchSizeError naming the first that does not.
void CheckBatchFits(const TensorDict& td, at::IntArrayRef nb, const NestedKey* prefix) {
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);  // never materialises a lazy entry
    if (!m) continue;
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (m->kind == EntryMeta::Kind::kTensor) {
      if (!StartsWith(m->shape, nb)) {
        Fail<BatchSizeError>("batch size ", SizeRepr(nb), " does not fit key ", full.repr(),
                             ": its shape ", SizeRepr(m->shape), " does not start with ",
                             SizeRepr(nb));
      }
    } else if (m->kind == EntryMeta::Kind::kTensorDict && !StartsWith(m->shape, nb)) {
      CheckBatchFits(s.get(k)->tensordict(), nb, &full);
    }
  }
}

// This level first: a backend that refuses the batch size (a lazy stack losing its stack dim)
// throws before anything changed.
void ApplyBatch(const TensorDict& td, const std::vector<int64_t>& nb) {
  td.storage().set_batch_size(nb);
  const Storage& s = td.storage();
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);
    if (m && m->kind == EntryMeta::Kind::kTensorDict && !StartsWith(m->shape, nb)) {
      ApplyBatch(s.get(k)->tensordict(), nb);
    }
  }
}

std::string NonTensorRepr(const nlohmann::json& j) {
  return j.is_string() ? j.get<std::string>() : j.dump();
}

void Indent(std::string* out, int n) { out->append(static_cast<size_t>(n), ' '); }

void ReprImpl(const TensorDict& td, int indent, std::string* out) {
  const Storage& s = td.storage();
  const bool shared = s.capabilities().has(Capability::kCrossProcess);
  const char* shared_str = shared ? "True" : "False";
  std::vector<std::string> keys = s.keys();
  std::sort(keys.begin(), keys.end());
  out->append("TensorDict(\n");
  Indent(out, indent + 4);
  out->append("fields={");
  for (size_t i = 0; i < keys.size(); ++i) {
    out->append(i ? ",\n" : "\n");
    Indent(out, indent + 8);
    out->append(keys[i]).append(": ");
    std::optional<EntryMeta> m = s.meta(keys[i]);  // ragged dims print as -1
    if (m->kind == EntryMeta::Kind::kTensor) {
      absl::StrAppend(out, "Tensor(shape=", SizeRepr(m->shape), ", device=", m->device.str(),
                      ", dtype=", DtypeName(m->dtype), ", is_shared=", shared_str, ")");
      continue;
    }
    std::optional<Value> v = s.get(keys[i]);
    if (v->is_tensordict()) {
      ReprImpl(v->tensordict(), indent + 8, out);
    } else {
      absl::StrAppend(out, "NonTensorData(data=", NonTensorRepr(v->non_tensor()),
                      ", batch_size=", SizeRepr(td.batch_size()), ", device=",
                      td.device() ? td.device()->str() : "None", ")");
    }
  }
  if (keys.empty()) {
    out->append("\n");
    Indent(out, indent + 4);
  }
  out->append("},\n");
  Indent(out, indent + 4);
  absl::StrAppend(out, "batch_size=", SizeRepr(td.batch_size()), ",\n");
  Indent(out, indent + 4);
  absl::StrAppend(out, "device=", td.device() ? td.device()->str() : "None", ",\n");
  Indent(out, indent + 4);
  absl::StrAppend(out, "is_shared=", shared_str, ")");
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
      Fail<TypeError>("non-tensor data ", j.dump(), " cannot be converted to an IValue");
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

// ---- Value --------------------------------------------------------------------------------

Value::Value(std::initializer_list<TensorDict::Item> items)
    : v_(std::make_shared<const Items>(items)) {}

std::string_view Value::kind() const {
  switch (v_.index()) {
    case 0:
      return "Tensor";
    case 1:
      return "TensorDict";
    case 2:
      return "NonTensorData";
    default:
      return "dict";
  }
}

const at::Tensor& Value::tensor() const {
  if (!is_tensor()) Fail<TypeError>("expected a Tensor, but the entry is a ", kind());
  return std::get<0>(v_);
}

at::Tensor& Value::mutable_tensor() {
  if (!is_tensor()) Fail<TypeError>("expected a Tensor, but the entry is a ", kind());
  return std::get<0>(v_);
}

const TensorDict& Value::tensordict() const {
  if (!is_tensordict()) Fail<TypeError>("expected a TensorDict, but the entry is a ", kind());
  return std::get<1>(v_);
}

const nlohmann::json& Value::non_tensor() const {
  if (!is_non_tensor()) Fail<TypeError>("expected non-tensor data, but the entry is a ", kind());
  return std::get<2>(v_).data;
}

// ---- construction -------------------------------------------------------------------------

TensorDict::TensorDict() : storage_(MakeDenseStorage({}, std::nullopt)) {}

TensorDict::TensorDict(std::initializer_list<Item> items, at::IntArrayRef batch_size,
                       std::optional<at::Device> device)
    : storage_(MakeDenseStorage(CheckedBatch(batch_size), device)) {
  for (const Item& item : items) set(item.first, item.second);
}

TensorDict::TensorDict(const std::vector<Item>& items, at::IntArrayRef batch_size,
                       std::optional<at::Device> device)
    : storage_(MakeDenseStorage(CheckedBatch(batch_size), device)) {
  for (const Item& item : items) set(item.first, item.second);
}

TensorDict::TensorDict(std::shared_ptr<Storage> storage) : storage_(std::move(storage)) {
  TORCH_CHECK(storage_ != nullptr, "TensorDict needs a storage, got nullptr");
}

// ---- metadata -----------------------------------------------------------------------------

at::IntArrayRef TensorDict::batch_size() const { return storage_->batch_size(); }

int64_t TensorDict::numel() const {
  int64_t n = 1;
  for (int64_t d : batch_size()) n *= d;
  return n;
}

std::optional<at::Device> TensorDict::device() const { return storage_->device(); }

std::string_view TensorDict::backend() const { return storage_->backend_id(); }

TensorDict& TensorDict::set_batch_size(at::IntArrayRef batch_size) {
  std::vector<int64_t> nb = CheckedBatch(batch_size);
  CheckBatchFits(*this, nb, nullptr);
  ApplyBatch(*this, nb);
  return *this;
}

TensorDict& TensorDict::auto_batch_size_(std::optional<int64_t> batch_dims) {
  std::optional<std::vector<int64_t>> common;
  auto narrow = [&](at::IntArrayRef shape) {
    if (!common) {
      common = shape.vec();
      return;
    }
    size_t n = 0;
    while (n < common->size() && n < shape.size() && (*common)[n] == shape[n]) ++n;
    common->resize(n);
  };
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    std::optional<Value> v = s.get(k);
    if (!v) continue;
    if (v->is_tensor()) {
      narrow(v->tensor().sizes());
    } else if (v->is_tensordict()) {
      TensorDict sub = v->tensordict();
      sub.auto_batch_size_();
      narrow(sub.batch_size());
    }
  }
  std::vector<int64_t> nb = common.value_or(std::vector<int64_t>{});
  if (batch_dims && static_cast<int64_t>(nb.size()) > *batch_dims) nb.resize(*batch_dims);
  storage_->set_batch_size(std::move(nb));
  return *this;
}

// ---- reading ------------------------------------------------------------------------------

std::pair<TensorDict, std::string_view> TensorDict::parent_of(const NestedKey& key,
                                                              bool create) const {
  TensorDict cur = *this;
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    std::optional<Value> v = cur.storage_->get(key[i]);
    if (!v) {
      if (!create) fail_missing(key, i);
      if (cur.is_locked()) {
        Fail<LockedError>("cannot create ", NestedKey(key[i]).repr(), " for key ", key.repr(),
                          ": the TensorDict is locked (call unlock_() first)");
      }
      TensorDict sub(cur.storage_->make_empty(cur.batch_size().vec(), cur.device()));
      cur.storage_->set(key[i], sub);
      // Read it back: a backend may store its own form of the value (a lazy stack splits it
      // between its members).
      cur = cur.storage_->get(key[i])->tensordict();
      continue;
    }
    if (!v->is_tensordict()) {
      Fail<KeyError>("key ", key.repr(), " not found: ", NestedKey(key.parts()[i]).repr(),
                     " at depth ", i, " is a ", v->kind(), ", not a TensorDict");
    }
    cur = v->tensordict();
  }
  return {std::move(cur), std::string_view(key.back())};
}

void TensorDict::fail_missing(const NestedKey& key, size_t depth) const {
  // Re-walk to report the level where the lookup failed and the keys that exist there.
  const TensorDict* level = this;
  TensorDict holder;
  for (size_t i = 0; i < depth; ++i) {
    holder = level->storage_->get(key[i])->tensordict();
    level = &holder;
  }
  std::string where;
  if (depth > 0) {
    NestedKey::Parts p(key.parts().begin(), key.parts().begin() + depth);
    where = absl::StrCat(" under ", NestedKey(std::move(p)).repr());
  }
  Fail<KeyError>("key ", key.repr(), " not found in TensorDict: no entry ",
                 NestedKey(key[depth]).repr(), where, "; existing keys",
                 depth > 0 ? " there" : "", ": ", KeysRepr(level->storage_->keys()));
}

std::optional<Value> TensorDict::find(const NestedKey& key) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) return std::nullopt;
  return *v;
}

Value TensorDict::get_value(const NestedKey& key) const {
  std::optional<Value> v = find(key);
  if (!v) {
    parent_of(key, /*create=*/false);  // throws for a missing intermediate level
    fail_missing(key, key.size() - 1);
  }
  return *std::move(v);
}

at::Tensor TensorDict::get(const NestedKey& key) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) get_value(key);  // throws the KeyError
  if (!v->is_tensor()) {
    Fail<TypeError>("entry ", key.repr(), " is a ", v->kind(), ", not a Tensor",
                    v->is_tensordict() ? " (use get_tensordict())" : " (use get_non_tensor())");
  }
  return v->tensor();
}

at::Tensor TensorDict::get(const NestedKey& key, const at::Tensor& default_value) const {
  std::optional<Value> holders[2];
  const Value* v = LookupNested(*storage_, key, holders);
  if (v == nullptr) return default_value;
  if (!v->is_tensor()) {
    Fail<TypeError>("entry ", key.repr(), " is a ", v->kind(), ", not a Tensor");
  }
  return v->tensor();
}

TensorDict TensorDict::get_tensordict(const NestedKey& key) const {
  Value v = get_value(key);
  if (!v.is_tensordict()) {
    Fail<TypeError>("entry ", key.repr(), " is a ", v.kind(), ", not a TensorDict");
  }
  return v.tensordict();
}

nlohmann::json TensorDict::get_non_tensor(const NestedKey& key) const {
  Value v = get_value(key);
  if (!v.is_non_tensor()) {
    Fail<TypeError>("entry ", key.repr(), " is a ", v.kind(), ", not non-tensor data");
  }
  return v.non_tensor();
}

bool TensorDict::contains(const NestedKey& key) const {
  if (!key.is_nested()) return storage_->contains(key.front());
  std::optional<Value> holders[2];
  return LookupNested(*storage_, key, holders) != nullptr;
}

size_t TensorDict::size() const { return storage_->size(); }

std::vector<NestedKey> TensorDict::keys(const KeysOptions& options) const {
  std::vector<NestedKey> out;
  ForEachEntry(*this, options, nullptr,
               [&](const NestedKey& k, const Value&) { out.push_back(k); });
  return out;
}

std::vector<Value> TensorDict::values(const KeysOptions& options) const {
  std::vector<Value> out;
  ForEachEntry(*this, options, nullptr, [&](const NestedKey&, const Value& v) { out.push_back(v); });
  return out;
}

std::vector<TensorDict::Item> TensorDict::items(const KeysOptions& options) const {
  std::vector<Item> out;
  ForEachEntry(*this, options, nullptr,
               [&](const NestedKey& k, const Value& v) { out.emplace_back(k, v); });
  return out;
}

// ---- writing ------------------------------------------------------------------------------

Value TensorDict::validate(Value value, const NestedKey& full_key) const {
  const std::vector<int64_t>& bs = storage_->batch_size();
  const std::optional<at::Device>& device = storage_->device();
  if (value.is_plain_dict()) {
    TensorDict sub(storage_->make_empty(bs, device));
    for (const Item& item : value.plain_dict()) {
      WithKeyContext(full_key, "setting", [&] { sub.set(item.first, item.second); });
    }
    return sub;
  }
  if (value.is_tensor()) {
    const at::Tensor& t = value.tensor();
    if (!t.defined()) Fail<ValueError>("cannot set key ", full_key.repr(), " to an undefined tensor");
    if (!StartsWith(t.sizes(), bs)) {
      Fail<BatchSizeError>("batch size mismatch for key ", full_key.repr(), ": the value's shape ",
                           SizeRepr(t.sizes()), " does not start with the batch size ",
                           SizeRepr(bs));
    }
    if (device && t.device() != *device) return t.to(*device);
    return value;
  }
  if (value.is_tensordict()) {
    const TensorDict& sub = value.tensordict();
    if (sub.storage_ == storage_) {
      Fail<ValueError>("cannot set key ", full_key.repr(), " to the TensorDict itself");
    }
    if (!StartsWith(sub.batch_size(), bs)) {
      Fail<BatchSizeError>("batch size mismatch for key ", full_key.repr(),
                           ": the nested TensorDict's batch size ", SizeRepr(sub.batch_size()),
                           " does not start with the batch size ", SizeRepr(bs));
    }
    if (device && sub.device() != device) return sub.to(*device);
    return value;
  }
  return value;
}

void TensorDict::set_at_level(std::string_view key, Value value, const NestedKey& full_key) {
  Storage& s = *storage_;
  if (s.locked() || !s.capabilities().has(Capability::kNewKeys)) {
    std::optional<Value> current = s.get(key);
    if (!current) {
      if (s.locked()) {
        Fail<LockedError>("cannot add key ", full_key.repr(),
                          ": the TensorDict is locked (call unlock_() first)");
      }
      Fail<KeyError>("cannot add key ", full_key.repr(), ": the '", s.backend_id(),
                     "' backend does not take new keys");
    }
    if (s.locked()) {
      // A locked TensorDict keeps its structure: same-shaped tensors are written in place.
      if (current->is_tensor() && value.is_tensor() &&
          current->tensor().sizes() == value.tensor().sizes()) {
        s.set_(key, value.tensor());
        return;
      }
      if (current->kind() != value.kind() || !value.is_non_tensor()) {
        Fail<LockedError>("cannot replace key ", full_key.repr(), " (", current->kind(),
                          ") with a ", value.kind(),
                          " of another shape: the TensorDict is locked (call unlock_() first)");
      }
    }
  }
  s.set(key, std::move(value));
}

TensorDict& TensorDict::set(const NestedKey& key, Value value) {
  if (!key.is_nested()) {
    set_at_level(key.front(), validate(std::move(value), key), key);
    return *this;
  }
  auto [parent, last] = parent_of(key, /*create=*/true);
  parent.set_at_level(last, parent.validate(std::move(value), key), key);
  return *this;
}

TensorDict& TensorDict::set_non_tensor(const NestedKey& key, nlohmann::json data) {
  return set(key, NonTensorData(std::move(data)));
}

TensorDict& TensorDict::set_(const NestedKey& key, const at::Tensor& value) {
  auto [parent, last] = parent_of(key, /*create=*/false);
  std::optional<EntryMeta> current = parent.storage_->meta(last);
  if (!current) fail_missing(key, key.size() - 1);
  if (current->kind != EntryMeta::Kind::kTensor) {
    Fail<TypeError>("set_ needs a Tensor under key ", key.repr(), ", but the entry is a ",
                    current->kind == EntryMeta::Kind::kTensorDict ? "TensorDict" : "NonTensorData");
  }
  if (!value.defined()) Fail<ValueError>("set_ of key ", key.repr(), " with an undefined tensor");
  if (at::IntArrayRef(current->shape) != value.sizes()) {
    Fail<ValueError>("set_ of key ", key.repr(), ": the value's shape ", SizeRepr(value.sizes()),
                     " differs from the existing tensor's shape ", SizeRepr(current->shape),
                     current->ragged() ? " (-1: the size differs between the stacked parts)" : "");
  }
  parent.storage_->set_(last, value);
  return *this;
}

TensorDict& TensorDict::update(const TensorDict& other) {
  const Storage& so = *other.storage_;
  for (const std::string& k : so.keys()) {
    std::optional<Value> v = so.get(k);
    if (!v) continue;
    if (v->is_tensordict()) {
      std::optional<Value> mine = storage_->get(k);
      if (mine && mine->is_tensordict()) {
        TensorDict target = mine->tensordict();
        target.update(v->tensordict());
        continue;
      }
    }
    set(NestedKey(k), *std::move(v));
  }
  return *this;
}

TensorDict& TensorDict::update(std::initializer_list<Item> items) {
  for (const Item& item : items) {
    if (item.second.is_plain_dict()) {
      std::optional<Value> mine = find(item.first);
      if (mine && mine->is_tensordict()) {
        TensorDict target = mine->tensordict();
        for (const Item& sub : item.second.plain_dict()) {
          target.update({sub});
        }
        continue;
      }
    }
    set(item.first, item.second);
  }
  return *this;
}

TensorDict& TensorDict::update_(const TensorDict& other) {
  std::vector<Item> leaves = other.items(KeysOptions().include_nested(true).leaves_only(true));
  std::vector<at::Tensor> targets;
  targets.reserve(leaves.size());
  for (const Item& item : leaves) {  // validate everything before writing anything
    if (!item.second.is_tensor()) {
      targets.emplace_back();
      continue;
    }
    std::optional<Value> mine = find(item.first);
    if (!mine) fail_missing(item.first, item.first.size() - 1);
    if (!mine->is_tensor()) {
      Fail<TypeError>("update_: entry ", item.first.repr(), " is a ", mine->kind(),
                      ", not a Tensor");
    }
    if (mine->tensor().sizes() != item.second.tensor().sizes()) {
      Fail<ValueError>("update_ of key ", item.first.repr(), ": the value's shape ",
                       SizeRepr(item.second.tensor().sizes()),
                       " differs from the existing tensor's shape ",
                       SizeRepr(mine->tensor().sizes()));
    }
    targets.push_back(mine->tensor());
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (targets[i].defined()) {
      set_(leaves[i].first, leaves[i].second.tensor());
    } else {
      set(leaves[i].first, leaves[i].second);
    }
  }
  return *this;
}

TensorDict& TensorDict::del_(const NestedKey& key) {
  auto [parent, last] = parent_of(key, /*create=*/false);
  if (!parent.storage_->contains(last)) fail_missing(key, key.size() - 1);
  if (parent.is_locked()) {
    Fail<LockedError>("cannot delete key ", key.repr(),
                      ": the TensorDict is locked (call unlock_() first)");
  }
  parent.storage_->erase(last);
  return *this;
}

Value TensorDict::pop(const NestedKey& key) {
  Value v = get_value(key);
  del_(key);
  return v;
}

Value TensorDict::pop(const NestedKey& key, Value default_value) {
  if (!contains(key)) return default_value;
  return pop(key);
}

TensorDict& TensorDict::rename_key_(const NestedKey& old_key, const NestedKey& new_key,
                                    bool safe) {
  if (old_key == new_key) return *this;
  if (!contains(old_key)) get_value(old_key);  // throws the KeyError
  if (safe && contains(new_key)) {
    Fail<KeyError>("rename_key_: key ", new_key.repr(),
                   " already exists (pass safe=false to overwrite it)");
  }
  if (is_locked()) {
    Fail<LockedError>("cannot rename key ", old_key.repr(), " to ", new_key.repr(),
                      ": the TensorDict is locked (call unlock_() first)");
  }
  // Within one level the backend may rename natively (a view renames in its source, a lazy
  // stack in every member). See NOTE [ Storage interface ].
  if (old_key.size() == new_key.size() && (!old_key.is_nested() || old_key.parent() == new_key.parent())) {
    auto [parent, last] = parent_of(old_key, /*create=*/false);
    if (parent.storage_->rename_key(last, new_key.back())) return *this;
  }
  Value v = get_value(old_key);
  // Validate against the destination level before anything changes.
  if (new_key.is_nested() && contains(new_key.parent())) {
    get_tensordict(new_key.parent()).validate(v, new_key);
  } else if (!new_key.is_nested()) {
    validate(v, new_key);
  }
  del_(old_key);
  set(new_key, std::move(v));
  return *this;
}

// ---- structure ----------------------------------------------------------------------------

TensorDict TensorDict::select(const std::vector<NestedKey>& keys, bool strict) const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  for (const NestedKey& key : keys) {
    std::optional<Value> v = find(key);
    if (!v) {
      if (strict) get_value(key);  // throws KeyError
      continue;
    }
    // Mirror the intermediate levels with their own batch sizes.
    TensorDict src = *this;
    TensorDict dst = out;
    for (size_t i = 0; i + 1 < key.size(); ++i) {
      TensorDict sub_src = src.storage_->get(key[i])->tensordict();
      std::optional<Value> existing = dst.storage_->get(key[i]);
      TensorDict sub_dst = existing ? existing->tensordict()
                                    : TensorDict(MakeDenseStorage(sub_src.batch_size().vec(),
                                                                  sub_src.device()));
      if (!existing) dst.storage_->set(key[i], sub_dst);
      src = std::move(sub_src);
      dst = std::move(sub_dst);
    }
    dst.storage_->set(key.back(), v->is_tensordict() ? Value(v->tensordict().copy()) : *v);
  }
  return out;
}

TensorDict TensorDict::exclude(const std::vector<NestedKey>& keys) const {
  TensorDict out = copy();
  for (const NestedKey& key : keys) {
    if (!out.contains(key)) continue;
    auto [parent, last] = out.parent_of(key, false);
    parent.storage_->erase(last);
  }
  return out;
}

std::vector<TensorDict> TensorDict::split_keys(
    const std::vector<std::vector<NestedKey>>& groups) const {
  std::vector<TensorDict> out;
  std::vector<NestedKey> all;
  for (const auto& g : groups) {
    out.push_back(select(g, /*strict=*/false));
    all.insert(all.end(), g.begin(), g.end());
  }
  out.push_back(exclude(all));
  return out;
}

TensorDict TensorDict::flatten_keys(std::string_view separator) const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  std::function<void(const TensorDict&, const std::string&)> visit =
      [&](const TensorDict& level, const std::string& prefix) {
        const Storage& s = *level.storage_;
        for (const std::string& k : s.keys()) {
          Value v = *s.get(k);
          std::string name = prefix.empty() ? k : absl::StrCat(prefix, std::string(separator), k);
          if (v.is_tensordict() && !v.tensordict().is_empty()) {
            visit(v.tensordict(), name);
            continue;
          }
          if (out.storage_->contains(name)) {
            Fail<ValueError>("flatten_keys: two entries flatten to the same key '", name,
                             "' with separator '", separator, "'");
          }
          out.storage_->set(name, std::move(v));
        }
      };
  visit(*this, "");
  return out;
}

TensorDict TensorDict::unflatten_keys(std::string_view separator) const {
  TORCH_CHECK(!separator.empty(), "unflatten_keys needs a non-empty separator");
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    std::vector<std::string> parts = absl::StrSplit(k, absl::string_view(separator.data(), separator.size()));
    NestedKey key(parts);
    // Collision: the key (or one of its prefixes) is already a leaf, or the key is a level.
    for (size_t i = 1; i <= key.size(); ++i) {
      NestedKey::Parts p(key.parts().begin(), key.parts().begin() + i);
      std::optional<Value> existing = out.find(NestedKey(std::move(p)));
      if (existing && (i == key.size() || !existing->is_tensordict())) {
        Fail<ValueError>("unflatten_keys: key '", k, "' collides with another entry at ",
                         NestedKey(NestedKey::Parts(key.parts().begin(), key.parts().begin() + i))
                             .repr());
      }
    }
    out.set(key, std::move(v));
  }
  return out;
}

TensorDict TensorDict::empty(bool recurse) const {
  TensorDict out(storage_->make_empty(batch_size().vec(), device()));
  if (recurse) {
    const Storage& s = *storage_;
    for (const std::string& k : s.keys()) {
      std::optional<Value> v = s.get(k);
      if (v && v->is_tensordict()) out.storage_->set(k, v->tensordict().empty(true));
    }
  }
  return out;
}

TensorDict TensorDict::clone() const {
  internal::LeafTree tree(*this);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [](size_t, const at::Tensor& t) { return t.clone(); }, "cloning",
      parallel::ParallelOptions());
  return tree.Rebuild(std::move(out), batch_size(), /*check=*/false);
}

TensorDict TensorDict::copy() const {
  TensorDict out(MakeDenseStorage(batch_size().vec(), device()));
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    out.storage_->set(k, v.is_tensordict() ? Value(v.tensordict().copy()) : std::move(v));
  }
  return out;
}

TensorDict& TensorDict::lock_() {
  SetLockedRecursive(*this, true);
  return *this;
}

TensorDict& TensorDict::unlock_() {
  SetLockedRecursive(*this, false);
  return *this;
}

bool TensorDict::is_locked() const { return storage_->locked(); }

// ---- apply --------------------------------------------------------------------------------

namespace {

// NOTE [ Parallel apply ]
// apply / named_apply / apply_ hand ApplyOptions' parallel settings to internal::MapEach, the
// per-leaf loop of NOTE [ Leaf maps ]: below min_parallel_numel elements in total the leaves
// run serially in key order, above it on td::parallel's threads (NOTE [ Thread policy ] in
// td/parallel/executor.h). Every result lands in its own slot and the tree is rebuilt in key
// order, so the result does not depend on the schedule; when several leaves fail, the error of
// the first in key order is rethrown, as the serial loop would have. clone, to, contiguous,
// stack and cat pass default options: their per-leaf work is a copy, worth threads when large.
parallel::ParallelOptions LeafParallelism(const ApplyOptions& options) {
  return parallel::ParallelOptions()
      .parallel(options.parallel())
      .num_threads(options.num_threads())
      .min_cost(options.min_parallel_numel());
}

// The leaves of each of `others` aligned to `tree`: result[other][leaf].
std::vector<std::vector<at::Tensor>> AlignOthers(const internal::LeafTree& tree,
                                                 const std::vector<TensorDict>& others,
                                                 const ApplyOptions& options) {
  std::vector<std::vector<at::Tensor>> aligned;
  aligned.reserve(others.size());
  for (size_t j = 0; j < others.size(); ++j) {
    aligned.push_back(tree.Align(
        others[j], internal::LeafTree::AlignOptions()
                       .default_value(options.default_value())
                       .name(others.size() == 1 ? "the other TensorDict" : "other TensorDict")
                       .position(others.size() == 1 ? -1 : static_cast<int64_t>(j))));
  }
  return aligned;
}

std::vector<at::Tensor> Gather(const std::vector<std::vector<at::Tensor>>& aligned,
                               const at::Tensor& leaf, size_t i) {
  std::vector<at::Tensor> args;
  args.reserve(aligned.size() + 1);
  args.push_back(leaf);
  for (const auto& a : aligned) args.push_back(a[i]);
  return args;
}

TensorDict FinishApply(const TensorDict& self, const internal::LeafTree& tree,
                       std::vector<at::Tensor> out, const ApplyOptions& options) {
  if (options.batch_size()) {
    return tree.Rebuild(std::move(out), CheckedBatch(*options.batch_size()), /*check=*/true);
  }
  return tree.Rebuild(std::move(out), self.batch_size(), /*check=*/true);
}

// True when a tensor of shape `from` can be copied into one of shape `to` (Tensor::copy_).
bool ExpandableTo(at::IntArrayRef from, at::IntArrayRef to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

// apply_: computes every result first, checks they fit, then copies (see the header).
void ApplyInPlace(const internal::LeafTree& tree, const internal::IndexedLeafFn& fn,
                  const ApplyOptions& options) {
  std::vector<at::Tensor> out;
  try {
    out = internal::MapEach(tree, fn, "applying a function in place to", LeafParallelism(options));
  } catch (c10::Error& e) {
    e.add_context(
        "apply_ already ran on the keys before it (and, when the leaves ran in parallel, maybe on "
        "some after it) but wrote nothing: results are copied only after every leaf succeeded "
        "(changes fn made to its argument itself stay)");
    throw;
  }
  const std::vector<at::Tensor>& leaves = tree.leaves();
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].defined() && !ExpandableTo(out[i].sizes(), leaves[i].sizes())) {
      Fail<ValueError>("apply_: the result for key ", tree.key(i).repr(), " has shape ",
                       SizeRepr(out[i].sizes()), ", which cannot be copied into the leaf of shape ",
                       SizeRepr(leaves[i].sizes()));
    }
  }
  int64_t numel = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].defined() && !out[i].is_same(leaves[i])) numel += leaves[i].numel();
  }
  parallel::parallel_for(static_cast<int64_t>(out.size()), numel, LeafParallelism(options),
                         [&](int64_t i) {
                           if (out[i].defined() && !out[i].is_same(leaves[i])) {
                             at::Tensor target = leaves[i];
                             target.copy_(out[i]);
                           }
                         });
}

}  // namespace


TensorDict TensorDict::apply(const LeafFn& fn, std::optional<std::vector<int64_t>> batch_size) const {
  ApplyOptions options;
  if (batch_size) options.batch_size(*std::move(batch_size));
  return apply(fn, options);
}

TensorDict TensorDict::apply(const LeafFn& fn, const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t, const at::Tensor& x) { return fn(x); }, "applying a function to",
      LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::apply(const BinaryLeafFn& fn, const TensorDict& other,
                             const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, {other}, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(x, aligned[0][i]); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::apply(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                             const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(Gather(aligned, x, i)); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::named_apply(const NamedLeafFn& fn, const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(tree.key(i), x); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict TensorDict::named_apply(const NamedNaryLeafFn& fn, const std::vector<TensorDict>& others,
                                   const ApplyOptions& options) const {
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
  std::vector<at::Tensor> out = internal::MapEach(
      tree, [&](size_t i, const at::Tensor& x) { return fn(tree.key(i), Gather(aligned, x, i)); },
      "applying a function to", LeafParallelism(options));
  return FinishApply(*this, tree, std::move(out), options);
}

TensorDict& TensorDict::apply_(const LeafFn& fn) { return apply_(fn, ApplyOptions()); }

TensorDict& TensorDict::apply_(const LeafFn& fn, const ApplyOptions& options) {
  if (HasLazyLevel(*this)) {  // NOTE [ Storage interface ]: write through set_()
    WriteThroughDenseCopy(*this, [&](TensorDict& dense) { dense.apply_(fn, options); });
    return *this;
  }
  internal::LeafTree tree(*this);
  ApplyInPlace(tree, [&](size_t, const at::Tensor& x) { return fn(x); }, options);
  return *this;
}

TensorDict& TensorDict::apply_(const BinaryLeafFn& fn, const TensorDict& other,
                               const ApplyOptions& options) {
  if (HasLazyLevel(*this)) {  // NOTE [ Storage interface ]: write through set_()
    WriteThroughDenseCopy(*this, [&](TensorDict& dense) { dense.apply_(fn, other, options); });
    return *this;
  }
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, {other}, options);
  ApplyInPlace(tree, [&](size_t i, const at::Tensor& x) { return fn(x, aligned[0][i]); },
               options);
  return *this;
}

TensorDict& TensorDict::apply_(const NaryLeafFn& fn, const std::vector<TensorDict>& others,
                               const ApplyOptions& options) {
  if (HasLazyLevel(*this)) {  // NOTE [ Storage interface ]: write through set_()
    WriteThroughDenseCopy(*this, [&](TensorDict& dense) { dense.apply_(fn, others, options); });
    return *this;
  }
  internal::LeafTree tree(*this);
  std::vector<std::vector<at::Tensor>> aligned = AlignOthers(tree, others, options);
  ApplyInPlace(tree, [&](size_t i, const at::Tensor& x) { return fn(Gather(aligned, x, i)); },
               options);
  return *this;
}

namespace {
TensorDict ToDenseImpl(const TensorDict& src, const NestedKey* prefix) {
  const Storage& s = src.storage();
  std::vector<std::string> exclusive = s.exclusive_keys();
  if (!exclusive.empty()) {
    Fail<KeyError>("cannot make a dense TensorDict", prefix ? " under " : "",
                   prefix ? prefix->repr() : "", ": keys ", KeysRepr(exclusive),
                   " are held by only some of the stacked TensorDicts (keys() lists the common "
                   "ones); select(keys()) first to drop them, or set them on every member");
  }
  auto out_storage = MakeDenseStorage(src.batch_size().vec(), src.device());
  TensorDict out(out_storage);
  for (const std::string& k : s.keys()) {
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    std::optional<Value> v = WithKeyContext(full, "reading", [&] { return s.get(k); });
    if (!v) continue;
    if (v->is_tensor()) {
      out_storage->set(k, v->tensor());
    } else if (v->is_tensordict()) {
      out_storage->set(k, ToDenseImpl(v->tensordict(), &full));
    } else {
      out_storage->set(k, *std::move(v));
    }
  }
  return out;
}
}  // namespace

TensorDict TensorDict::to_dense() const { return ToDenseImpl(*this, nullptr); }


// ---- comparison ---------------------------------------------------------------------------

namespace {
at::Tensor NonTensorCompare(const TensorDict& shape_of, const Value& a, const Value& b,
                            bool equal) {
  bool same = a.kind() == b.kind() && a.is_non_tensor() && a.non_tensor() == b.non_tensor();
  return at::full(shape_of.batch_size(), same == equal, at::kBool);
}
}  // namespace

TensorDict TensorDict::operator==(const TensorDict& other) const {
  return ZipImpl(
      *this, other, [](const at::Tensor& a, const at::Tensor& b) { return a.eq(b); },
      [this](const Value& a, const Value& b) { return NonTensorCompare(*this, a, b, true); },
      nullptr);
}

TensorDict TensorDict::operator!=(const TensorDict& other) const {
  return ZipImpl(
      *this, other, [](const at::Tensor& a, const at::Tensor& b) { return a.ne(b); },
      [this](const Value& a, const Value& b) { return NonTensorCompare(*this, a, b, false); },
      nullptr);
}

bool TensorDict::all() const {
  for (const Value& v : values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor() && !v.tensor().all().item<bool>()) return false;
  }
  return true;
}

bool TensorDict::any() const {
  for (const Value& v : values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor() && v.tensor().any().item<bool>()) return true;
  }
  return false;
}

bool allclose(const TensorDict& a, const TensorDict& b, const AllCloseOptions& options) {
  try {
    assert_allclose(a, b, options);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

void assert_allclose(const TensorDict& a, const TensorDict& b, const AllCloseOptions& options) {
  if (a.batch_size() != b.batch_size()) {
    Fail<BatchSizeError>("batch sizes differ: ", SizeRepr(a.batch_size()), " vs ",
                         SizeRepr(b.batch_size()));
  }
  const KeysOptions all_leaves = KeysOptions().include_nested(true).leaves_only(true);
  std::vector<NestedKey> ka = a.keys(all_leaves);
  std::vector<NestedKey> kb = b.keys(all_leaves);
  absl::flat_hash_set<NestedKey> sa(ka.begin(), ka.end()), sb(kb.begin(), kb.end());
  std::vector<NestedKey> only_a, only_b;
  for (const auto& k : ka) {
    if (!sb.contains(k)) only_a.push_back(k);
  }
  for (const auto& k : kb) {
    if (!sa.contains(k)) only_b.push_back(k);
  }
  if (!only_a.empty() || !only_b.empty()) {
    Fail<KeyError>("the TensorDicts have different keys: only in the first: ", KeysRepr(only_a),
                   ", only in the second: ", KeysRepr(only_b));
  }
  for (const NestedKey& k : ka) {
    Value va = a.get_value(k);
    Value vb = b.get_value(k);
    if (va.kind() != vb.kind()) {
      Fail<c10::Error>("key ", k.repr(), " is a ", va.kind(), " in the first and a ", vb.kind(),
                       " in the second");
    }
    if (va.is_non_tensor()) {
      if (va.non_tensor() != vb.non_tensor()) {
        Fail<c10::Error>("key ", k.repr(), " differs: ", va.non_tensor().dump(), " vs ",
                         vb.non_tensor().dump());
      }
      continue;
    }
    const at::Tensor& ta = va.tensor();
    const at::Tensor& tb = vb.tensor();
    if (ta.sizes() != tb.sizes()) {
      Fail<c10::Error>("key ", k.repr(), " has shape ", SizeRepr(ta.sizes()), " vs ",
                       SizeRepr(tb.sizes()));
    }
    if (ta.scalar_type() != tb.scalar_type()) {
      Fail<c10::Error>("key ", k.repr(), " has dtype ", DtypeName(ta.scalar_type()), " vs ",
                       DtypeName(tb.scalar_type()));
    }
    const bool floating = ta.is_floating_point() || ta.is_complex();
    const bool close = floating ? at::allclose(ta, tb.to(ta.device()), options.rtol(),
                                               options.atol(), options.equal_nan())
                                : at::equal(ta, tb.to(ta.device()));
    if (!close) {
      std::string detail;
      if (floating) {
        detail = absl::StrCat(" (max abs difference ",
                              (ta - tb.to(ta.device())).abs().max().item<double>(), ")");
      }
      Fail<c10::Error>("key ", k.repr(), " differs", detail);
    }
  }
}

// ---- printing and interop -----------------------------------------------------------------

std::string TensorDict::repr() const {
  std::string out;
  ReprImpl(*this, 0, &out);
  return out;
}

std::ostream& operator<<(std::ostream& os, const TensorDict& td) { return os << td.repr(); }

c10::IValue TensorDict::to_ivalue() const {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  const Storage& s = *storage_;
  for (const std::string& k : s.keys()) {
    Value v = *s.get(k);
    if (v.is_tensor()) {
      dict.insert(k, v.tensor());
    } else if (v.is_tensordict()) {
      dict.insert(k, v.tensordict().to_ivalue());
    } else {
      dict.insert(k, JsonToIValue(v.non_tensor()));
    }
  }
  return c10::IValue(dict);
}

TensorDict TensorDict::from_ivalue(const c10::IValue& value, at::IntArrayRef batch_size,
                                   std::optional<at::Device> device) {
  if (!value.isGenericDict()) {
    Fail<TypeError>("from_ivalue needs a dict, got ", value.tagKind());
  }
  TensorDict out({}, batch_size, device);
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString()) {
      Fail<TypeError>("from_ivalue needs string keys, got a ", entry.key().tagKind(), " key");
    }
    const std::string& k = entry.key().toStringRef();
    const c10::IValue& v = entry.value();
    if (v.isTensor()) {
      out.set(NestedKey(k), v.toTensor());
    } else if (v.isGenericDict()) {
      out.set(NestedKey(k), from_ivalue(v, batch_size, device));
    } else if (std::optional<nlohmann::json> j = IValueToJson(v)) {
      out.set(NestedKey(k), NonTensorData(*std::move(j)));
    } else {
      Fail<TypeError>("from_ivalue: key '", k, "' holds a ", v.tagKind(),
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
        Fail<ValueError>("load_state_dict: key '", entry.key(), "' has shape ",
                         SizeRepr(entry.value().sizes()), " but the TensorDict holds ",
                         SizeRepr(mine->tensor().sizes()));
      }
      existing.emplace_back(key, entry.value());
    } else if (mine) {
      Fail<TypeError>("load_state_dict: key '", entry.key(), "' is a ", mine->kind(),
                      " in the TensorDict, not a Tensor");
    } else if (strict) {
      unexpected.push_back(entry.key());
    } else {
      if (!StartsWith(entry.value().sizes(), batch_size())) {
        Fail<BatchSizeError>("load_state_dict: key '", entry.key(), "' has shape ",
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
      Fail<KeyError>("load_state_dict: missing keys ", KeysRepr(missing), ", unexpected keys ",
                     KeysRepr(unexpected));
    }
  }
  for (auto& [k, t] : existing) set_(k, t);
  for (auto& [k, t] : fresh) set(k, t);
  return *this;
}

}  // namespace td
