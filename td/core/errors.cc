#include "td/core/errors.h"

namespace td {

void ThrowIfError(const absl::Status& status, const compat::SourceLoc& loc) {
  if (status.ok()) return;
  std::string msg(status.message());
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      throw compat::MakeError<KeyError>(loc, std::move(msg));
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      throw compat::MakeError<ValueError>(loc, std::move(msg));
    case absl::StatusCode::kOutOfRange:
      throw compat::MakeError<IndexError>(loc, std::move(msg));
    default:
      throw compat::MakeError<c10::Error>(loc, std::move(msg));
  }
}

}  // namespace td
