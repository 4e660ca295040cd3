#include "td/core/storage.h"

#include <algorithm>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace td {
namespace {

struct Registry {
  std::mutex mu;
  absl::flat_hash_map<std::string, StorageFactory> factories;
};

Registry& GetRegistry() {
  static auto* registry = new Registry();  // never destroyed: used from static initialisers
  return *registry;
}

}  // namespace

std::string Capabilities::ToString() const {
  static constexpr std::pair<Capability, const char*> kNames[] = {
      {Capability::kInPlaceWrite, "in_place_write"}, {Capability::kNewKeys, "new_keys"},
      {Capability::kPersistent, "persistent"},       {Capability::kCrossProcess, "cross_process"},
      {Capability::kLazy, "lazy"},                   {Capability::kCpuOnly, "cpu_only"},
      {Capability::kRagged, "ragged"},
  };
  std::vector<std::string> names;
  for (const auto& [c, name] : kNames) {
    if (has(c)) names.emplace_back(name);
  }
  return absl::StrJoin(names, "|");
}

void Storage::set_(std::string_view key, const at::Tensor& value) {
  std::optional<Value> current = get(key);
  TORCH_INTERNAL_ASSERT(current && current->is_tensor(), "set_ on a missing key");
  current->tensor().copy_(value);
}

bool EntryMeta::ragged() const {
  return std::find(shape.begin(), shape.end(), -1) != shape.end();
}

std::optional<EntryMeta> Storage::meta(std::string_view key) const {
  std::optional<Value> holder;
  const Value* v = nullptr;
  if (holds_values_) {  // no copy of the entry
    v = peek(key);
  } else {
    holder = get(key);
    v = holder ? &*holder : nullptr;
  }
  if (v == nullptr) return std::nullopt;
  EntryMeta m;
  if (v->is_tensor()) {
    const at::Tensor& t = v->tensor();
    m.kind = EntryMeta::Kind::kTensor;
    m.shape.assign(t.sizes().begin(), t.sizes().end());
    m.dtype = t.scalar_type();
    m.device = t.device();
  } else if (v->is_tensordict()) {
    m.kind = EntryMeta::Kind::kTensorDict;
    m.shape.assign(v->tensordict().batch_size().begin(), v->tensordict().batch_size().end());
  } else {
    m.kind = EntryMeta::Kind::kNonTensor;
  }
  return m;
}

std::optional<TensorDict> Storage::index(at::ArrayRef<at::indexing::TensorIndex>) const {
  return std::nullopt;
}

bool Storage::index_put_(at::ArrayRef<at::indexing::TensorIndex>, const TensorDict&) {
  return false;
}

void Storage::append_new(std::vector<std::pair<std::string, Value>> entries) {
  for (auto& [key, value] : entries) set(key, std::move(value));
}

std::shared_ptr<Storage> Storage::make_empty(std::vector<int64_t> batch_size,
                                             std::optional<at::Device> device) const {
  return MakeDenseStorage(std::move(batch_size), device);
}

bool HasLazyLevel(const TensorDict& td) {
  const Storage& s = td.storage();
  if (s.capabilities().has(Capability::kLazy)) return true;
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);
    if (m && m->kind == EntryMeta::Kind::kTensorDict && HasLazyLevel(s.get(k)->tensordict())) {
      return true;
    }
  }
  return false;
}

void WriteThroughDenseCopy(TensorDict& td, const std::function<void(TensorDict&)>& write,
                           const std::vector<NestedKey>* only_keys) {
  if (!HasLazyLevel(td)) {
    write(td);
    return;
  }
  TensorDict work = only_keys ? td.select(*only_keys, /*strict=*/false).to_dense() : td.to_dense();
  write(work);
  const std::vector<TensorDict::Item> leaves =
      work.items(KeysOptions().include_nested(true).leaves_only(true));
  std::vector<bool> exists(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    exists[i] = td.contains(leaves[i].first);
    if (!exists[i] && td.is_locked()) {
      Fail<LockedError>("cannot create key ", leaves[i].first.repr(),
                        ": the TensorDict is locked (call unlock_() first)");
    }
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Value& v = leaves[i].second;
    if (exists[i] && v.is_tensor()) {
      td.set_(leaves[i].first, v.tensor());
    } else if (!exists[i]) {
      td.set(leaves[i].first, v);
    }
  }
}

bool RegisterStorageBackend(std::string id, StorageFactory factory) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.factories.emplace(std::move(id), std::move(factory)).second;
}

std::vector<std::string> RegisteredStorageBackends() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> ids;
  for (const auto& [id, f] : r.factories) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<std::shared_ptr<Storage>> OpenStorage(std::string_view id,
                                                     const StorageSpec& spec) {
  StorageFactory factory;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(absl::string_view(id.data(), id.size()));
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(absl::StrCat("no storage backend '", std::string(id), "'; registered: [",
                                            absl::StrJoin(RegisteredStorageBackends(), ", "),
                                            "] (is the backend's library linked?)"));
  }
  return factory(spec);
}

TensorDict MakeTensorDict(std::string_view id, const StorageSpec& spec) {
  return TensorDict(ValueOrThrow(OpenStorage(id, spec)));
}

}  // namespace td
