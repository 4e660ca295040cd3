// td::TensorClass construction: field defaults (constants, expressions, factories; td::use_default
// positionally), post_init and its order, constructor options (device, lock, names), kFrozen
// classes and kShadow classes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "td/core/testing.h"
#include "td/tensorclass/tensorclass.h"
#include "td/tensorclass/test_classes.h"

namespace td {
namespace {

using test::MyData;

at::Tensor MakeMask() { return at::ones({3}, at::kBool); }

// Every form of default, and fields without one.
class Config : public TensorClass<Config> {
 public:
  TD_TENSORCLASS(Config, (at::Tensor, weights), (double, lr, 0.1), (std::string, mode, "train"),
                 (at::Tensor, bias, at::zeros({3})), (at::Tensor, mask, &MakeMask),
                 (std::optional<at::Tensor>, scale, [] { return at::ones({3, 2}); }),
                 (nlohmann::json, info, (nlohmann::json{{"k", 1}})),
                 (std::optional<int64_t>, steps))
};

TEST(TensorClassDefaults, NamedConstructorFillsWhatIsNotGiven) {
  Config c({{"weights", at::randn({3, 4})}}, {3});
  EXPECT_EQ(c.lr(), 0.1);
  EXPECT_EQ(c.mode(), "train");
  EXPECT_TRUE(c.bias().equal(at::zeros({3})));
  EXPECT_TRUE(c.mask().equal(at::ones({3}, at::kBool)));
  ASSERT_TRUE(c.scale().has_value());
  EXPECT_TRUE(c.scale()->equal(at::ones({3, 2})));
  EXPECT_EQ(c.info()["k"], 1);
  EXPECT_FALSE(c.steps().has_value());  // no default: absent
  // Given values win; an optional field given nullopt stays absent (upstream's explicit None),
  // a required one given nullopt takes its default.
  Config d({{"weights", at::randn({3})}, {"lr", 2}, {"mode", std::nullopt},
            {"scale", std::nullopt}, {"steps", 5}},
           {3});
  EXPECT_EQ(d.lr(), 2.0);
  EXPECT_EQ(d.mode(), "train");
  EXPECT_FALSE(d.scale().has_value());
  EXPECT_EQ(d.steps(), 5);
  TD_EXPECT_THROW_MSG(Config({{"lr", 1.0}}, {3}), KeyError,
                      {"Config: missing required field ['weights']"});
}

TEST(TensorClassDefaults, EvaluatedForEachObject) {
  Config a({{"weights", at::randn({3})}}, {3});
  Config b({{"weights", at::randn({3})}}, {3});
  EXPECT_NE(a.bias().data_ptr(), b.bias().data_ptr());
  a.bias().fill_(5);
  EXPECT_TRUE(b.bias().equal(at::zeros({3})));
  EXPECT_NE(a.scale()->data_ptr(), b.scale()->data_ptr());
}

TEST(TensorClassDefaults, PositionalUseDefault) {
  const at::Tensor w = at::randn({3, 4});
  Config c(w, td::use_default, "eval", td::use_default, td::use_default, std::nullopt,
           td::use_default, 7, {3});
  EXPECT_TRUE(c.weights().is_same(w));
  EXPECT_EQ(c.lr(), 0.1);
  EXPECT_EQ(c.mode(), "eval");
  EXPECT_TRUE(c.bias().equal(at::zeros({3})));
  EXPECT_FALSE(c.scale().has_value());
  EXPECT_EQ(c.info()["k"], 1);
  EXPECT_EQ(c.steps(), 7);
  Config all(w, 0.5, "x", at::ones({3}), at::zeros({3}, at::kBool), at::zeros({3, 1}),
             nlohmann::json(2), std::nullopt, {3});
  EXPECT_EQ(all.lr(), 0.5);
  EXPECT_TRUE(all.bias().equal(at::ones({3})));
  EXPECT_EQ(all.info(), 2);
}

TEST(TensorClassDefaults, ShapeAgainstTheBatchSize) {
  // bias [3], mask [3], scale [3, 2] fit batch sizes [3] and [] (upstream's test_defaultfactory).
  EXPECT_EQ(Config({{"weights", at::randn({3})}}, {}).bias().sizes(), at::IntArrayRef({3}));
  TD_EXPECT_THROW_MSG(Config({{"weights", at::randn({4})}}, {4}), BatchSizeError,
                      {"Config: the default of field 'bias' has shape [3], which does not start "
                       "with the batch size [4]"});
  TD_EXPECT_THROW_MSG(Config(at::randn({3, 2}), 0.1, "m", at::zeros({3, 2}), td::use_default,
                             std::nullopt, td::use_default, std::nullopt, {3, 2}),
                      BatchSizeError, {"default of field 'mask'", "[3]", "[3, 2]"});
}

// post_init: validates, normalises a field, counts its calls; private (TD_TENSORCLASS befriends
// the hook's caller).
class Checked : public TensorClass<Checked> {
 public:
  TD_TENSORCLASS(Checked, (at::Tensor, x), (at::Tensor, y), (int64_t, calls, 0))
  bool was_locked = true;

