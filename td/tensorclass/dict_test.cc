// td::from_dict<Class> / td::from_dict_instance (td/tensorclass/dict.h): classes from fields by
// name, TensorDicts and c10::IValue dicts, with the batch size given or inferred (defaults
// included), post_init and kFrozen applied, and their errors.
#include "td/tensorclass/dict.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "td/core/testing.h"
#include "td/io/dict.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::Episode;
using test::MyData;
using test::Step;

TEST(TensorClassFromDict, FieldsByNameWithTheBatchSizeInferred) {
  const at::Tensor img = at::randn({5, 3, 8}), mask = at::ones({5, 1, 8}, at::kBool);
  const at::Tensor label = at::arange(5);
  MyData d = from_dict<MyData>({{"image", img}, {"mask", mask}, {"label", label}},
                               FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(d.batch_size(), at::IntArrayRef({5}));
  EXPECT_TRUE(d.image().is_same(img));
  MyData given = from_dict<MyData>({{"image", img}, {"mask", mask}, {"label", label}},
                                   FromDictOptions().batch_size(std::vector<int64_t>{5}));
  EXPECT_EQ(given.batch_size(), at::IntArrayRef({5}));
  MyData none = from_dict<MyData>({{"image", img}, {"mask", mask}, {"label", label}});
  EXPECT_EQ(none.batch_size(), at::IntArrayRef({}));
  // Leaves [5, 3, 8] and [5, 3]: auto gives [5, 3], batch_dims caps it.
  Step s = from_dict<Step>({{"obs", at::zeros({5, 3, 8})}, {"tag", "x"}},
                           FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({5, 3, 8}));
  EXPECT_EQ(s.tag(), "x");
  EXPECT_EQ(from_dict<MyData>({{"image", img}, {"mask", mask}, {"label", at::zeros({5, 3})}},
                              FromDictOptions().batch_dims(1))
                .batch_size(),
            at::IntArrayRef({5}));
}

TEST(TensorClassFromDict, IValueRoundTripOfEveryFieldKind) {
  Episode ep = test::SampleEpisode();
  c10::IValue plain = to_dict(ep);
  Episode back = from_dict<Episode>(plain, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(back.batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(back.step().batch_size(), at::IntArrayRef({4, 2, 5}));  // inferred per level
  EXPECT_TRUE(back.reward().equal(ep.reward()));
  EXPECT_TRUE(back.step().obs().equal(ep.step().obs()));
  EXPECT_EQ(back.step().tag(), "s");
  EXPECT_EQ(back.name(), "ep");
  EXPECT_EQ(back.seed(), 7);
  EXPECT_EQ(back.gamma(), 0.5);
  EXPECT_TRUE(back.done());
  EXPECT_EQ(back.info()["k"][1], 2);
  EXPECT_FALSE(back.weight().has_value());
  Episode given = from_dict<Episode>(plain, FromDictOptions().batch_size(std::vector<int64_t>{4}));
  EXPECT_EQ(given.batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(given.step().batch_size(), at::IntArrayRef({4}));
  // A Python None (null) is not given: the optional field stays unset.
  c10::impl::GenericDict with_none = plain.toGenericDict().copy();
  with_none.insert_or_assign("weight", c10::IValue());
  EXPECT_FALSE(from_dict<Episode>(c10::IValue(with_none), FromDictOptions().batch_dims(1))
                   .weight()
                   .has_value());
  // from_dict_instance: the class of the instance.
  Episode again = from_dict_instance(ep, plain, FromDictOptions().batch_dims(1));
  EXPECT_EQ(again.batch_size(), at::IntArrayRef({4}));
  EXPECT_TRUE(again.reward().equal(ep.reward()));
  EXPECT_EQ(again.info(), ep.info());
}

TEST(TensorClassFromDict, FromATensorDictLeavesItUnchanged) {
  TensorDict step({{"obs", at::zeros({4, 2, 5})}, {"tag", "s"}}, {});
  TensorDict src({{"image", at::zeros({4, 3})}, {"mask", at::ones({4, 1}, at::kBool)},
                  {"label", at::arange(4)}},
                 {});
  MyData d = from_dict<MyData>(src, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(d.batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(src.batch_size(), at::IntArrayRef({}));
  MyData e = from_dict_instance(d, {{"image", at::zeros({2, 3})}, {"mask", at::ones({2, 1}, at::kBool)},
                                    {"label", at::arange(2)}},
                                FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(e.batch_size(), at::IntArrayRef({2}));
  // Nested TensorDicts passed by the caller keep their batch size (inference runs on copies).
  Step st = Step::from_tensordict(step);
  Episode ep = from_dict<Episode>(
      {{"reward", at::zeros({4, 3})}, {"step", st}, {"extra", TensorDict({{"x", at::zeros({4})}}, {})},
       {"name", "n"}, {"seed", 1}, {"gamma", 0.9}, {"done", false}, {"info", nlohmann::json()}},
      FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(ep.batch_size(), at::IntArrayRef({4}));
  EXPECT_EQ(ep.step().batch_size(), at::IntArrayRef({4, 2, 5}));
  EXPECT_EQ(st.batch_size(), at::IntArrayRef({}));
  EXPECT_EQ(step.batch_size(), at::IntArrayRef({}));
}

// Defaults take part in the inference; post_init runs on the final batch size; kFrozen locks.
class Rollout : public TensorClass<Rollout> {
 public:
  static constexpr bool kFrozen = true;
  TD_TENSORCLASS(Rollout, (at::Tensor, obs), (at::Tensor, bias, at::zeros({3})),
                 (std::optional<int64_t>, dims))
  void post_init() { set_dims(static_cast<int64_t>(tensordict().batch_dims())); }
};

TEST(TensorClassFromDict, DefaultsPostInitAndFrozen) {
  Rollout r = from_dict<Rollout>({{"obs", at::zeros({3, 4})}}, FromDictOptions().auto_batch_size(true));
  EXPECT_EQ(r.batch_size(), at::IntArrayRef({3}));  // obs [3, 4] and bias [3]
  EXPECT_EQ(r.dims(), 1);
  EXPECT_TRUE(r.is_locked());
  TD_EXPECT_THROW_MSG(from_dict<Rollout>({{"obs", at::zeros({4})}}, FromDictOptions().batch_size(std::vector<int64_t>{4})),
                      BatchSizeError, {"default of field 'bias' has shape [3]", "[4]"});
}

TEST(TensorClassFromDict, Errors) {
  const at::Tensor t = at::zeros({2});
  TD_EXPECT_THROW_MSG(from_dict<Step>({{"obs", t}, {"tag", "x"}, {"z", t}}), KeyError,
                      {"Step has no field 'z'", "['obs', 'tag']"});
  TD_EXPECT_THROW_MSG(from_dict<Step>({{"obs", t}}), KeyError, {"missing required field ['tag']"});
  TD_EXPECT_THROW_MSG(from_dict<Step>({{"obs", t}, {"tag", 5}}), TypeError,
                      {"Step field 'tag' holds a JSON integer (5)"});
  TD_EXPECT_THROW_MSG(from_dict<Step>({{"obs", t}, {"tag", "x"}},
                                      FromDictOptions().batch_size(std::vector<int64_t>{2}).auto_batch_size(true)),
                      ValueError, {"batch_size", "auto_batch_size"});
  TD_EXPECT_THROW_MSG(from_dict<Step>({{"obs", t}, {"tag", "x"}}, FromDictOptions().batch_size(std::vector<int64_t>{3})),
                      BatchSizeError, {"'obs'"});
  TD_EXPECT_THROW_MSG(from_dict<Step>(c10::IValue(3)), TypeError, {"needs a dict"});
}

}  // namespace
}  // namespace td
