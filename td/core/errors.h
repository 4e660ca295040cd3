// Error types thrown by tensordict, and the one rule for where absl::Status meets exceptions.
//
// NOTE [ Errors: exceptions at the API, Status inside ]
// Every public call of the library reports failure by throwing, as LibTorch does: the types below
// derive from `c10::Error`, so code that already catches `c10::Error` keeps working. Internals
// that touch files, shared memory or the backend registry may return `absl::Status` /
// `absl::StatusOr<T>`; a public function that calls them converts with `td::ThrowIfError` (or
// `td::ValueOrThrow`) at its own boundary and never lets a Status escape; nothing else maps
// status codes to exception types (NOTE [ Status to exception ]). Messages name the key, the
// shapes and what was expected.
#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>
#include <string_view>
#include <type_traits>
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

// NOTE [ Status to exception ]
// td::ThrowIfError is the one bridge from absl::Status to the exceptions above; it throws for a
// non-ok status (message: `context`, ": " and the status message, or the status message alone),
// choosing the type by the status code:
//   kInvalidArgument, kFailedPrecondition   ValueError (a bad argument, or a call the object's
//                                           state does not allow)
//   kOutOfRange                             IndexError
//   kNotFound                               KeyError; with an I/O error type: that type
//   any other code (kDataLoss, kUnavailable, kPermissionDenied, kInternal, ...)
//                                           the I/O error type; c10::Error without one
// A backend whose statuses describe its files or segments names its I/O error type as the
// template argument: memmap calls ThrowIfError<MemmapError>, so a missing, unreadable or
// malformed file is a MemmapError (NotFound there means a missing file, not a missing key) while
// a bad argument stays a ValueError; shared memory calls ThrowIfError<c10::Error>. Without one
// (ThrowIfError(status)), NotFound is a missing key (the storage registry's ids, for one).
template <class IoError = void>
void ThrowIfError(const absl::Status& status, std::string_view context = {},
                  const compat::SourceLoc& loc = compat::SourceLoc::current());

// The value of `value`, or ThrowIfError<IoError>(value.status(), context) (NOTE [ Status to
// exception ]).
template <class IoError = void, class T>
T ValueOrThrow(absl::StatusOr<T> value, std::string_view context = {},
               const compat::SourceLoc& loc = compat::SourceLoc::current()) {
  ThrowIfError<IoError>(value.status(), context, loc);
  return *std::move(value);
}

namespace internal {
using ThrowErrorFn = void (*)(const compat::SourceLoc& loc, std::string msg);

template <class E>
[[noreturn]] void ThrowError(const compat::SourceLoc& loc, std::string msg) {
  throw compat::MakeError<E>(loc, std::move(msg));
}

// ThrowIfError's mapping (errors.cc); `io_error` throws the I/O error type, or is null.
[[noreturn]] void ThrowStatus(const absl::Status& status, std::string_view context,
                              const compat::SourceLoc& loc, ThrowErrorFn io_error);
}  // namespace internal

template <class IoError>
void ThrowIfError(const absl::Status& status, std::string_view context,
                  const compat::SourceLoc& loc) {
  if (status.ok()) return;
  if constexpr (std::is_void_v<IoError>) {
    internal::ThrowStatus(status, context, loc, nullptr);
  } else {
    static_assert(std::is_base_of_v<c10::Error, IoError>, "td errors derive from c10::Error");
    internal::ThrowStatus(status, context, loc, &internal::ThrowError<IoError>);
  }
}

}  // namespace td
