// The one mechanism by which a backend library implements TensorDict members (memmap*,
// load_memmap, is_memmap, share_memory_, is_shared). For backend authors; users call the members.
//
// NOTE [ Backend entry points ]
// Each backend package owns its entry points: its storage (registered by id, NOTE [ Storage
// interface ]), its typed handle (`X::from(td)` -> std::optional<X>: td::LazyStackedTensorDict,
// td::LazyViewTensorDict), its free functions (td::index_view, td::AttachSharedMemory,
// td::MemmapLikeReserved) and its own options. A new backend needs no edit to core.
//
// Two backends also implement TensorDict *members*, because Python's TensorDict has them and
// ported code calls `td.memmap(path)`, `td.share_memory_()`: memmap, memmap_, memmap_like,
// load_memmap, is_memmap, share_memory_, is_shared. Moving them out of TensorDict would break
// every such call and the documented Python parity, so they stay members, and core owns only
// what a member needs to exist: its declaration, its options (MemmapOptions, LoadMemmapOptions,
// MemmapMode in td/core/memmap_options.h: plain data, whose complete type the members' default
// arguments need), and one generic slot per member, internal::BackendHook<Fn> below. Core holds
// no backend logic: the backend's alwayslink library fills the slot from a static initialiser
// (`internal::hooks::memmap.Register(&Memmap)`), the same way backends register their storage
// factories. MemmapError stays in td/core/errors.h because it is not only the memmap backend's:
// it is the I/O error of every file the library maps (consolidated files, the leaf-wise
// engine's guarded copies out of mapped memory, td::data), and those do not depend on the memmap
// backend.
//
// Every member links whether or not its backend is linked into the program. Without it:
//  * an action (memmap, memmap_, memmap_like, load_memmap, share_memory_) throws c10::Error
//    naming the Bazel target to add, e.g. "TensorDict::memmap needs the memmap backend, which is
//    not linked into this program: add "@tensordict//td/backends/memmap" ...";
//  * a question (is_memmap, is_shared) answers false: without the backend linked, no TensorDict
//    or tensor of the process can be on it. This is also why //td/backends/shared_memory does
//    not link the memmap backend just to ask is_memmap().
// The lazy forms of permute, transpose, unsqueeze, squeeze, view and td::stack, which those calls
// take while lazy_legacy() is true (NOTE [ Lazy legacy ] in td/core/lazy_legacy.h), are slots of
// the same kind, filled by the lazy_view and lazy_stack backends.
// Backends depend downward only: a backend includes td/core, never the other way round.
#pragma once

#include <atomic>
#include <string>

#include "td/core/tensordict.h"

namespace td {
namespace internal {

// Throws c10::Error: `member` needs `backend`, which is not linked (naming its Bazel target).
[[noreturn]] void FailBackendNotLinked(const char* member, const char* backend);

// The slot of one TensorDict member that a backend implements (NOTE [ Backend entry points ]).
// Constant-initialised, so a backend may register from any static initialiser.
template <class Fn>
class BackendHook {
 public:
  // `member`: "TensorDict::memmap"; `backend`: the package under td/backends/ that implements it.
  constexpr BackendHook(const char* member, const char* backend)
      : member_(member), backend_(backend) {}
  BackendHook(const BackendHook&) = delete;
  BackendHook& operator=(const BackendHook&) = delete;

  // Called once by the backend (static initialiser of its alwayslink library); returns true.
  // A second registration changes nothing and returns false. Throws c10::Error for nullptr.
  bool Register(Fn* fn) {
    TORCH_CHECK(fn != nullptr, member_, ": the ", backend_, " backend registered no function");
    Fn* expected = nullptr;
    return fn_.compare_exchange_strong(expected, fn, std::memory_order_acq_rel);
  }
  // The implementation, or nullptr when the backend is not linked.
  Fn* get() const { return fn_.load(std::memory_order_acquire); }
  // The implementation; throws c10::Error naming the target to link when there is none.
  Fn& require() const {
    Fn* fn = get();
    if (fn == nullptr) FailBackendNotLinked(member_, backend_);
    return *fn;
  }

 private:
  const char* member_;
  const char* backend_;
  std::atomic<Fn*> fn_{nullptr};
};

// One slot per backend-implemented member (defined in backend_hooks.cc).
namespace hooks {
extern BackendHook<TensorDict(const TensorDict&, const std::string&, const MemmapOptions&)>
    memmap;
extern BackendHook<TensorDict&(TensorDict&, const std::string&, const MemmapOptions&)> memmap_;
extern BackendHook<TensorDict(const TensorDict&, const std::string&, const MemmapOptions&)>
    memmap_like;
extern BackendHook<TensorDict(const std::string&, const LoadMemmapOptions&)> load_memmap;
extern BackendHook<bool(const TensorDict&)> is_memmap;
extern BackendHook<TensorDict&(TensorDict&)> share_memory_;
extern BackendHook<bool(const TensorDict&)> is_shared;
// While lazy_legacy() is true.
extern BackendHook<TensorDict(const TensorDict&, at::IntArrayRef)> permute_view;
extern BackendHook<TensorDict(const TensorDict&, int64_t, int64_t)> transpose_view;
extern BackendHook<TensorDict(const TensorDict&, int64_t)> unsqueeze_view;
extern BackendHook<TensorDict(const TensorDict&, int64_t)> squeeze_view;
extern BackendHook<TensorDict(const TensorDict&, at::IntArrayRef)> reshape_view;
extern BackendHook<TensorDict(const std::vector<TensorDict>&, int64_t)> lazy_stack;
}  // namespace hooks

}  // namespace internal
}  // namespace td
