// Tests of to_dict and tolist (td/core/interop.cc): every entry against the TensorDict's own,
// nested levels and non-tensor data included.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "td/core/testing.h"

namespace td {
namespace {

// `dict` holds exactly the entries of `td` (tensors equal, nested levels recursed, non-tensor
// data as strings), and no batch size or device entries.
void ExpectDictOf(const c10::IValue& dict, const TensorDict& td) {
  ASSERT_TRUE(dict.isGenericDict());
  const c10::impl::GenericDict d = dict.toGenericDict();
  EXPECT_EQ(d.size(), td.num_keys());
  EXPECT_FALSE(d.contains(std::string(kIValueBatchSizeKey)));
  EXPECT_FALSE(d.contains(std::string(kIValueDeviceKey)));
  for (const TensorDict::Item& item : td.items()) {
    const std::string& k = item.first[0];
    ASSERT_TRUE(d.contains(k)) << k;
    const c10::IValue v = d.at(k);
    if (item.second.is_tensor()) {
      ASSERT_TRUE(v.isTensor()) << k;
      EXPECT_TRUE(v.toTensor().equal(item.second.tensor())) << k;
    } else if (item.second.is_tensordict()) {
      ExpectDictOf(v, item.second.tensordict());
    } else {
      EXPECT_EQ(v.toStringRef(), item.second.non_tensor().get<std::string>()) << k;
    }
  }
}

TEST(InteropTest, ToDict) {
  const TensorDict t = test::SampleTensorDict();
  const c10::IValue d = t.to_dict();
  ExpectDictOf(d, t);
  EXPECT_TRUE(d.toGenericDict().at("a").toTensor().is_same(t.get("a")));  // shared, not copied
  // Back through from_ivalue with the batch size given.
  const TensorDict back = TensorDict::from_ivalue(d, {3, 4});
  EXPECT_TRUE(back.get({"n", "x"}).equal(t.get({"n", "x"})));
}

TEST(InteropTest, TolistNestsOverTheBatchDims) {
  const TensorDict t = test::SampleTensorDict();  // batch [3, 4]
  const c10::IValue rows = t.tolist();
  ASSERT_TRUE(rows.isList());
  ASSERT_EQ(rows.toListRef().size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    const c10::IValue row = rows.toListRef()[i];
    ASSERT_TRUE(row.isList());
    ASSERT_EQ(row.toListRef().size(), 4u);
    for (int64_t j = 0; j < 4; ++j) {
      SCOPED_TRACE(std::to_string(i) + ", " + std::to_string(j));
      ExpectDictOf(row.toListRef()[j], t.index({i, j}));
    }
  }
  // No batch dim: to_dict().
  const TensorDict scalar({{"a", at::ones({2})}, {"s", "x"}}, {});
  ExpectDictOf(scalar.tolist(), scalar);
  // A zero-size batch dim: an empty list.
  EXPECT_EQ(t.index({at::indexing::Slice(0, 0)}).tolist().toListRef().size(), 0u);
}

}  // namespace
}  // namespace td
