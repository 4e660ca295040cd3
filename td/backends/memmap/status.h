// Where the memmap backend's internal absl::Status becomes an exception (internal).
// See NOTE [ Errors: exceptions at the API, Status inside ] in td/core/errors.h: file and format
// code returns Status; every public entry point of the backend calls Check / ValueOrThrowMemmap
// at its boundary. InvalidArgument (a bad argument: key, option, dtype) becomes ValueError;
// every other code (a file or directory that cannot be read, written or trusted) becomes
// MemmapError.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/errors.h"

namespace td {
namespace memmap_internal {

inline void Check(const absl::Status& status,
                  const compat::SourceLoc& loc = compat::SourceLoc::current()) {
  if (status.ok()) return;
  std::string msg(status.message());
  if (status.code() == absl::StatusCode::kInvalidArgument) {
    throw compat::MakeError<ValueError>(loc, std::move(msg));
  }
  throw compat::MakeError<MemmapError>(loc, std::move(msg));
}

template <class T>
T ValueOrThrowMemmap(absl::StatusOr<T> value,
                     const compat::SourceLoc& loc = compat::SourceLoc::current()) {
  Check(value.status(), loc);
  return *std::move(value);
}

}  // namespace memmap_internal
}  // namespace td
