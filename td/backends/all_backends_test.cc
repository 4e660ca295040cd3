// Opens every registered storage backend by its id, and checks that the ids //td/backends:all
// registers are exactly the ones td/backends/BUILD.bazel lists (so a dropped registration, e.g.
// a backend library that lost `alwayslink`, fails here).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "td/core/storage.h"
#include "td/core/testing.h"

namespace {

std::vector<std::string>* ExpectedIds() {
  static auto* ids = new std::vector<std::string>;
  return ids;
}

TEST(AllBackendsTest, RegisteredIdsAreTheListedOnes) {
  ASSERT_FALSE(ExpectedIds()->empty()) << "run with --expected_ids=a,b,...";
  EXPECT_EQ(absl::StrJoin(td::RegisteredStorageBackends(), ","),
            absl::StrJoin(*ExpectedIds(), ","));
}

TEST(AllBackendsTest, EveryBackendOpensAndTakesAKey) {
  for (const std::string& id : td::RegisteredStorageBackends()) {
    SCOPED_TRACE(id);
    td::StorageSpec spec = td::StorageSpec().batch_size({2, 1, 3});
    absl::StatusOr<std::shared_ptr<td::Storage>> opened = td::OpenStorage(id, spec);
    ASSERT_TRUE(opened.ok()) << "backend '" << id << "' does not open: " << opened.status();
    td::TensorDict t(*opened);
    EXPECT_EQ(t.backend(), id);
    EXPECT_EQ(t.batch_size(), at::IntArrayRef({2, 1, 3}));
    EXPECT_TRUE(t.is_empty());
    if (t.storage().capabilities().has(td::Capability::kNewKeys)) {
      at::Tensor x = at::arange(24.0).view({2, 1, 3, 4});
      t.set("x", x);
      EXPECT_TRUE(t.get("x").equal(x));
      EXPECT_EQ(t.keys(), std::vector<td::NestedKey>{"x"});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    const std::string flag = "--expected_ids=";
    if (arg.rfind(flag, 0) == 0) {
      *ExpectedIds() = absl::StrSplit(arg.substr(flag.size()), ',', absl::SkipEmpty());
    }
  }
  return RUN_ALL_TESTS();
}
