#include "td/core/errors.h"

namespace td {
namespace internal {

// NOTE [ Status to exception ] in errors.h.
void ThrowStatus(const absl::Status& status, std::string_view context, const compat::SourceLoc& loc,
                 ThrowErrorFn io_error) {
  std::string msg =
      context.empty() ? std::string(status.message()) : c10::str(context, ": ", status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      ThrowError<ValueError>(loc, std::move(msg));
    case absl::StatusCode::kOutOfRange:
      ThrowError<IndexError>(loc, std::move(msg));
    case absl::StatusCode::kNotFound:
      if (io_error == nullptr) ThrowError<KeyError>(loc, std::move(msg));
      break;
    default:
      break;
  }
  if (io_error != nullptr) io_error(loc, msg);
  ThrowError<c10::Error>(loc, std::move(msg));
}

}  // namespace internal
}  // namespace td
