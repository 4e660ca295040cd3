// The storage interface: what the TensorDict core needs from a backend, and the backend registry.
//
// NOTE [ Storage interface ]
// A TensorDict is a handle to one Storage: one level of entries (tensor, nested TensorDict, or
// non-tensor data, in insertion order) plus the batch size, device and lock flag. The core
// validates every write (batch size, device, lock, key existence) before calling the storage,
// so a backend only stores. Nested keys are resolved by the core one level at a time through
// nested TensorDicts, so backends see plain string keys. Algorithms ask `capabilities()` rather
// than casting to a concrete backend. A backend is a folder under td/backends/ with one
// cc_library (alwayslink). A backend that can open an empty storage from a StorageSpec alone
// (dense, memmap, shared_memory) registers a factory under its id with
// TD_REGISTER_STORAGE_BACKEND; //td/backends:all links every backend and a test opens each
// registered id. Lazy backends (lazy stacks, views) are made from other TensorDicts by their own
// functions (td::lazy_stack, td::index_view, ...) and register no factory.
//
// The interface is the verbs every backend means (read, write, erase, metadata, batch size,
// lock) plus two optional parts: `held_entries()`, the one fast-path accessor for backends that
// hold their entries as Values, and `lazy()`, the hooks only Capability::kLazy backends have
// (class LazyStorage). Capability names come from one table (kCapabilityNames).
//
// Rules the core follows so that every backend behaves the same (the conformance suite in
// tests/conformance checks them on every backend):
//  * Reading metadata never materialises data: shape/dtype/device checks (set_, update_,
//    set_batch_size, printing) go through `meta()`, which a lazy backend answers without
//    computing the tensor (and with -1 for dims that differ between the parts of a ragged
//    backend).
//  * A backend with Capability::kLazy may return a freshly computed tensor from `get()`, so
//    writing into that tensor changes nothing. Every in-place write of the core therefore goes
//    through internal::WriteLeaves / WriteInPlace, which hand the result of a lazy level back
//    to the storage's `set_()`: NOTE [ In-place writes ] in td/core/internal/in_place.h.
//  * Batch indexing first offers the work to LazyStorage::index() / index_put_(); a backend
//    returns nullopt / false to let the core do it leaf by leaf. A lazy backend uses the hooks
//    to stay lazy (a lazy stack indexed along its stack dim returns the member itself) and to
//    write through.
//  * A capability a backend does not declare is never asked of it: the core throws first,
//    naming the call, the backend and the flag (kNewKeys in set(), kReplaceEntries through
//    internal::RequireReplaceable, kBatchResize through internal::RequireBatchResize before
//    any level changes, kInPlaceWrite in index_put_).
//  * Structural flags that span levels (the lock) are set through the virtual `set_locked()`, so
//    backends whose nested TensorDicts are built on the fly (lazy stacks, views) can forward it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <c10/util/SmallVector.h>

#include "absl/status/statusor.h"
#include "td/core/tensordict.h"

