// td::TensorClass: declaration, construction (positional, named, unset), typed accessors and
// setters, from_tensordict / to_tensordict, printing, and their errors.
#include "td/tensorclass/tensorclass.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "td/core/testing.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::Episode;
using test::MyData;
using test::Step;
using namespace at::indexing;

TEST(TensorClass, SeedExample) {
  test::SeedData seed = test::MakeSeedData();
  MyData data(seed.images, seed.mask, seed.label, {100});
  MyData ones = data.select_label(1);
  EXPECT_EQ(ones.batch_size(), at::IntArrayRef({11}));
  EXPECT_TRUE(at::equal(ones.label(), at::ones({11}, at::kLong)));
  EXPECT_EQ(data.mask_image().sizes(), at::IntArrayRef({100, 6117}));
  MyData grid = data.reshape({10, 10});
  EXPECT_EQ(grid.batch_size(), at::IntArrayRef({10, 10}));
  EXPECT_EQ(grid.image().sizes(), at::IntArrayRef({10, 10, 3, 64, 64}));
  std::ostringstream os;
  os << ones;
  EXPECT_EQ(os.str(),
            "MyData(\n"
            "    image=Tensor(shape=torch.Size([11, 3, 64, 64]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "    label=Tensor(shape=torch.Size([11]), device=cpu, dtype=torch.int64, "
            "is_shared=False),\n"
            "    mask=Tensor(shape=torch.Size([11, 1, 64, 64]), device=cpu, dtype=torch.bool, "
            "is_shared=False),\n"
            "    batch_size=torch.Size([11]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  EXPECT_EQ(grid.repr().rfind("MyData(\n    image=Tensor(shape=torch.Size([10, 10, 3, 64, 64]), "
                              "device=cpu, dtype=torch.float32",
                              0),
            0u);
}

// A TensorClass prints under the print options (td/core/print_options.h), as upstream's.
TEST(TensorClass, PrintOptions) {
  MyData data(at::zeros({2, 3, 4, 4}), at::ones({2, 1, 4, 4}, at::kBool), at::arange(2), {2});
  {
    PrintOptionsGuard scoped(PrintOptions().verbose(false));
    EXPECT_EQ(data.repr(),
              "MyData(\n"
              "    image=Tensor(shape=torch.Size([2, 3, 4, 4])),\n"
              "    label=Tensor(shape=torch.Size([2])),\n"
              "    mask=Tensor(shape=torch.Size([2, 1, 4, 4])),\n"
              "    batch_size=torch.Size([2]))");
  }
  PrintOptionsGuard scoped(PrintOptions()
                               .show_batch_size(false)
                               .show_device(false)
                               .show_is_shared(false)
                               .show_field_device(false)
                               .show_field_is_shared(false)
                               .sort_keys(KeyOrder::kInsertion));
  EXPECT_EQ(data.repr(),
            "MyData(\n"
            "    image=Tensor(shape=torch.Size([2, 3, 4, 4]), dtype=torch.float32),\n"
            "    mask=Tensor(shape=torch.Size([2, 1, 4, 4]), dtype=torch.bool),\n"
            "    label=Tensor(shape=torch.Size([2]), dtype=torch.int64))");
}

TEST(TensorClass, FieldsOfEveryKind) {
  Episode ep = test::SampleEpisode();
  EXPECT_EQ(ep.reward().sizes(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(ep.step().obs().sizes(), at::IntArrayRef({4, 2, 5}));
  EXPECT_EQ(ep.step().batch_size(), at::IntArrayRef({4, 2}));
  EXPECT_EQ(ep.step().tag(), "s");
  EXPECT_TRUE(at::equal(ep.extra().get("x"), at::arange(4.0)));
  EXPECT_EQ(ep.name(), "ep");
  EXPECT_EQ(ep.seed(), 7);
  EXPECT_EQ(ep.gamma(), 0.5);
  EXPECT_TRUE(ep.done());
  EXPECT_EQ(ep.info()["k"][1], 2);
  EXPECT_FALSE(ep.weight().has_value());
  EXPECT_EQ(Episode::kNumFields, 9u);
  EXPECT_EQ(Episode::field_names()[2], "extra");
  // Accessors are handles: a nested class read back writes through to its parent.
  ep.step().obs().zero_();
  EXPECT_EQ(ep.get({"step", "obs"}).abs().sum().item<float>(), 0.0f);
  ep.step().set_tag("t");
  EXPECT_EQ(ep.step().tag(), "t");
  // The nested class prints inside its parent, indented.
  const std::string text = ep.repr();
  EXPECT_NE(text.find("    step=Step(\n        obs=Tensor(shape=torch.Size([4, 2, 5])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    name=NonTensorData(data=ep, batch_size=torch.Size([4]), device=None)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("weight"), std::string::npos) << text;  // unset optional: not printed
}

TEST(TensorClass, NamedConstructionAndDevice) {
  at::Tensor x = at::randn({3, 2});
  Step s({{"tag", "a"}, {"obs", x}}, {3}, at::Device("cpu"));
  EXPECT_TRUE(s.obs().is_same(x));
  EXPECT_EQ(s.tag(), "a");
  EXPECT_EQ(s.device(), at::Device("cpu"));
  // Positional and named construction build the same object.
  Step p(x, "a", {3});
  EXPECT_TRUE((s == p).all());
  // An integer given for a double field is stored as a double.
  Episode ep = test::SampleEpisode();
  Episode named({{"reward", ep.reward()},
                 {"step", ep.step()},
                 {"extra", ep.extra()},
                 {"name", std::string("n")},
                 {"seed", 3},
                 {"gamma", 1},
                 {"done", false},
                 {"info", nlohmann::json::array({1, "x"})},
                 {"weight", at::ones({4})}},
                {4});
  EXPECT_EQ(named.gamma(), 1.0);
  EXPECT_EQ(named.seed(), 3);
  EXPECT_EQ(named.info()[1], "x");
  ASSERT_TRUE(named.weight().has_value());
  EXPECT_EQ(named.weight()->sizes(), at::IntArrayRef({4}));
}

// A number outside the declared type's range is refused with the field, the value and the type,
// by named construction, from_tensordict and the accessor (never wrapped to another value).
TEST(TensorClass, NumberFieldsOutOfRange) {
  using test::Counts;
  Counts ok({{"count", int64_t{2147483647}}, {"small", 255}, {"scale", 3.0e38}}, {});
  EXPECT_EQ(ok.count(), 2147483647);
  EXPECT_EQ(ok.small(), 255);
  TD_EXPECT_THROW_MSG(Counts({{"count", int64_t{5000000000}}, {"small", 1}, {"scale", 1.0}}, {}),
                      TypeError,
                      {"Counts field 'count'", "5000000000", "int32_t",
                       "-2147483648 to 2147483647"});
  TD_EXPECT_THROW_MSG(Counts({{"count", 1}, {"small", 300}, {"scale", 1.0}}, {}), TypeError,
                      {"field 'small'", "(300)", "uint8_t", "0 to 255"});
  TD_EXPECT_THROW_MSG(Counts({{"count", 1}, {"small", -1}, {"scale", 1.0}}, {}), TypeError,
                      {"field 'small'", "(-1)", "uint8_t"});
  TD_EXPECT_THROW_MSG(Counts({{"count", 1}, {"small", 1}, {"scale", 1e300}}, {}), TypeError,
                      {"field 'scale'", "1e+300", "float"});
  TD_EXPECT_THROW_MSG(
      Counts({{"count", uint64_t{18446744073709551615u}}, {"small", 1}, {"scale", 1.0}}, {}),
      TypeError, {"field 'count'", "18446744073709551615", "int32_t"});
  // A TensorDict holding such values is not a Counts; reading the entry directly refuses too.
  TensorDict td({{"count", NonTensorData(nlohmann::json(int64_t{5000000000}))},
                 {"small", NonTensorData(nlohmann::json(1))},
                 {"scale", NonTensorData(nlohmann::json(1.0))}},
                {});
  TD_EXPECT_THROW_MSG(Counts::from_tensordict(td), TypeError,
                      {"Counts.from_tensordict", "field 'count'", "5000000000", "int32_t"});
  TensorDict fields = ok.tensordict();  // a handle: writes reach ok's fields
  fields.set_non_tensor("count", nlohmann::json(int64_t{5000000000}));
  TD_EXPECT_THROW_MSG(ok.count(), TypeError, {"count", "5000000000", "int32_t"});
}

TEST(TensorClass, ConstructionErrors) {
  at::Tensor x = at::randn({3, 2});
  TD_EXPECT_THROW_MSG(Step({{"tag", "a"}}, {3}), KeyError,
                      {"Step", "missing required field ['obs']", "fields: ['obs', 'tag']"});
  TD_EXPECT_THROW_MSG(MyData({{"image", x}}, {3}), KeyError,
                      {"MyData", "missing required fields ['mask', 'label']"});
  TD_EXPECT_THROW_MSG(Step({{"obs", x}, {"tag", "a"}, {"oops", x}}, {3}), KeyError,
                      {"Step has no field 'oops'", "fields: ['obs', 'tag']"});
  TD_EXPECT_THROW_MSG(Step({{"obs", x}, {"obs", x}, {"tag", "a"}}, {3}), ValueError,
                      {"field 'obs' is given twice"});
  TD_EXPECT_THROW_MSG(Step({{"obs", "not a tensor"}, {"tag", "a"}}, {3}), TypeError,
                      {"Step field 'obs' holds a JSON string", "declared as at::Tensor"});
  TD_EXPECT_THROW_MSG(Step({{"obs", x}, {"tag", 5}}, {3}), TypeError,
                      {"Step field 'tag' holds a JSON integer (5)", "declared as std::string"});
  // Batch-size checks of positional construction and of setters.
  TD_EXPECT_THROW_MSG(Step(at::randn({4, 2}), "a", {3}), BatchSizeError,
                      {"'obs'", "torch.Size([4, 2])", "torch.Size([3])"});
  Step s(x, "a", {3});
  TD_EXPECT_THROW_MSG(s.set_obs(at::zeros({2})), BatchSizeError, {"'obs'"});
  EXPECT_TRUE(s.obs().is_same(x));  // unchanged
  // A nested class whose batch size does not extend the parent's.
  Episode ep = test::SampleEpisode();
  TD_EXPECT_THROW_MSG(ep.set_step(Step(at::randn({3, 5}), "z", {3})), BatchSizeError,
                      {"step"});
}

TEST(TensorClass, TypedSetters) {
  Episode ep = test::SampleEpisode();
  ep.set_name("other").set_seed(11).set_gamma(0.25).set_done(false).set_info({{"a", 1}});
  EXPECT_EQ(ep.name(), "other");
  EXPECT_EQ(ep.seed(), 11);
  EXPECT_EQ(ep.gamma(), 0.25);
  EXPECT_FALSE(ep.done());
  EXPECT_EQ(ep.info()["a"], 1);
  ep.set_weight(at::full({4}, 2.0));
  ASSERT_TRUE(ep.weight());
  EXPECT_EQ(ep.weight()->sum().item<float>(), 8.0f);
  ep.set_weight(std::nullopt);  // removes the entry
  EXPECT_FALSE(ep.weight());
  EXPECT_FALSE(ep.contains("weight"));
  ep.set_reward(at::zeros({4, 7}));  // a new feature shape is fine, the batch dims are checked
  EXPECT_EQ(ep.reward().sizes(), at::IntArrayRef({4, 7}));
}

TEST(TensorClass, UnsetThenFilled) {
  Step s = Step::unset({3});
  EXPECT_FALSE(s.contains("obs"));
  TD_EXPECT_THROW_MSG(s.obs(), KeyError, {"obs"});
  s.set_obs(at::ones({3, 2})).set_tag("x");
  EXPECT_EQ(s.obs().sizes(), at::IntArrayRef({3, 2}));
  EXPECT_EQ(s.tag(), "x");
}

TEST(TensorClass, FromAndToTensorDict) {
  at::Tensor x = at::randn({3, 2});
  TensorDict t({{"obs", x}, {"tag", "a"}}, {3});
  Step s = Step::from_tensordict(t);
  EXPECT_TRUE(s.tensordict().is_same(t));  // wraps the handle
  EXPECT_EQ(s.tag(), "a");
  TensorDict back = s.to_tensordict();
  EXPECT_FALSE(back.is_same(t));  // a separate dict sharing the tensors
  EXPECT_TRUE(back.get("obs").is_same(x));
  back.set("more", at::zeros({3}));
  EXPECT_FALSE(s.contains("more"));

  TD_EXPECT_THROW_MSG(Step::from_tensordict(TensorDict({{"tag", "a"}, {"z", x}}, {3})), KeyError,
                      {"Step", "missing field ['obs']", "key ['z'] is not a field",
                       "fields of Step: ['obs', 'tag']"});
  TD_EXPECT_THROW_MSG(Step::from_tensordict(TensorDict({{"obs", x}, {"tag", x}}, {3})), TypeError,
                      {"field 'tag' holds a Tensor", "declared as std::string"});
  // A nested TensorDict is checked as the nested class.
  TensorDict bad = test::SampleEpisode().to_tensordict();
  bad.set("step", TensorDict({{"obs", at::zeros({4, 2})}}, {4, 2}));
  TD_EXPECT_THROW_MSG(Episode::from_tensordict(bad), TypeError,
                      {"field 'step'", "not a Step", "missing field ['tag']"});
  // A non-tensor entry of the wrong JSON type is refused by the accessor too.
  TensorDict odd({{"obs", x}, {"tag", NonTensorData(nlohmann::json(3))}}, {3});
  TD_EXPECT_THROW_MSG(Step::from_tensordict(odd), TypeError, {"'tag' holds a JSON integer"});
}

}  // namespace
}  // namespace td
