// Python's dtype names, and the structure rules' reading of them (names: memmap, consolidated
// files, shared-memory handles; codes: td::distributed's wire), for the dtypes only some LibTorch
// versions have (NOTE [ Dtypes by LibTorch version ] in td/compat/dtypes.h): accepted where this
// LibTorch has them, refused in compat::NoSuchDtypeMessage's words where it does not.
#include "td/core/dtype.h"

#include <gtest/gtest.h>

#include <string>

#include "td/compat/dtypes.h"
#include "td/core/internal/structure_check.h"

namespace td {
namespace {

TEST(Dtype, OlderNamesAndCodes) {
  EXPECT_EQ(DtypeName(c10::kFloat), "torch.float32");
  EXPECT_EQ(ParseDtypeName("torch.long"), c10::kLong);
  EXPECT_EQ(*internal::DtypeFromCode(static_cast<int64_t>(c10::kBFloat16)), c10::kBFloat16);
  const absl::StatusOr<c10::ScalarType> unknown = internal::DtypeFromName("torch.float99");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unknown dtype \"torch.float99\"");
  EXPECT_FALSE(internal::DtypeFromCode(99).ok());
}

TEST(Dtype, NewerDtypesWhereThisLibTorchHasThem) {
  for (const compat::NewerDtypeInfo& d : compat::kNewerDtypes) {
    SCOPED_TRACE(std::string(d.name));
    const absl::StatusOr<c10::ScalarType> by_name = internal::DtypeFromName(d.name);
    const absl::StatusOr<c10::ScalarType> by_code = internal::DtypeFromCode(d.code);
    if (d.type) {
      EXPECT_EQ(DtypeName(*d.type), d.name);
      EXPECT_EQ(DtypeRepr(*d.type), d.name);
      EXPECT_EQ(ParseDtypeName(d.name), d.type);
      ASSERT_TRUE(by_name.ok()) << by_name.status();
      EXPECT_EQ(*by_name, *d.type);
      ASSERT_TRUE(by_code.ok()) << by_code.status();
      EXPECT_EQ(*by_code, *d.type);
    } else {
      EXPECT_FALSE(ParseDtypeName(d.name).has_value());
      ASSERT_FALSE(by_name.ok());
      EXPECT_EQ(by_name.status().message(), compat::NoSuchDtypeMessage(d));
      ASSERT_FALSE(by_code.ok());
      EXPECT_NE(std::string(by_code.status().message()).find(compat::NoSuchDtypeMessage(d)),
                std::string::npos)
          << by_code.status();
    }
  }
}

}  // namespace
}  // namespace td