namespace td {

// What a backend can do. Every flag is read by the library: the core enforces kNewKeys,
// kReplaceEntries, kBatchResize and kInPlaceWrite before calling the storage (a backend lacking
// one gets an error naming the call, the backend and the flag, and the storage is never asked),
// kLazy decides how in-place writes reach the storage, kCrossProcess is what is_shared() reports.
// Every flag has a row in kCapabilityNames below; add a new flag at the end with the next bit,
// a row there, and bump kNumCapabilities (static_asserts check the rest).
enum class Capability : uint32_t {
  kInPlaceWrite = 1u << 0,   // set_ / index_put_ write into the memory the entries live in
  kNewKeys = 1u << 1,        // set() of a new key is supported
  kCrossProcess = 1u << 2,   // other processes can see and write the same memory
  kLazy = 1u << 3,           // get() computes its result from other TensorDicts (LazyStorage)
  kReplaceEntries = 1u << 4, // set() of an existing key may change its kind or shape
  kBatchResize = 1u << 5,    // set_batch_size() / auto_batch_size_() may change the batch size
};
inline constexpr size_t kNumCapabilities = 6;

// The name of every Capability, in bit order: what Capabilities::ToString prints.
inline constexpr std::pair<Capability, std::string_view> kCapabilityNames[] = {
    {Capability::kInPlaceWrite, "in_place_write"},   {Capability::kNewKeys, "new_keys"},
    {Capability::kCrossProcess, "cross_process"},    {Capability::kLazy, "lazy"},
    {Capability::kReplaceEntries, "replace_entries"}, {Capability::kBatchResize, "batch_resize"},
};
static_assert(sizeof(kCapabilityNames) / sizeof(kCapabilityNames[0]) == kNumCapabilities,
              "every Capability needs a row in kCapabilityNames");
namespace internal {
constexpr bool CapabilityNamesInBitOrder() {
  for (size_t i = 0; i < kNumCapabilities; ++i) {
    if (static_cast<uint32_t>(kCapabilityNames[i].first) != (1u << i)) return false;
  }
  return true;
}
}  // namespace internal
static_assert(internal::CapabilityNamesInBitOrder(),
              "kCapabilityNames must list the Capability flags in bit order, one per bit");

// The name of one flag ("in_place_write", ...).
std::string_view CapabilityName(Capability c);

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
  constexpr bool operator==(Capabilities o) const { return bits_ == o.bits_; }
  constexpr bool operator!=(Capabilities o) const { return bits_ != o.bits_; }
  // "in_place_write|new_keys|...", in bit order; "none" for the empty set.
  std::string ToString() const;

 private:
  constexpr explicit Capabilities(uint32_t bits) : bits_(bits) {}
  uint32_t bits_ = 0;
};
constexpr Capabilities operator|(Capability a, Capability b) {
  return Capabilities(a) | Capabilities(b);
}
// Prints ToString() (gtest and error messages).
std::ostream& operator<<(std::ostream& os, Capabilities c);

// What `Storage::meta()` reports about one entry without materialising it.
struct EntryMeta {
  enum class Kind { kTensor, kTensorDict, kNonTensor };
  Kind kind = Kind::kTensor;
  // Tensors only: the full shape (-1 for a dim whose size differs between the parts of a ragged
  // backend), dtype and device. For a sub-TensorDict, `shape` is its batch size.
  c10::SmallVector<int64_t, 8> shape;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  // True when some dim is -1.
  bool ragged() const;
};

class EntryList;    // td/core/internal/entry_list.h
class LazyStorage;  // below

// One level of entries. See NOTE [ Storage interface ].
class Storage {
 public:
  Storage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : batch_size_(batch_size.begin(), batch_size.end()), device_(device) {}
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
  // Kind, shape, dtype and device of the entry, or nullopt when absent. The default reads the
  // entry (without copying it when held_entries() is set); lazy backends override it so that
  // checks and printing do not compute the entry.
  virtual std::optional<EntryMeta> meta(std::string_view key) const;
  // The fast path to the entries: backends that keep their entries as Values in an EntryList
  // (EntryStorage: dense, memmap, shared_memory) return it, so that the core reads an entry or
  // walks a level without copying; nullptr (the default) for backends whose entries are computed
  // (read through get()). The pointer is the same for the storage's whole life (callers may
  // keep it); the entries it shows, and references into them, are valid until the next write
  // to this storage. The one accessor of its kind: lookups by key, in-order walks and "does it
  // hold Values" all come from it.
  // Not virtual: a field EntryStorage's constructor sets, read without a call on every lookup.
  const EntryList* held_entries() const { return held_entries_; }
  // Adds entries whose keys are distinct and absent from this storage, already validated (the
  // core filling the fresh result of an operation). The default calls set() for each.
  virtual void append_new(std::vector<std::pair<std::string, Value>> entries);
  // Replaces the batch size (already validated against every leaf by the core).
  virtual void set_batch_size(std::vector<int64_t> batch_size) {
    batch_size_.assign(batch_size.begin(), batch_size.end());
  }
  // Renames entry `old_key` to `new_key` of this level (replacing an existing `new_key`) and
  // returns true, or returns false (the default) to let the core move the value (get, erase,
  // set). Called after the core's checks (old_key exists, lock). Renaming where the entries live
  // keeps data outside a view (a view renames in its source, a lazy stack in every member) and
  // lets an on-disk level rename as one crash-safe step (memmap).
  virtual bool rename_key(std::string_view old_key, std::string_view new_key);
  // Sets the lock flag of this level (the core calls it on every level). Backends whose parts are
  // other TensorDicts forward it to them.
  virtual void set_locked(bool locked) { locked_ = locked; }