 private:
  void post_init() {
    if (!(x() > 0).all().item<bool>()) TD_FAIL(ValueError, "Checked: x must be positive");
    set_y(y().abs());
    set_calls(calls() + 1);
    was_locked = is_locked();
  }
};

TEST(TensorClassPostInit, EveryConstructorCallsItOnce) {
  const at::Tensor x = at::rand({3}) + 0.1, y = -at::ones({3});
  Checked a(x, y, td::use_default, {3});
  EXPECT_TRUE(a.y().equal(at::ones({3})));
  EXPECT_EQ(a.calls(), 1);
  Checked b({{"x", x}, {"y", y}}, {3});
  EXPECT_EQ(b.calls(), 1);
  EXPECT_TRUE(b.y().equal(at::ones({3})));
  Checked c = Checked::from_tensordict(TensorDict({{"x", x}, {"y", y}, {"calls", NonTensorData(4)}}, {3}));
  EXPECT_EQ(c.calls(), 5);
  EXPECT_TRUE(c.y().equal(at::ones({3})));
  // Operations returning the class wrap their result without calling it.
  EXPECT_EQ(a.index({0}).calls(), 1);
  EXPECT_EQ(a.clone().calls(), 1);
  TD_EXPECT_THROW_MSG(Checked(-x, y, 0, {3}), ValueError, {"x must be positive"});
  TD_EXPECT_THROW_MSG(Checked::from_tensordict(TensorDict({{"x", -x}, {"y", y}, {"calls", NonTensorData(0)}}, {3})),
                      ValueError, {"x must be positive"});
}

TEST(TensorClassPostInit, RunsBeforeTheLock) {
  Checked a(at::ones({2}), at::ones({2}), 0, {2}, TensorClassOptions().lock(true));
  EXPECT_FALSE(a.was_locked);
  EXPECT_TRUE(a.is_locked());
  Checked b({{"x", at::ones({2})}, {"y", at::ones({2})}}, {2}, TensorClassOptions().lock(true));
  EXPECT_FALSE(b.was_locked);
  EXPECT_TRUE(b.is_locked());
}

TEST(TensorClassOptions, DeviceAndLock) {
  const at::Tensor img = at::randn({4, 3}), mask = at::ones({4, 1}, at::kBool);
  const at::Tensor label = at::arange(4);
  // A device alone, nullopt, or the options.
  EXPECT_TRUE(MyData(img, mask, label, {4}, at::kCPU).device() == at::Device(at::kCPU));
  EXPECT_FALSE(MyData(img, mask, label, {4}, std::nullopt).device().has_value());
  MyData d(img, mask, label, {4}, TensorClassOptions().device(at::Device("cpu")).lock(true));
  EXPECT_TRUE(d.device() == at::Device(at::kCPU));
  EXPECT_TRUE(d.is_locked());
  TD_EXPECT_THROW_MSG(d.set_label(at::arange(8).view({4, 2})), LockedError, {"'label'", "locked"});
  d.set_label(at::arange(1, 5));  // a locked TensorDict writes a same-shaped tensor in place
  EXPECT_TRUE(d.label().equal(at::arange(1, 5)));
  MyData n({{"image", img}, {"mask", mask}, {"label", label}}, {4}, TensorClassOptions().lock(true));
  EXPECT_TRUE(n.is_locked());
  EXPECT_FALSE(MyData(img, mask, label, {4}).is_locked());
  d.unlock_();  // not frozen: lock= can be undone
  EXPECT_FALSE(d.is_locked());
}

// names= (upstream's constructor keyword): the batch dims are named before post_init; the
// class's operations carry the names as TensorDict's do.
TEST(TensorClassOptions, Names) {
  const at::Tensor img = at::randn({4, 3}), mask = at::ones({4, 1}, at::kBool);
  const at::Tensor label = at::arange(4);
  MyData d(img, mask, label, {4}, TensorClassOptions().names({"time"}));
  EXPECT_EQ(d.names(), DimNames({"time"}));
  EXPECT_EQ(d.tensordict().names(), DimNames({"time"}));
  MyData n({{"image", img}, {"mask", mask}, {"label", label}}, {4},
           TensorClassOptions().names({"t"}).lock(true));
  EXPECT_EQ(n.names(), DimNames({"t"}));
  EXPECT_TRUE(n.is_locked());
  EXPECT_EQ(d.unsqueeze(0).names(), DimNames({std::nullopt, "time"}));
  EXPECT_EQ(d.rename({"step"}).names(), DimNames({"step"}));
  EXPECT_EQ(d.names(), DimNames({"time"}));
  EXPECT_FALSE(MyData(img, mask, label, {4}).has_names());
  TD_EXPECT_THROW_MSG(MyData(img, mask, label, {4}, TensorClassOptions().names({"a", "b"})),
                      ValueError, {"2 dim names", "[4]"});
}

class Frozen : public TensorClass<Frozen> {
 public:
  static constexpr bool kFrozen = true;
  TD_TENSORCLASS(Frozen, (at::Tensor, w), (std::optional<at::Tensor>, b), (std::string, tag, "t"))
  void post_init() { set_w(w() * 2); }  // writes before the lock are allowed
};

class Holder : public TensorClass<Holder> {
 public:
  TD_TENSORCLASS(Holder, (Frozen, inner), (at::Tensor, z))
};

TEST(TensorClassFrozen, EveryObjectIsLocked) {
  Frozen f(at::ones({3, 2}), std::nullopt, td::use_default, {3});
  EXPECT_TRUE(f.is_locked());
  EXPECT_TRUE(f.w().equal(at::full({3, 2}, 2.0)));  // post_init ran before the lock
  EXPECT_TRUE(Frozen({{"w", at::ones({3})}}, {3}).is_locked());
  EXPECT_TRUE(Frozen::from_tensordict(TensorDict({{"w", at::ones({3})}, {"tag", "u"}}, {3})).is_locked());
  EXPECT_TRUE(Frozen::unset({3}).is_locked());
  EXPECT_TRUE(f.index({0}).is_locked());
  EXPECT_TRUE(f.clone().is_locked());
  EXPECT_TRUE(f.apply([](const at::Tensor& t) { return t + 1; }).is_locked());
  EXPECT_TRUE(td::stack({f, f}, 0).is_locked());
  Holder h(f.clone(), at::zeros({3}), {3});
  EXPECT_FALSE(h.is_locked());
  EXPECT_TRUE(h.index({0}).inner().is_locked());  // a nested frozen field read back
}

TEST(TensorClassFrozen, WritesAreRefused) {
  Frozen f(at::ones({3, 2}), std::nullopt, td::use_default, {3});
  TD_EXPECT_THROW_MSG(f.set_w(at::zeros({3, 2})), LockedError,
                      {"Frozen is frozen (kFrozen): the setter of field 'w' is refused"});
  TD_EXPECT_THROW_MSG(f.set_b(at::zeros({3})), LockedError, {"field 'b'"});
  TD_EXPECT_THROW_MSG(f.set_tag("u"), LockedError, {"field 'tag'"});
  TD_EXPECT_THROW_MSG(f.set("w", at::zeros({3, 2})), LockedError, {"set of field 'w'"});
  TD_EXPECT_THROW_MSG(f.del_("b"), LockedError, {"del_ of field 'b'"});
  TD_EXPECT_THROW_MSG(f.unlock_(), LockedError, {"Frozen is frozen", "unlock_()"});
  EXPECT_TRUE(f.is_locked());
  EXPECT_TRUE(f.w().equal(at::full({3, 2}, 2.0)));  // nothing was written
  EXPECT_EQ(f.tag(), "t");
  // What the lock allows still works: in-place tensor ops on the existing entries.
  f.zero_();
  EXPECT_TRUE(f.w().equal(at::zeros({3, 2})));
}

// update() is set() per field: refused on a frozen object (in place it still works, as set_).
TEST(TensorClassFrozen, UpdateIsRefused) {
  Frozen f(at::ones({3, 2}), std::nullopt, td::use_default, {3});
  TD_EXPECT_THROW_MSG(f.update(TensorDict({{"w", at::zeros({3, 2})}, {"tag", "u"}}, {3})),
                      LockedError,
                      {"Frozen is frozen (kFrozen): update() of fields 'w', 'tag' is refused"});
  TD_EXPECT_THROW_MSG(f.update(TensorDict({{"b", at::zeros({3})}}, {3}), UpdateOptions()),
                      LockedError, {"update() of fields 'b'"});
  EXPECT_TRUE(f.w().equal(at::full({3, 2}, 2.0)));
  EXPECT_FALSE(f.b().has_value());
  EXPECT_EQ(f.tag(), "t");
  f.update(TensorDict({{"w", at::zeros({3, 2})}}, {3}), UpdateOptions().inplace(true));
  EXPECT_TRUE(f.w().equal(at::zeros({3, 2})));
}

// The TensorDict of a frozen object cannot be unlocked through a handle (tensordict(), the
// conversion to const TensorDict&, their copies), so it cannot lose or replace a field that
// way; to_tensordict() is an unlocked copy that does not reach the object.
TEST(TensorClassFrozen, HandlesCannotUnlockIt) {
  Frozen f(at::ones({3, 2}), at::zeros({3}), td::use_default, {3});
  TensorDict t = f.tensordict();
  TD_EXPECT_THROW_MSG(t.unlock_(), LockedError,
                      {"Frozen (a kFrozen class: its objects stay locked)", "cannot unlock"});
  TensorDict converted = static_cast<const TensorDict&>(f);
  TD_EXPECT_THROW_MSG(converted.unlock_(), LockedError, {"Frozen (a kFrozen class"});
  TD_EXPECT_THROW_MSG(t.del_("w"), LockedError, {"'w'", "locked"});
  TD_EXPECT_THROW_MSG(t.set("tag", "u"), LockedError, {"'tag'", "locked"});
  TD_EXPECT_THROW_MSG(t.set("w", at::zeros({3, 5})), LockedError, {"'w'"});
  EXPECT_TRUE(f.is_locked());
  EXPECT_TRUE(f.w().equal(at::full({3, 2}, 2.0)));
  EXPECT_EQ(f.tag(), "t");
  // Results of operations are frozen the same way.
  Frozen first = f.index({0});
  TensorDict row = first.tensordict();
  EXPECT_THROW(row.unlock_(), LockedError);
  // to_tensordict(): unlocked, separate.
  TensorDict plain = f.to_tensordict();
  EXPECT_FALSE(plain.is_locked());
  plain.del_("w");
  plain.set("tag", "u");
  EXPECT_TRUE(f.tensordict().contains("w"));
  EXPECT_EQ(f.tag(), "t");
  // A holder's unlock_() leaves a frozen field's TensorDict locked while the frozen object lives.
  Holder h(f.clone(), at::zeros({3}), {3});
  Frozen inner = h.inner();
  h.lock_();
  h.unlock_();
  EXPECT_TRUE(inner.is_locked());
  EXPECT_TRUE(h.tensordict().get_tensordict("inner").is_locked());
  EXPECT_FALSE(h.is_locked());
  h.set_z(at::ones({3}));  // the holder itself is writable again
  TD_EXPECT_THROW_MSG(inner.set_w(at::zeros({3, 2})), LockedError, {"field 'w'"});
}

// A nested class read from a frozen object refuses writes as the frozen object does, though its
// own class is not frozen.
class Leaf : public TensorClass<Leaf> {
 public:
  TD_TENSORCLASS(Leaf, (at::Tensor, x), (std::string, s))
};
class FrozenOuter : public TensorClass<FrozenOuter> {
 public:
  static constexpr bool kFrozen = true;
  TD_TENSORCLASS(FrozenOuter, (Leaf, leaf), (std::optional<Leaf>, maybe))
};

TEST(TensorClassFrozen, NestedClassesOfAFrozenObjectRefuseWrites) {
  FrozenOuter o(Leaf(at::ones({3}), "a", {3}), Leaf(at::ones({3}), "m", {3}), {3});
  TD_EXPECT_THROW_MSG(o.leaf().set_x(at::zeros({3})), LockedError,
                      {"Leaf was read from an object of the frozen class FrozenOuter",
                       "the setter of field 'x'"});
  TD_EXPECT_THROW_MSG(o.leaf().set_s("b"), LockedError, {"field 's'"});
  TD_EXPECT_THROW_MSG(o.leaf().set("x", at::zeros({3})), LockedError, {"set of field 'x'"});
  TD_EXPECT_THROW_MSG(o.leaf().update(TensorDict({{"s", "b"}}, {3})), LockedError,
                      {"update() of fields 's'"});
  TD_EXPECT_THROW_MSG(o.maybe()->set_s("b"), LockedError, {"FrozenOuter", "field 's'"});
  EXPECT_TRUE(o.leaf().x().equal(at::ones({3})));
  EXPECT_EQ(o.leaf().s(), "a");
  EXPECT_EQ(o.maybe()->s(), "m");
  // A Leaf of its own stays writable.
  Leaf free(at::ones({3}), "f", {3});
  free.set_s("g");
  EXPECT_EQ(free.s(), "g");
}

// kShadow: fields named like members; the accessors hide them.
class Shadowed : public TensorClass<Shadowed> {
 public:
  static constexpr bool kShadow = true;
  TD_TENSORCLASS(Shadowed, (at::Tensor, index), (int64_t, batch_size), (std::string, to),
                 (at::Tensor, x))
};

static_assert(internal::tensorclass::IsMemberName("index") && internal::tensorclass::IsMemberName("batch_size"));
static_assert(!internal::tensorclass::IsMemberName("obs") && !internal::tensorclass::IsReservedName("obs"));
static_assert(internal::tensorclass::IsReservedName("tensordict") && internal::tensorclass::IsReservedName("post_init") &&
              internal::tensorclass::IsReservedName("td_anything"));

TEST(TensorClassShadow, FieldsHideMembers) {
  const at::Tensor idx = at::arange(4.0), x = at::randn({4, 2});
  Shadowed s(idx, 7, "cuda", x, {4});
  EXPECT_TRUE(s.index().equal(idx));
  EXPECT_EQ(s.batch_size(), 7);
  EXPECT_EQ(s.to(), "cuda");
  s.set_batch_size(8);  // the field's setter (it hides TensorDict's set_batch_size too)
  EXPECT_EQ(s.batch_size(), 8);
  EXPECT_TRUE(s.get("index").equal(idx));
  // The members, through the base class or the TensorDict.
  EXPECT_EQ(s.tensordict().batch_size(), at::IntArrayRef({4}));
  Shadowed row = s.td::TensorClass<Shadowed>::index({1});
  EXPECT_EQ(row.tensordict().batch_size(), at::IntArrayRef({}));
  EXPECT_EQ(row.index().item<double>(), 1.0);
  EXPECT_EQ(row.batch_size(), 8);
  // The library's free functions call members through the base class.
  EXPECT_EQ(td::stack({s, s}, 0).tensordict().batch_size(), at::IntArrayRef({2, 4}));
  EXPECT_EQ(td::unbind(s, 0).size(), 4u);
  s += 1.0;  // in place: the tensors given are shared
  EXPECT_TRUE(s.index().equal(at::arange(1.0, 5.0)));
  std::ostringstream os;
  os << s;
  EXPECT_NE(os.str().find("index=Tensor(shape=torch.Size([4])"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("batch_size=torch.Size([4])"), std::string::npos) << os.str();
}

}  // namespace
}  // namespace td
