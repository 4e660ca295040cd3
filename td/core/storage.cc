#include "td/core/storage.h"

#include <algorithm>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/tensordict_util.h"

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

std::string_view CapabilityName(Capability c) {
  for (const auto& [flag, name] : kCapabilityNames) {
    if (flag == c) return name;
  }
  return "unknown";
}

std::string Capabilities::ToString() const {
  std::vector<std::string> names;
  uint32_t named = 0;
  for (const auto& [flag, name] : kCapabilityNames) {
    named |= static_cast<uint32_t>(flag);
    if (has(flag)) names.emplace_back(name);
  }
  std::string out = absl::StrJoin(names, "|");
  if (const uint32_t rest = bits_ & ~named; rest != 0) {  // a flag without a name: say so
    absl::StrAppend(&out, out.empty() ? "" : "|", "unknown(0x", absl::Hex(rest), ")");
  }
  return out.empty() ? "none" : out;
}

std::ostream& operator<<(std::ostream& os, Capabilities c) { return os << c.ToString(); }

void internal::RequireBatchResize(const Storage& s, at::IntArrayRef batch_size,
                                  std::string_view op) {
  if (batch_size == s.batch_size() || s.capabilities().has(Capability::kBatchResize)) return;
  TD_FAIL(BatchSizeError, op, ": cannot change the batch size from ", SizeRepr(s.batch_size()),
          " to ", SizeRepr(batch_size), ": the '", s.backend_id(),
          "' backend keeps its batch size (it lacks Capability::kBatchResize, \"",
          CapabilityName(Capability::kBatchResize),
          "\"); to_dense() gives a free-standing TensorDict that can change it");
}

void internal::RequireReplaceable(const Storage& s, std::string_view key, const Value& value,
                                  std::string_view op, const KeyRef& full_key) {
  if (s.capabilities().has(Capability::kReplaceEntries)) return;
  const std::optional<EntryMeta> m = s.meta(key);
  if (!m) return;
  at::IntArrayRef shape;
  EntryMeta::Kind kind = EntryMeta::Kind::kNonTensor;
  if (value.is_tensor()) {
    kind = EntryMeta::Kind::kTensor;
    shape = value.tensor().sizes();
  } else if (value.is_tensordict()) {
    kind = EntryMeta::Kind::kTensorDict;
    shape = value.tensordict().batch_size();
  }
  if (kind == m->kind && at::IntArrayRef(m->shape) == shape) return;
  static constexpr const char* kKinds[] = {"Tensor", "TensorDict", "NonTensorData"};
  auto describe = [](EntryMeta::Kind k, at::IntArrayRef sh) {
    const char* name = kKinds[static_cast<int>(k)];
    if (k == EntryMeta::Kind::kNonTensor) return std::string(name);
    return absl::StrCat(name, " of ", k == EntryMeta::Kind::kTensor ? "shape " : "batch size ",
                        SizeRepr(sh));
  };
  TD_FAIL(ValueError, op, ": cannot replace key ", full_key.repr(), " (a ",
          describe(m->kind, m->shape), ") with a ", describe(kind, shape), ": the '",
          s.backend_id(), "' backend keeps the kind and shape of existing entries (it lacks ",
          "Capability::kReplaceEntries, \"", CapabilityName(Capability::kReplaceEntries),
          "\"); set_() writes values of the same shape");
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
  if (const EntryList* held = held_entries()) {  // no copy of the entry
    v = held->find(key);
  } else {
    holder = get(key);
    v = holder ? &*holder : nullptr;
  }
  if (v == nullptr) return std::nullopt;
  EntryMeta m;
  if (v->is_tensor()) {
    const at::Tensor& t = v->tensor();
    m.kind = EntryMeta::Kind::kTensor;
    if (t.is_nested()) {  // ragged dims as -1, as a lazy stack reports them
      const std::vector<int64_t> shape = internal::ShapeOf(t);
      m.shape.assign(shape.begin(), shape.end());
    } else {
      m.shape.assign(t.sizes().begin(), t.sizes().end());
    }
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

std::optional<TensorDict> LazyStorage::index(at::ArrayRef<at::indexing::TensorIndex>) const {
  return std::nullopt;
}

bool LazyStorage::index_put_(at::ArrayRef<at::indexing::TensorIndex>, const TensorDict&) {
  return false;
}

bool Storage::rename_key(std::string_view, std::string_view) { return false; }

void LazyStorage::fail_lazy_depth(int depth, std::string_view what) {
  TD_FAIL(NestingError, what, ": the result would be computed through ", depth,
                     " lazy levels (views of views, lazy stacks of lazy stacks), and lazy "
                     "levels chain at most ", kMaxNestingDepth,
                     " deep (td::kMaxNestingDepth); call to_dense() on the source, or build "
                     "the view on its source (LazyViewTensorDict::source())");
}

void Storage::append_new(std::vector<std::pair<std::string, Value>> entries) {
  for (auto& [key, value] : entries) set(key, std::move(value));
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
