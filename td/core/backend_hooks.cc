// TensorDict's backend-provided members: each forwards to the hook its backend registered (see
// NOTE [ Backend entry points ] in backend_hooks.h).
#include "td/core/backend_hooks.h"

#include <atomic>

#include "td/core/errors.h"

namespace td {
namespace {

// Written by static initialisers before main (or by dlopen'ed code), read afterwards: an atomic
// pointer to a leaked copy keeps the read lock-free and race-free.
std::atomic<const MemmapHooks*> g_memmap{nullptr};
std::atomic<const SharedMemoryHooks*> g_shared_memory{nullptr};

const MemmapHooks& Memmap(const char* member) {
  const MemmapHooks* h = g_memmap.load(std::memory_order_acquire);
  if (h == nullptr) {
    TD_FAIL(c10::Error, "TensorDict::", member,
                     " needs the memmap backend, which is not linked into this program: add "
                     "\"@tensordict//td/backends/memmap\" (//td/backends/memmap inside the "
                     "tensordict workspace) to the deps of your target");
  }
  return *h;
}

const SharedMemoryHooks& SharedMemory(const char* member) {
  const SharedMemoryHooks* h = g_shared_memory.load(std::memory_order_acquire);
  if (h == nullptr) {
    TD_FAIL(c10::Error, "TensorDict::", member,
                     " needs the shared_memory backend, which is not linked into this program: "
                     "add \"@tensordict//td/backends/shared_memory\" "
                     "(//td/backends/shared_memory inside the tensordict workspace) to the deps "
                     "of your target");
  }
  return *h;
}

template <class Hooks>
bool Register(std::atomic<const Hooks*>* slot, const Hooks& hooks) {
  const Hooks* fresh = new Hooks(hooks);  // never freed: hooks live as long as the program
  const Hooks* expected = nullptr;
  if (!slot->compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) {
    delete fresh;
    return false;
  }
  return true;
}

}  // namespace

bool RegisterMemmapHooks(const MemmapHooks& hooks) {
  TORCH_CHECK(hooks.memmap && hooks.memmap_ && hooks.memmap_like && hooks.load_memmap &&
                  hooks.is_memmap,
              "RegisterMemmapHooks: every hook must be set");
  return Register(&g_memmap, hooks);
}

bool RegisterSharedMemoryHooks(const SharedMemoryHooks& hooks) {
  TORCH_CHECK(hooks.share_memory_ && hooks.is_shared,
              "RegisterSharedMemoryHooks: every hook must be set");
  return Register(&g_shared_memory, hooks);
}

TensorDict TensorDict::memmap(const std::string& prefix, const MemmapOptions& options) const {
  return Memmap("memmap").memmap(*this, prefix, options);
}

TensorDict& TensorDict::memmap_(const std::string& prefix, const MemmapOptions& options) {
  return Memmap("memmap_").memmap_(*this, prefix, options);
}

TensorDict TensorDict::memmap_like(const std::string& prefix, const MemmapOptions& options) const {
  return Memmap("memmap_like").memmap_like(*this, prefix, options);
}

TensorDict TensorDict::load_memmap(const std::string& prefix, const LoadMemmapOptions& options) {
  return Memmap("load_memmap").load_memmap(prefix, options);
}

bool TensorDict::is_memmap() const {
  const MemmapHooks* h = g_memmap.load(std::memory_order_acquire);
  return h != nullptr && h->is_memmap(*this);
}

TensorDict& TensorDict::share_memory_() {
  return SharedMemory("share_memory_").share_memory_(*this);
}

bool TensorDict::is_shared() const {
  const SharedMemoryHooks* h = g_shared_memory.load(std::memory_order_acquire);
  return h != nullptr && h->is_shared(*this);
}

}  // namespace td
