// The registry and the capability flags. The test that opens every registered backend lives in
// //td/backends:all_backends_test, which links them all.
#include "td/core/storage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace td {
namespace {

TEST(StorageRegistryTest, DenseIsRegisteredAndOpens) {
  std::vector<std::string> ids = RegisteredStorageBackends();
  EXPECT_NE(std::find(ids.begin(), ids.end(), "dense"), ids.end());
  TensorDict t = MakeTensorDict("dense", StorageSpec().batch_size({2}));
  EXPECT_EQ(t.backend(), "dense");
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({2}));
}

TEST(StorageRegistryTest, UnknownIdNamesRegisteredOnes) {
  try {
    MakeTensorDict("nope", StorageSpec());
    FAIL() << "expected KeyError";
  } catch (const KeyError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dense"), std::string::npos) << msg;
  }
}

TEST(StorageRegistryTest, DuplicateRegistrationKeepsFirst) {
  EXPECT_FALSE(RegisterStorageBackend("dense", [](const StorageSpec&) {
    return absl::StatusOr<std::shared_ptr<Storage>>(absl::InternalError("not me"));
  }));
  EXPECT_TRUE(OpenStorage("dense", StorageSpec()).ok());
}

TEST(CapabilitiesTest, FlagsAndNames) {
  Capabilities c = Capability::kInPlaceWrite | Capability::kLazy;
  EXPECT_TRUE(c.has(Capability::kLazy));
  EXPECT_FALSE(c.has(Capability::kCrossProcess));
  EXPECT_EQ(c.ToString(), "in_place_write|lazy");
  EXPECT_FALSE(c.without(Capability::kLazy).has(Capability::kLazy));
  TensorDict t;
  EXPECT_TRUE(t.storage().capabilities().has(Capability::kNewKeys));
  EXPECT_EQ(Capabilities().ToString(), "none");
  EXPECT_NE(c, c.without(Capability::kLazy));
}

// Every flag has its own name (the table covers every bit; a missing row fails to compile).
TEST(CapabilitiesTest, EveryFlagIsNamed) {
  Capabilities all;
  std::vector<std::string> names;
  for (size_t i = 0; i < kNumCapabilities; ++i) {
    const Capability c = static_cast<Capability>(1u << i);
    const std::string name(CapabilityName(c));
    EXPECT_NE(name, "unknown") << "bit " << i;
    EXPECT_EQ(Capabilities(c).ToString(), name);
    EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name;
    names.push_back(name);
    all = all | c;
  }
  EXPECT_EQ(all.ToString(),
            "in_place_write|new_keys|cross_process|lazy|replace_entries|batch_resize");
  EXPECT_EQ(Capabilities(Capability::kReplaceEntries).ToString(), "replace_entries");
  EXPECT_EQ(Capabilities(Capability::kBatchResize).ToString(), "batch_resize");
  // A bit without a row is printed, not dropped.
  const Capability unnamed = static_cast<Capability>(1u << kNumCapabilities);
  EXPECT_EQ(Capabilities(unnamed).ToString().rfind("unknown(0x", 0), 0u);
}

TEST(StorageTest, MetaDescribesEntriesWithoutReadingThem) {
  TensorDict t({{"a", at::zeros({2, 3}, at::kLong)}, {"n", {{"x", at::ones({2, 4})}}}}, {2});
  t.set("s", "text");
  const Storage& s = t.storage();
  std::optional<EntryMeta> a = s.meta("a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->kind, EntryMeta::Kind::kTensor);
  EXPECT_EQ(at::IntArrayRef(a->shape), at::IntArrayRef({2, 3}));
  EXPECT_EQ(a->dtype, at::kLong);
  EXPECT_FALSE(a->ragged());
  EXPECT_EQ(s.meta("n")->kind, EntryMeta::Kind::kTensorDict);
  EXPECT_EQ(at::IntArrayRef(s.meta("n")->shape), at::IntArrayRef({2}));
  EXPECT_EQ(s.meta("s")->kind, EntryMeta::Kind::kNonTensor);
  EXPECT_FALSE(s.meta("zz").has_value());
  EntryMeta ragged;
  ragged.shape = {2, -1};
  EXPECT_TRUE(ragged.ragged());
  EXPECT_EQ(s.lazy(), nullptr);  // dense: no lazy hooks
  EXPECT_NE(s.held_entries(), nullptr);
}

}  // namespace
}  // namespace td
