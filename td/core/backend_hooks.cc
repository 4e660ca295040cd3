// TensorDict's backend-provided members: each calls the hook its backend registered (see
// NOTE [ Backend entry points ] in td/core/internal/backend_hooks.h).
#include "td/core/internal/backend_hooks.h"

#include "td/core/errors.h"
#include "td/core/internal/names.h"

namespace td {
namespace internal {

void FailBackendNotLinked(const char* member, const char* backend) {
  TD_FAIL(c10::Error, member, " needs the ", backend,
          " backend, which is not linked into this program: add \"@tensordict//td/backends/",
          backend, "\" (//td/backends/", backend,
          " inside the tensordict workspace) to the deps of your target");
}

namespace hooks {
BackendHook<TensorDict(const TensorDict&, const std::string&, const MemmapOptions&)> memmap(
    "TensorDict::memmap", "memmap");
BackendHook<TensorDict&(TensorDict&, const std::string&, const MemmapOptions&)> memmap_(
    "TensorDict::memmap_", "memmap");
BackendHook<TensorDict(const TensorDict&, const std::string&, const MemmapOptions&)> memmap_like(
    "TensorDict::memmap_like", "memmap");
BackendHook<TensorDict(const std::string&, const LoadMemmapOptions&)> load_memmap(
    "TensorDict::load_memmap", "memmap");
BackendHook<bool(const TensorDict&)> is_memmap("TensorDict::is_memmap", "memmap");
BackendHook<TensorDict&(TensorDict&)> share_memory_("TensorDict::share_memory_",
                                                    "shared_memory");
BackendHook<bool(const TensorDict&)> is_shared("TensorDict::is_shared", "shared_memory");
BackendHook<TensorDict(const TensorDict&, at::IntArrayRef)> permute_view(
    "TensorDict::permute under lazy_legacy()", "lazy_view");
BackendHook<TensorDict(const TensorDict&, int64_t, int64_t)> transpose_view(
    "TensorDict::transpose under lazy_legacy()", "lazy_view");
BackendHook<TensorDict(const TensorDict&, int64_t)> unsqueeze_view(
    "TensorDict::unsqueeze under lazy_legacy()", "lazy_view");
BackendHook<TensorDict(const TensorDict&, int64_t)> squeeze_view(
    "TensorDict::squeeze under lazy_legacy()", "lazy_view");
BackendHook<TensorDict(const TensorDict&, at::IntArrayRef)> reshape_view(
    "TensorDict::view under lazy_legacy()", "lazy_view");
BackendHook<TensorDict(const std::vector<TensorDict>&, int64_t)> lazy_stack(
    "td::stack under lazy_legacy()", "lazy_stack");
}  // namespace hooks

}  // namespace internal

// The files do not record dim names (upstream's neither); the returned TensorDicts keep them
// (NOTE [ Dim names ] in td/core/names.cc).
TensorDict TensorDict::memmap(const std::string& prefix, const MemmapOptions& options) const {
  TensorDict out = internal::hooks::memmap.require()(*this, prefix, options);
  internal::CopyNames(*this, out);
  return out;
}

TensorDict& TensorDict::memmap_(const std::string& prefix, const MemmapOptions& options) {
  return internal::hooks::memmap_.require()(*this, prefix, options);
}

TensorDict TensorDict::memmap_like(const std::string& prefix, const MemmapOptions& options) const {
  TensorDict out = internal::hooks::memmap_like.require()(*this, prefix, options);
  internal::CopyNames(*this, out);
  return out;
}

TensorDict TensorDict::load_memmap(const std::string& prefix, const LoadMemmapOptions& options) {
  return internal::hooks::load_memmap.require()(prefix, options);
}

bool TensorDict::is_memmap() const {
  auto* fn = internal::hooks::is_memmap.get();
  return fn != nullptr && fn(*this);
}

TensorDict& TensorDict::share_memory_() { return internal::hooks::share_memory_.require()(*this); }

bool TensorDict::is_shared() const {
  auto* fn = internal::hooks::is_shared.get();
  return fn != nullptr && fn(*this);
}

}  // namespace td
