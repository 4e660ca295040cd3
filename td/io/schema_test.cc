// from_schema: zeros of [*batch, *element shape] under each key, on every storage it offers
// (dense, memmap, shared memory, HDF5), and its errors.
#include "td/io/schema.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/backends/h5/h5.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

const Schema kSchema = {{"obs", {{4, 3}, at::kByte}},
                        {{"next", "reward"}, {{}, at::kFloat}},
                        {"count", {{2}, at::kLong}}};

void ExpectZeros(const TensorDict& td) {
  EXPECT_EQ(td.batch_size().vec(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(td.get("obs").sizes().vec(), (std::vector<int64_t>{5, 2, 4, 3}));
  EXPECT_EQ(td.get("obs").scalar_type(), at::kByte);
  EXPECT_EQ(td.get({"next", "reward"}).sizes().vec(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(td.get({"next", "reward"}).scalar_type(), at::kFloat);
  EXPECT_EQ(td.get("count").scalar_type(), at::kLong);
  for (const auto& k : {NestedKey("obs"), NestedKey({"next", "reward"}), NestedKey("count")}) {
    EXPECT_EQ(td.get(k).count_nonzero().item<int64_t>(), 0) << k.repr();
  }
  EXPECT_EQ(td.keys(), (std::vector<NestedKey>{"obs", "next", "count"}));
}

TEST(FromSchema, DenseMemmapSharedAndH5) {
  const FromSchemaOptions base = FromSchemaOptions().batch_size({5, 2});
  TensorDict dense = from_schema(kSchema, base);
  ExpectZeros(dense);
  EXPECT_EQ(dense.backend(), "dense");
  dense.get("obs").fill_(1);  // real storage, not an expanded view
  EXPECT_EQ(dense.get("obs").sum().item<int64_t>(), 5 * 2 * 4 * 3);

  const std::string dir = testing_util::FreshDir("schema");
  TensorDict mm = from_schema(kSchema, FromSchemaOptions(base).storage(SchemaStorage::kMemmap).prefix(dir + "/mm"));
  ExpectZeros(mm);
  EXPECT_TRUE(mm.is_memmap());
  mm.get("count").fill_(7);  // written to the files
  EXPECT_EQ(TensorDict::load_memmap(dir + "/mm").get("count").sum().item<int64_t>(), 7 * 5 * 2 * 2);

  TensorDict shared = from_schema(kSchema, FromSchemaOptions(base).storage(SchemaStorage::kShared));
  ExpectZeros(shared);
  EXPECT_TRUE(shared.is_shared());

  TensorDict h5 = from_schema(kSchema, FromSchemaOptions(base).storage(SchemaStorage::kH5).filename(dir + "/z.h5"));
  ExpectZeros(h5);
  EXPECT_EQ(h5.backend(), "h5");
  EXPECT_EQ(h5::from_h5(dir + "/z.h5").get("obs").sizes().vec(), (std::vector<int64_t>{5, 2, 4, 3}));

  // No batch size: the element shapes alone.
  EXPECT_EQ(from_schema({{"x", {{3}, at::kDouble}}}).get("x").sizes().vec(), std::vector<int64_t>{3});
}

TEST(FromSchema, Errors) {
  TD_EXPECT_THROW_MSG(from_schema({{"x", {{-1}, at::kFloat}}}), ValueError, {"'x'", "negative"});
  TD_EXPECT_THROW_MSG(from_schema({{"x", {{1}, at::kFloat}}, {"x", {{2}, at::kFloat}}}), ValueError,
                      {"'x'", "twice"});
  TD_EXPECT_THROW_MSG(from_schema(kSchema, FromSchemaOptions().storage(SchemaStorage::kMemmap)),
                      ValueError, {"prefix"});
  TD_EXPECT_THROW_MSG(from_schema(kSchema, FromSchemaOptions().storage(SchemaStorage::kH5)),
                      ValueError, {"filename"});
  TD_EXPECT_THROW_MSG(from_schema(kSchema, FromSchemaOptions()
                                               .storage(SchemaStorage::kMemmap)
                                               .prefix("/tmp/x")
                                               .device(at::Device("cpu"))),
                      ValueError, {"device"});
}

}  // namespace
}  // namespace td
