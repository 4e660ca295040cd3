// NOTE [ Status to exception ] (td/core/errors.h): which exception type each absl status code
// becomes, with and without a backend's I/O error type, and what the message carries.
#include "td/core/errors.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <typeinfo>

namespace td {
namespace {

// The exact dynamic type of what `fn` throws (a c10::Error), by name; "none" if nothing.
template <class F>
std::string ThrownType(F fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::type_info& t = typeid(e);
    if (t == typeid(KeyError)) return "KeyError";
    if (t == typeid(MemmapError)) return "MemmapError";
    if (t == typeid(ValueError)) return "ValueError";
    if (t == typeid(IndexError)) return "IndexError";
    if (t == typeid(c10::Error)) return "c10::Error";
    return std::string("other: ") + t.name();
  }
  return "none";
}

std::string Default(const absl::Status& s) {
  return ThrownType([&] { ThrowIfError(s); });
}
std::string Memmap(const absl::Status& s) {
  return ThrownType([&] { ThrowIfError<MemmapError>(s); });
}
std::string Plain(const absl::Status& s) {
  return ThrownType([&] { ThrowIfError<c10::Error>(s); });
}

TEST(ErrorsTest, OkStatusDoesNotThrow) {
  EXPECT_EQ(Default(absl::OkStatus()), "none");
  EXPECT_EQ(Memmap(absl::OkStatus()), "none");
  EXPECT_EQ(ValueOrThrow(absl::StatusOr<int>(3)), 3);
  EXPECT_EQ(ValueOrThrow<MemmapError>(absl::StatusOr<int>(4)), 4);
  // Move-only values come out by move.
  std::unique_ptr<int> p =
      ValueOrThrow(absl::StatusOr<std::unique_ptr<int>>(std::make_unique<int>(5)));
  EXPECT_EQ(*p, 5);
}

TEST(ErrorsTest, DefaultMapping) {
  EXPECT_EQ(Default(absl::NotFoundError("x")), "KeyError");
  EXPECT_EQ(Default(absl::InvalidArgumentError("x")), "ValueError");
  EXPECT_EQ(Default(absl::FailedPreconditionError("x")), "ValueError");
  EXPECT_EQ(Default(absl::OutOfRangeError("x")), "IndexError");
  EXPECT_EQ(Default(absl::DataLossError("x")), "c10::Error");
  EXPECT_EQ(Default(absl::UnavailableError("x")), "c10::Error");
  EXPECT_EQ(Default(absl::PermissionDeniedError("x")), "c10::Error");
  EXPECT_EQ(Default(absl::InternalError("x")), "c10::Error");
  EXPECT_EQ(Default(absl::UnknownError("x")), "c10::Error");
}

// memmap's contract: a bad argument is a ValueError, everything about its files (missing ones
// included) a MemmapError.
TEST(ErrorsTest, BackendIoErrorType) {
  EXPECT_EQ(Memmap(absl::NotFoundError("x")), "MemmapError");
  EXPECT_EQ(Memmap(absl::DataLossError("x")), "MemmapError");
  EXPECT_EQ(Memmap(absl::UnavailableError("x")), "MemmapError");
  EXPECT_EQ(Memmap(absl::InternalError("x")), "MemmapError");
  EXPECT_EQ(Memmap(absl::PermissionDeniedError("x")), "MemmapError");
  EXPECT_EQ(Memmap(absl::InvalidArgumentError("x")), "ValueError");
  EXPECT_EQ(Memmap(absl::FailedPreconditionError("x")), "ValueError");
  EXPECT_EQ(Memmap(absl::OutOfRangeError("x")), "IndexError");
  // shared memory's: c10::Error for its segments, a missing one included.
  EXPECT_EQ(Plain(absl::NotFoundError("x")), "c10::Error");
  EXPECT_EQ(Plain(absl::DataLossError("x")), "c10::Error");
  EXPECT_EQ(Plain(absl::InvalidArgumentError("x")), "ValueError");
  EXPECT_EQ(
      ThrownType([] { ValueOrThrow<MemmapError>(absl::StatusOr<int>(absl::NotFoundError("x"))); }),
      "MemmapError");
  EXPECT_EQ(ThrownType([] { ValueOrThrow(absl::StatusOr<int>(absl::NotFoundError("x"))); }),
            "KeyError");
}

TEST(ErrorsTest, MessageAndLocation) {
  try {
    ThrowIfError(absl::DataLossError("file f is short"));
    FAIL() << "no throw";
  } catch (const c10::Error& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), "file f is short");
    // The caller's location, not errors.cc's.
    EXPECT_NE(std::string(e.what()).find("errors_test.cc"), std::string::npos) << e.what();
  }
  try {
    ValueOrThrow<MemmapError>(absl::StatusOr<int>(absl::NotFoundError("no file m")), "load");
    FAIL() << "no throw";
  } catch (const MemmapError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), "load: no file m");
    EXPECT_NE(std::string(e.what()).find("errors_test.cc"), std::string::npos) << e.what();
  }
  try {
    ThrowIfError<c10::Error>(absl::InvalidArgumentError("malformed handle: x"), "Attach");
    FAIL() << "no throw";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), "Attach: malformed handle: x");
  }
}

}  // namespace
}  // namespace td
