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

std::shared_ptr<Storage> Storage::make_empty(std::vector<int64_t> batch_size,
                                             std::optional<at::Device> device) const {
  return MakeDenseStorage(std::move(batch_size), device);
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
