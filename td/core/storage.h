// The storage interface: what the TensorDict core needs from a backend, and the backend registry.
//
// NOTE [ Storage interface ]
// A TensorDict is a handle to one Storage: one level of entries (tensor, nested TensorDict, or
// non-tensor data, in insertion order) plus the batch size, device and lock flag. The core
// validates every write (batch size, device, lock, key existence) before calling the storage,
// so a backend only stores. Nested keys are resolved by the core one level at a time through
// nested TensorDicts, so backends see plain string keys. Algorithms ask `capabilities()` rather
// than casting to a concrete backend. A backend is a folder under td/backends/ with one
// cc_library (alwayslink) whose .cc registers a factory under its id with
// TD_REGISTER_STORAGE_BACKEND; //td/backends:all links every backend and a test opens each.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "td/core/tensordict.h"

namespace td {

enum class Capability : uint32_t {
  kInPlaceWrite = 1u << 0,   // set_ / index_put_ write into the memory the entries live in
  kNewKeys = 1u << 1,        // set() of a new key is supported
  kPersistent = 1u << 2,     // the entries outlive the process (files)
  kCrossProcess = 1u << 3,   // other processes can see and write the same memory
  kLazy = 1u << 4,           // get() computes its result from other TensorDicts
  kCpuOnly = 1u << 5,        // tensors must stay on the CPU
  kRagged = 1u << 6,         // entries may disagree on feature shapes / key sets
};

// A set of Capability flags.
class Capabilities {
 public:
  constexpr Capabilities() = default;
  constexpr Capabilities(Capability c) : bits_(static_cast<uint32_t>(c)) {}  // NOLINT
  constexpr bool has(Capability c) const { return bits_ & static_cast<uint32_t>(c); }
  constexpr Capabilities operator|(Capabilities o) const { return Capabilities(bits_ | o.bits_); }
  constexpr Capabilities without(Capability c) const {
    return Capabilities(bits_ & ~static_cast<uint32_t>(c));
  }
  constexpr uint32_t bits() const { return bits_; }
  // "in_place_write|new_keys|..."
  std::string ToString() const;

 private:
  constexpr explicit Capabilities(uint32_t bits) : bits_(bits) {}
  uint32_t bits_ = 0;
};
constexpr Capabilities operator|(Capability a, Capability b) {
  return Capabilities(a) | Capabilities(b);
}

// One level of entries. See NOTE [ Storage interface ].
class Storage {
 public:
  Storage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : batch_size_(std::move(batch_size)), device_(device) {}
  virtual ~Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The registered id of the backend ("dense", ...).
  virtual std::string_view backend_id() const = 0;
  virtual Capabilities capabilities() const = 0;

  // Number of entries, and their keys in insertion order.
  virtual size_t size() const = 0;
  virtual std::vector<std::string> keys() const = 0;
  virtual bool contains(std::string_view key) const = 0;
  // The entry, or nullopt when absent.
  virtual std::optional<Value> get(std::string_view key) const = 0;
  // Inserts (at the end) or replaces in place of the old entry. The value is already validated
  // and is never a plain dict.
  virtual void set(std::string_view key, Value value) = 0;
  // Copies `value` into the existing tensor under `key`; shapes were checked by the caller.
  // The default copies into the tensor get() returns, which is right for any backend whose
  // get() returns the stored tensor or a view of it.
  virtual void set_(std::string_view key, const at::Tensor& value);
  // Removes the entry; false when absent.
  virtual bool erase(std::string_view key) = 0;
  // Backends that keep their entries as Values set `holds_values_` and return a pointer to the
  // stored entry here (nullptr when absent), so the core reads without copying; the pointer is
  // valid until the next write to this storage. Lazy backends keep the default and are read
  // through get().
  virtual const Value* peek(std::string_view key) const { return nullptr; }
  bool holds_values() const { return holds_values_; }
  // A new, empty storage of a kind that accepts new keys, for results of operations. Dense by
  // default; backends that keep results on their own medium override it.
  virtual std::shared_ptr<Storage> make_empty(std::vector<int64_t> batch_size,
                                              std::optional<at::Device> device) const;
  // Replaces the batch size (already validated against every leaf by the core).
  virtual void set_batch_size(std::vector<int64_t> batch_size) { batch_size_ = std::move(batch_size); }

  const std::vector<int64_t>& batch_size() const { return batch_size_; }
  const std::optional<at::Device>& device() const { return device_; }
  void set_device(std::optional<at::Device> device) { device_ = device; }
  bool locked() const { return locked_; }
  void set_locked(bool locked) { locked_ = locked; }

 protected:
  std::vector<int64_t> batch_size_;
  std::optional<at::Device> device_;
  bool locked_ = false;
  bool holds_values_ = false;
};

// The default in-memory backend (td/backends/dense).
std::shared_ptr<Storage> MakeDenseStorage(std::vector<int64_t> batch_size,
                                          std::optional<at::Device> device);

// What a registered factory is given to open a storage.
struct StorageSpec {
  TORCH_ARG(std::vector<int64_t>, batch_size);
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  // Directory or name for persistent / cross-process backends; ignored by the others.
  TORCH_ARG(std::string, path);
};

using StorageFactory =
    std::function<absl::StatusOr<std::shared_ptr<Storage>>(const StorageSpec& spec)>;

// Registers `factory` under `id`; returns false (and keeps the first) on a duplicate id.
bool RegisterStorageBackend(std::string id, StorageFactory factory);
// Ids of every registered backend, sorted.
std::vector<std::string> RegisteredStorageBackends();
// Opens an empty storage of backend `id`. NotFound names the registered ids.
absl::StatusOr<std::shared_ptr<Storage>> OpenStorage(std::string_view id, const StorageSpec& spec);
// A new, empty TensorDict on backend `id`. Throws KeyError for an unknown id.
TensorDict MakeTensorDict(std::string_view id, const StorageSpec& spec);

#define TD_STORAGE_CONCAT_INNER(a, b) a##b
#define TD_STORAGE_CONCAT(a, b) TD_STORAGE_CONCAT_INNER(a, b)
// In a backend's .cc (cc_library with alwayslink = True):
//   TD_REGISTER_STORAGE_BACKEND("dense", [](const StorageSpec& s) { ... });
#define TD_REGISTER_STORAGE_BACKEND(id, factory)                                    \
  static const bool TD_STORAGE_CONCAT(td_storage_registered_, __LINE__) =           \
      ::td::RegisterStorageBackend(id, factory)

}  // namespace td
