// lazy_legacy() and SetLazyLegacy (NOTE [ Lazy legacy ] in td/core/lazy_legacy.h), and
// internal::EnvFlag.
#include "td/core/lazy_legacy.h"

#include <absl/strings/ascii.h>

#include <cstdlib>
#include <string>

#include "td/core/internal/env.h"

namespace td {
namespace internal {

bool EnvFlag(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr) return false;
  const std::string v = absl::AsciiStrToLower(env);
  return v == "1" || v == "true" || v == "yes" || v == "on" || v == "y" || v == "t";
}

}  // namespace internal

namespace {

thread_local std::optional<bool> current_lazy_legacy;

}  // namespace

bool lazy_legacy() {
  if (current_lazy_legacy) return *current_lazy_legacy;
  static const bool from_env = internal::EnvFlag("LAZY_LEGACY_OP");
  return from_env;
}

SetLazyLegacy::SetLazyLegacy(bool mode) : previous_(current_lazy_legacy) {
  current_lazy_legacy = mode;
}

SetLazyLegacy::~SetLazyLegacy() { current_lazy_legacy = previous_; }

}  // namespace td
