// The one place that knows how the LibTorch versions this library builds against differ
// (1.13 and 2.x). See NOTE [ LibTorch versions ].
//
// NOTE [ LibTorch versions ]
// Code outside td/compat never tests TORCH_VERSION_* and never names a LibTorch symbol that exists
// in only some versions: it asks this target. Where a difference can be detected from the
// headers themselves (`__has_include`, a constructor that exists or not), the check is made on
// that rather than on a version number, so a LibTorch between or after the versions tested gets
// the right branch. Tested: 1.13.1 (Debian 12, C++17), 2.6.0 (Debian 13, tools/bazelw-debian13)
// and 2.14.1 (Debian sid, tools/bazelw-sid; C++20 on both 2.x, NOTE [ C++ standard ] in
// tensordict_deps.bzl). The private members this
// library relies on (td/compat/module_access.h) and the OpenMP runtime lookup (td/compat/omp.h)
// live here too; //td/compat:compat_test fails on any LibTorch whose layout they no longer
// match.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>
#include <torch/csrc/api/include/torch/version.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#if __has_include(<c10/util/Lazy.h>)
#include <c10/util/Lazy.h>
#endif
#if TORCH_VERSION_MAJOR < 2
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>
#else
#include <string_view>
#endif

namespace td::compat {

// The LibTorch this translation unit is compiled against.
inline constexpr int kTorchVersionMajor = TORCH_VERSION_MAJOR;
inline constexpr int kTorchVersionMinor = TORCH_VERSION_MINOR;

// at::_foreach_lerp / _foreach_lerp_ exist (LibTorch >= 2.0).
inline constexpr bool kHasForeachLerp = TORCH_VERSION_MAJOR >= 2;

// torch.uint16 / uint32 / uint64 exist (LibTorch >= 2.3; the enum values cannot be detected
// from the headers otherwise).
inline constexpr bool kHasWideUnsignedDtypes =
    TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3);
// The unsigned dtype of `bits` bits (8, 16, 32, 64), or nullopt when this LibTorch lacks it.
inline std::optional<c10::ScalarType> UnsignedDtype(int bits) {
  if (bits == 8) return c10::ScalarType::Byte;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  if (bits == 16) return c10::ScalarType::UInt16;
  if (bits == 32) return c10::ScalarType::UInt32;
  if (bits == 64) return c10::ScalarType::UInt64;
#endif
  return std::nullopt;
}

// The optional and string-view types of LibTorch's API (arguments of at:: functions, virtuals of
// torch::nn::Module and torch::data datasets): c10's own classes in 1.13; in 2.x the standard
// ones, whose c10:: names are deprecated aliases that C10_NODEPRECATED removes. Code outside
// td/compat spells them td::compat::Optional / kNullopt / StringView and never c10::optional.
#if TORCH_VERSION_MAJOR < 2
template <class T>
using Optional = c10::optional<T>;
inline constexpr c10::nullopt_t kNullopt = c10::nullopt;
using StringView = c10::string_view;
#else
template <class T>
using Optional = std::optional<T>;
inline constexpr std::nullopt_t kNullopt = std::nullopt;
using StringView = std::string_view;
#endif

// Where an error was raised: captured by TD_FAIL (td/core/errors.h) with __func__ / __FILE__ /
// __LINE__, or as a default argument with `SourceLoc::current()` (GCC and Clang evaluate the
// builtins at the call site).
struct SourceLoc {
  const char* function;
  const char* file;
  uint32_t line;

  static constexpr SourceLoc current(const char* function = __builtin_FUNCTION(),
                                     const char* file = __builtin_FILE(),
                                     uint32_t line = __builtin_LINE()) {
    return SourceLoc{function, file, line};
  }
};

// A c10::Error (or subclass) with message `msg` whose backtrace part is the one line
// "Exception raised from <function> at <file>:<line>", as TORCH_CHECK's first line reads, without
// capturing a stack (cheap enough for errors a caller catches and recovers from):
//   e.what()                   -> "<msg>\nException raised from Get at td/core/tensordict.cc:<n>"
//   e.what_without_backtrace() -> "<msg>"
// LibTorch 1.13 takes the backtrace as a string; 2.x as a lazily computed value.
template <class E>
E MakeError(const SourceLoc& loc, std::string msg) {
  static_assert(std::is_base_of_v<c10::Error, E>, "td errors derive from c10::Error");
  std::string where =
      c10::str("Exception raised from ", loc.function, " at ", loc.file, ":", loc.line);
  if constexpr (std::is_constructible_v<E, std::string, std::string>) {
    return E(std::move(msg), std::move(where));
  } else {
#if __has_include(<c10/util/Lazy.h>)
    return E(std::move(msg),
             std::make_shared<c10::PrecomputedLazyValue<std::string>>(std::move(where)));
#else
    static_assert(std::is_constructible_v<E, std::string, std::string>,
                  "unknown c10::Error constructors: update td/compat/torch.h");
#endif
  }
}

}  // namespace td::compat