  // The hooks of a Capability::kLazy backend (index, index_put_, exclusive_keys),
  // or nullptr for every other backend.
  LazyStorage* lazy() { return lazy_; }
  const LazyStorage* lazy() const { return lazy_; }

  // The TensorDicts whose lock_() locked this level, each with the key this level has there:
  // while one of them is alive and locked, unlock_() on this level alone is a LockedError. Kept
  // by the core only (NOTE [ Locks span levels ] in td/core/structure.cc).
  struct LockParent {
    std::weak_ptr<const Storage> parent;
    NestedKey key;
  };
  std::vector<LockParent>& lock_parents() { return lock_parents_; }
  // Whether lock_parents() is non-empty, readable without the records' mutex: a read of a
  // locked level's sub-TensorDict that lock_() already recorded takes no lock.
  bool has_lock_parents() const { return has_lock_parents_.load(std::memory_order_acquire); }
  void set_has_lock_parents(bool has) { has_lock_parents_.store(has, std::memory_order_release); }

  // The stream TensorDict::record_stream associated with this level (nullopt before).
  const std::optional<c10::Stream>& recorded_stream() const { return recorded_stream_; }
  void set_recorded_stream(c10::Stream stream) { recorded_stream_ = stream; }

  // The names of the batch dims (NOTE [ Dim names ] in td/core/names.cc): nullptr when no dim
  // is named, else batch_size().size() entries, at least one set. Not virtual: a field read on
  // every shape op, shared (not copied) by results that keep it.
  const DimNames* names() const { return names_.get(); }
  const std::shared_ptr<const DimNames>& shared_names() const { return names_; }
  // Replaces the names of this level, already validated and normalised by the core (nullptr, or
  // batch_size().size() entries with one set); nested levels are the core's business. Backends
  // whose batch dims are other TensorDicts' (a lazy stack) forward to them.
  virtual void set_names(std::shared_ptr<const DimNames> names) { names_ = std::move(names); }

  at::IntArrayRef batch_size() const { return batch_size_; }
  const std::optional<at::Device>& device() const { return device_; }
  void set_device(std::optional<at::Device> device) { device_ = device; }
  bool locked() const { return locked_; }

 protected:
  // For backends that keep the batch size or lock flag of other TensorDicts in step (without
  // the side effects of their own set_batch_size / set_locked overrides).
  void assign_batch_size(at::IntArrayRef batch_size) {
    batch_size_.assign(batch_size.begin(), batch_size.end());
  }
  void assign_locked(bool locked) { locked_ = locked; }
  void assign_names(std::shared_ptr<const DimNames> names) { names_ = std::move(names); }

 private:
  friend class LazyStorage;
  friend class EntryStorage;
  // Inline: reading a batch size (every write's check, a lazy stack's members) touches no other
  // allocation, and making a storage allocates once less.
  c10::SmallVector<int64_t, 5> batch_size_;
  std::optional<at::Device> device_;
  std::shared_ptr<const DimNames> names_;  // nullptr: unnamed (nothing allocated)
  std::optional<c10::Stream> recorded_stream_;
  bool locked_ = false;
  std::vector<LockParent> lock_parents_;
  std::atomic<bool> has_lock_parents_{false};
  LazyStorage* lazy_ = nullptr;  // set by LazyStorage's constructor
  const EntryList* held_entries_ = nullptr;  // set by EntryStorage's constructor
};

