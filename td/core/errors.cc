#include "td/core/errors.h"

namespace td {

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  std::string msg(status.message());
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      throw KeyError(std::move(msg), std::string());
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      throw ValueError(std::move(msg), std::string());
    case absl::StatusCode::kOutOfRange:
      throw IndexError(std::move(msg), std::string());
    default:
      throw c10::Error(std::move(msg), std::string());
  }
}

}  // namespace td
