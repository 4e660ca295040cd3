// The library's version (upstream's `tensordict.__version__`), at compile time and at run time.
//
//   #if TD_VERSION_AT_LEAST(0, 1, 0) ... #endif
//   std::cout << td::version();                 // "0.1.0"
//   std::cout << td::upstream_version();        // "0.14": the Python tensordict API followed
// Header only. Bazel: //td:version. See README.md.
#pragma once

#define TD_VERSION_MAJOR 0
#define TD_VERSION_MINOR 1
#define TD_VERSION_PATCH 0
// True when the library is at least MAJOR.MINOR.PATCH.
#define TD_VERSION_AT_LEAST(major, minor, patch)                                     \
  (TD_VERSION_MAJOR > (major) ||                                                     \
   (TD_VERSION_MAJOR == (major) &&                                                   \
    (TD_VERSION_MINOR > (minor) || (TD_VERSION_MINOR == (minor) && TD_VERSION_PATCH >= (patch)))))

namespace td {

// "MAJOR.MINOR.PATCH", from the macros above.
constexpr const char* version() {
#define TD_VERSION_STR2(x) #x
#define TD_VERSION_STR(x) TD_VERSION_STR2(x)
  return TD_VERSION_STR(TD_VERSION_MAJOR) "." TD_VERSION_STR(TD_VERSION_MINOR) "." TD_VERSION_STR(
      TD_VERSION_PATCH);
#undef TD_VERSION_STR
#undef TD_VERSION_STR2
}

// The version of Python tensordict whose API and file formats this library follows.
constexpr const char* upstream_version() { return "0.14"; }

}  // namespace td
