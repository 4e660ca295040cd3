// Conformance: the three kinds of non-tensor data on every backend (NOTE [ Non-tensor stacks ]
// in td/core/internal/non_tensor_stack.h). A NonTensorStack set into the backend reads back as
// set, and every element-moving op on the backend gives the dense answer. A backend with no form
// for one value per element declares `static constexpr bool kHoldsNonTensorStacks = false;` in
// its traits and must refuse the set by name, leaving the TensorDict as it was; one that stores
// MetaData as its plain value (HDF5, as upstream's) declares `kKeepsMetaData = false` and reads
// it back as NonTensorData.
#pragma once

#include <string>
#include <type_traits>

#include "tests/conformance/conformance_fixture.h"

namespace td {
namespace conformance {

template <class T, class = void>
struct HoldsNonTensorStacks : std::true_type {};
template <class T>
struct HoldsNonTensorStacks<T, std::void_t<decltype(T::kHoldsNonTensorStacks)>>
    : std::bool_constant<T::kHoldsNonTensorStacks> {};
template <class T, class = void>
struct KeepsMetaData : std::true_type {};
template <class T>
struct KeepsMetaData<T, std::void_t<decltype(T::kKeepsMetaData)>>
    : std::bool_constant<T::kKeepsMetaData> {};

// "t<i>" for every element of Batch(), nested as it, i counting in row-major order.
inline nlohmann::json StackValues(size_t d = 0, int64_t* next = nullptr) {
  int64_t first = 0;
  if (next == nullptr) next = &first;
  const std::vector<int64_t> b = Batch();
  if (d == b.size()) return "t" + std::to_string((*next)++);
  nlohmann::json out = nlohmann::json::array();
  for (int64_t k = 0; k < b[d]; ++k) out.push_back(StackValues(d + 1, next));
  return out;
}

TYPED_TEST_P(Conformance, NonTensorKinds) {
  TD_CONFORMANCE_REQUIRE(kNewKeys);
  TensorDict t = this->Make();
  TensorDict ref = ReferenceContent();
  const NonTensorData values = NonTensorData::stack(StackValues());
  const NonTensorData meta = NonTensorData::meta({{"robot", "franka"}});
  t.set("info", meta);
  ref.set("info", KeepsMetaData<TypeParam>::value ? meta : NonTensorData(meta.data));
  EXPECT_EQ(t.get_value("info").non_tensor_data(), ref.get_value("info").non_tensor_data());
  if (!HoldsNonTensorStacks<TypeParam>::value) {
    try {
      t.set("tag", values);
      ADD_FAILURE() << "the '" << TypeParam::kBackendId << "' backend took a NonTensorStack";
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      EXPECT_NE(what.find("NonTensorStack"), std::string::npos) << what;
      EXPECT_NE(what.find("tag"), std::string::npos) << what;
    }
    EXPECT_FALSE(t.contains("tag"));
    ExpectSame(t, ref);
    return;
  }
  t.set("tag", values);
  ref.set("tag", values);
  EXPECT_EQ(t.get_value("tag").non_tensor_data(), values);
  ExpectSame(t, ref);
  using at::indexing::Slice;
  ExpectSame(t.index({1}), ref.index({1}));
  ExpectSame(t.index({Slice(1, 3), 0}), ref.index({Slice(1, 3), 0}));
  ExpectSame(t.index({at::tensor({3, 0}, at::kLong)}), ref.index({at::tensor({3, 0}, at::kLong)}));
  ExpectSame(t.index({0, 1, 1, 0}), ref.index({0, 1, 1, 0}));
  EXPECT_EQ(t.index({0, 1, 1, 0}).get_value("tag").non_tensor_data(), NonTensorData("t3"));
  ExpectSame(t.permute({3, 2, 1, 0}), ref.permute({3, 2, 1, 0}));
  ExpectSame(t.reshape({-1}), ref.reshape({-1}));
  ExpectSame(t.unbind(1)[2], ref.unbind(1)[2]);
  ExpectSame(stack({t, t.flip({0})}, 1), stack({ref, ref.flip({0})}, 1));
  ExpectSame(t.to_dense(), ref);
  // A reduction over batch dims has no place for the values.
  TD_EXPECT_THROW_MSG(t.sum(std::vector<int64_t>{0}), ValueError, {"NonTensorStack 'tag'"});
}

}  // namespace conformance
}  // namespace td