// The base of every Capability::kLazy backend (lazy stacks, views): entries are computed from
// other TensorDicts, and these hooks let the backend keep operations lazy and write through.
// Storage::lazy() returns it; the conformance suite checks that a backend declares kLazy
// exactly when it derives from this class.
class LazyStorage : public Storage {
 public:
  LazyStorage(std::vector<int64_t> batch_size, std::optional<at::Device> device)
      : Storage(std::move(batch_size), device) {
    lazy_ = this;
  }

  // Batch indexing hook, called by TensorDict::index before the generic leaf-by-leaf path:
  // return the result, or nullopt to let the core index every leaf (the default). `indices` are
  // exactly what the caller passed (Ellipsis, None, ints, slices, bool / integer tensors).
  virtual std::optional<TensorDict> index(at::ArrayRef<at::indexing::TensorIndex> indices) const;
  // In-place indexed write hook, called first by TensorDict::index_put_ with a TensorDict value:
  // validate, write and return true (throwing before anything is written when the value does
  // not fit), or return false to let the core validate and write leaf by leaf (NOTE [ In-place
  // writes ] in td/core/internal/in_place.h).
  virtual bool index_put_(at::ArrayRef<at::indexing::TensorIndex> indices,
                          const TensorDict& value);
  // Keys held by some parts of the storage but not by all of them (a lazy stack whose members
  // have different key sets). They are not listed by keys(). Empty by default.
  virtual std::vector<std::string> exclusive_keys() const { return {}; }

  // How many lazy levels this storage's entries are computed through: 1 + the deepest of its
  // sources (a source on a non-lazy backend counts 0). A view of a view of ... or a stack of
  // stacks of ... forms a chain that every read walks and destruction unwinds, so chains are
  // bounded by kMaxNestingDepth like nesting (NOTE [ Nesting depth ] in td/core/entry_list.cc).
  int lazy_depth() const { return lazy_depth_; }

 protected:
  // Records that this storage computes its entries from `source` (backends call it for every
  // source before keeping it). Throws NestingError naming `what` and the depth, changing
  // nothing, when that would make the chain of lazy levels longer than kMaxNestingDepth.
  //   MyViewStorage(TensorDict source, ...) { add_lazy_source(source, "my_view"); ... }
  void add_lazy_source(const TensorDict& source, std::string_view what) {
    const LazyStorage* lazy = source.storage().lazy();
    const int depth = lazy == nullptr ? 1 : lazy->lazy_depth_ + 1;
    if (depth > kMaxNestingDepth) fail_lazy_depth(depth, what);
    if (depth > lazy_depth_) lazy_depth_ = depth;
  }

 private:
  [[noreturn]] static void fail_lazy_depth(int depth, std::string_view what);

  int lazy_depth_ = 1;
};

namespace internal {
// The core's checks of kBatchResize and kReplaceEntries, run before the storage is called
// (NOTE [ Storage interface ]). Each throws naming `op`, the key, the backend and the flag.
// Throws BatchSizeError when `s` lacks kBatchResize and `batch_size` differs from its own.
void RequireBatchResize(const Storage& s, at::IntArrayRef batch_size, std::string_view op);
// Throws ValueError when `s` lacks kReplaceEntries and `value` would change the kind or shape of
// the existing entry `key` (read through meta(): nothing is computed). A new key passes.
void RequireReplaceable(const Storage& s, std::string_view key, const Value& value,
                        std::string_view op, const KeyRef& full_key);
}  // namespace internal

// The default in-memory backend (td/core/dense_storage.h); also the storage of every
// operation's result.
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
