// TensorClass instances through upstream's generic names: set / del_ by field name,
// is_tensorclass / is_tensor_collection, and td::io's to_dict / save / load on a class.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/dict.h"
#include "td/io/io.h"
#include "td/tensorclass/tensorclass.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::Episode;
using test::MyData;

TEST(TensorClassGeneric, SetAndDelByFieldName) {
  MyData d(at::zeros({3, 2}), at::ones({3}, at::kBool), at::arange(3), {3});
  d.set("label", at::full({3}, 7, at::kLong));
  EXPECT_TRUE(d.label().equal(at::full({3}, 7, at::kLong)));
  TD_EXPECT_THROW_MSG(d.set("labels", at::zeros({3})), KeyError, {"MyData", "'labels'", "'image', 'mask', 'label'"});
  TD_EXPECT_THROW_MSG(d.set("label", at::zeros({4})), BatchSizeError, {"'label'"});
  Episode e = test::SampleEpisode();
  e.set("name", "renamed");
  EXPECT_EQ(e.name(), "renamed");
  TD_EXPECT_THROW_MSG(e.set("name", at::zeros({4})), TypeError, {"Episode.set", "'name'"});
  e.set("weight", at::ones({4}));
  ASSERT_TRUE(e.weight().has_value());
  e.del_("weight");
  EXPECT_FALSE(e.weight().has_value());
  TD_EXPECT_THROW_MSG(e.del_("reward"), ValueError, {"'reward'", "required"});
  TD_EXPECT_THROW_MSG(e.del_("nope"), KeyError, {"'nope'"});
}

TEST(TensorClassGeneric, DataAndGrad) {
  MyData d(at::ones({3, 2}).requires_grad_(), at::ones({3}, at::kBool), at::arange(3), {3});
  MyData data = d.data();
  EXPECT_FALSE(data.image().requires_grad());
  EXPECT_EQ(data.image().data_ptr(), d.image().data_ptr());  // shares memory
  d.image().sum().backward();
  MyData grad = d.grad();
  EXPECT_TRUE(grad.image().equal(at::ones({3, 2})));
}

TEST(TensorClassGeneric, StateDictRoundTrip) {
  Episode trained = test::SampleEpisode();
  Episode fresh = trained.clone();
  fresh.set_reward(at::zeros({4, 3}));
  fresh.step().set_obs(at::zeros({4, 2, 5}));
  const TensorMap state = trained.state_dict();
  EXPECT_TRUE(state.contains("step.obs"));
  Episode& same = fresh.load_state_dict(state);
  EXPECT_EQ(&same, &fresh);
  EXPECT_TRUE(fresh.reward().equal(trained.reward()));
  EXPECT_TRUE(fresh.step().obs().equal(trained.step().obs()));
  EXPECT_FALSE(fresh.reward().is_same(trained.reward()));  // copied in place, not shared
  fresh.load_state_dict(trained.state_dict_with_metadata());
  TensorMap bad;
  bad.insert("nope.x", at::zeros({4}));
  TD_EXPECT_THROW_MSG(fresh.load_state_dict(bad, /*strict=*/false), KeyError, {"Episode", "'nope.x'"});
  EXPECT_FALSE(fresh.tensordict().contains("nope"));
}

TEST(TensorClassGeneric, IsTensorclassAndCollection) {
  static_assert(is_tensorclass<MyData>());
  static_assert(!is_tensorclass<TensorDict>());
  static_assert(is_tensor_collection<TensorDict>());
  static_assert(is_tensor_collection<const MyData&>());
  static_assert(!is_tensor_collection<at::Tensor>());
  MyData d(at::zeros({3, 2}), at::ones({3}, at::kBool), at::arange(3), {3});
  EXPECT_TRUE(is_tensorclass(d));
  EXPECT_TRUE(is_tensor_collection(d.tensordict()));
  EXPECT_FALSE(is_tensor_collection(at::zeros({1})));
}

TEST(TensorClassGeneric, ToDictAndSaveLoad) {
  Episode e = test::SampleEpisode();
  const c10::impl::GenericDict dict = to_dict(e).toGenericDict();
  EXPECT_TRUE(dict.at("reward").toTensor().is_same(e.reward()));
  EXPECT_EQ(dict.at("step").toGenericDict().at("tag").toStringRef(), "s");
  EXPECT_EQ(dict.at("seed").toInt(), 7);
  // A class rebuilt from the dict: from_dict then from_tensordict (which checks the fields).
  MyData d(at::zeros({3, 2}), at::ones({3}, at::kBool), at::arange(3), {3});
  MyData back = MyData::from_tensordict(from_dict(to_dict(d), FromDictOptions().batch_dims(1)));
  EXPECT_EQ(back.batch_size(), at::IntArrayRef({3}));
  EXPECT_TRUE(back.label().equal(at::arange(3)));
  // save / load of a class's fields as a .tdz archive.
  const std::string dir = testing_util::FreshDir("tc");
  save(e, dir + "/ep.tdz");
  Episode loaded = Episode::from_tensordict(load(dir + "/ep.tdz"));
  EXPECT_TRUE(loaded.reward().equal(e.reward()));
  EXPECT_EQ(loaded.info(), e.info());
}

}  // namespace
}  // namespace td
