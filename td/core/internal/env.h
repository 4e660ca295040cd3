// Boolean switches read from the environment (the library's defaults that upstream reads from
// environment variables: LAZY_LEGACY_OP, COMPOSITE_LP_AGGREGATE).
#pragma once

namespace td {
namespace internal {

// True when environment variable `name` is 1 / true / yes / on / y / t (any case), false when it
// is unset or anything else.
bool EnvFlag(const char* name);

}  // namespace internal
}  // namespace td
