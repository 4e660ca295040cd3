// Error types thrown by tensordict, and the one rule for where absl::Status meets exceptions.
//
// NOTE [ Errors: exceptions at the API, Status inside ]
// Every public call of the library reports failure by throwing, as LibTorch does: the types below
// derive from `c10::Error`, so code that already catches `c10::Error` keeps working. Internals
// that touch files, shared memory or the backend registry may return `absl::Status` /
// `absl::StatusOr<T>`; a public function that calls them converts with `td::ThrowIfError` (or
// `td::ValueOrThrow`) at its own boundary and never lets a Status escape. Messages name the key,
// the shapes and what was expected.
#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "td/compat/torch.h"

namespace td {

// A key that does not exist (or, for writes into a locked TensorDict, cannot be created).
// The message names the key and the keys that exist at that level.
class KeyError : public c10::Error {
 public:
  using c10::Error::Error;
};

// A value whose leading dimensions do not match the TensorDict's batch size, or a batch size
// that does not fit the leaves. The message names the key, the value's shape and the batch size.
class BatchSizeError : public c10::ValueError {
 public:
  using c10::ValueError::ValueError;
};

// A structural change (new key, removed key, renamed key) on a locked TensorDict.
class LockedError : public c10::Error {
 public:
  using c10::Error::Error;
};

// How many levels TensorDicts may nest: a root is at depth 0, its sub-TensorDicts at depth 1, and
// no level may sit deeper than this. Every walk of the library (destruction, clone, keys,
// printing, to, apply, memmap) recurses once per level, so the limit is what keeps them far
// from the stack's end (ASan builds and 4 MB worker-thread stacks included). The memmap writer
// and loader and the shared-memory handle parser use the same limit, so every TensorDict that can
// be built can be written, loaded and attached. See NOTE [ Nesting depth ] in
// td/core/entry_list.cc.
inline constexpr int kMaxNestingDepth = 128;

// A write that would nest a TensorDict deeper than kMaxNestingDepth levels, or make a TensorDict
// contain itself. Thrown before anything is written; the message names the key and the depth.
class NestingError : public c10::ValueError {
 public:
  using c10::ValueError::ValueError;
};

// A memmap directory or file that cannot be read or written (TensorDict::memmap / load_memmap,
// td::MemoryMappedTensor): the message names the file and the problem (missing, unexpected,
// wrong size, malformed metadata, symlink, I/O error).
class MemmapError : public c10::Error {
 public:
  using c10::Error::Error;
};

// An entry of the wrong kind (a sub-TensorDict where a tensor was asked for, ...), or a value of a
// type the operation does not accept.
using TypeError = c10::TypeError;
using ValueError = c10::ValueError;
using IndexError = c10::IndexError;

// Throws `E` with the pieces streamed together (anything with an `operator<<`), recording the
// caller's function, file and line (td/compat/torch.h, MakeError): the one way the library
// raises its errors.
//   TD_FAIL(td::KeyError, "key ", key, " not found");
// e.what() is the message plus the line "Exception raised from <function> at <file>:<line>";
// e.what_without_backtrace() is the message alone.
#define TD_FAIL(E, ...)                                                                        \
  ::td::internal::FailAt<E>(                                                                   \
      ::td::compat::SourceLoc{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, __VA_ARGS__)

namespace internal {
template <class E, class... Args>
[[noreturn]] void FailAt(const compat::SourceLoc& loc, const Args&... args) {
  throw compat::MakeError<E>(loc, c10::str(args...));
}
}  // namespace internal

// See NOTE [ Errors: exceptions at the API, Status inside ]. Throws c10::Error (or the type
// matching the status code: kNotFound -> KeyError, kInvalidArgument -> ValueError,
// kOutOfRange -> IndexError) carrying the status message and the caller's location.
void ThrowIfError(const absl::Status& status,
                  const compat::SourceLoc& loc = compat::SourceLoc::current());

template <class T>
T ValueOrThrow(absl::StatusOr<T> value,
               const compat::SourceLoc& loc = compat::SourceLoc::current()) {
  ThrowIfError(value.status(), loc);
  return *std::move(value);
}

}  // namespace td
