// Batch-dim names (NOTE [ Dim names ] in td/core/names.cc): setting, checking, nesting, and how
// each shape op carries them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/internal/storage_access.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::None;
using at::indexing::Slice;
using std::nullopt;

// batch [2, 3, 4] named a, b, c; "n" has one extra batch dim (size 5) named "x".
TensorDict Named() {
  TensorDict n({{"y", at::zeros({2, 3, 4, 5})}}, {2, 3, 4, 5}, nullopt,
               {nullopt, nullopt, nullopt, "x"});
  return TensorDict({{"a", at::arange(24).view({2, 3, 4})}, {"n", n}, {"s", "text"}}, {2, 3, 4},
                    nullopt, {"a", "b", "c"});
}

DimNames N(std::initializer_list<std::optional<std::string>> n) { return DimNames(n); }

TEST(NamesTest, UnnamedByDefault) {
  TensorDict t({{"a", at::zeros({2, 3})}}, {2, 3});
  EXPECT_FALSE(t.has_names());
  EXPECT_EQ(t.names(), N({nullopt, nullopt}));
  EXPECT_EQ(t.storage().names(), nullptr);  // nothing allocated
  EXPECT_EQ(t.unsqueeze(0).storage().names(), nullptr);
  EXPECT_EQ(t.index({0}).storage().names(), nullptr);
}

TEST(NamesTest, ConstructorAndNested) {
  TensorDict t = Named();
  EXPECT_TRUE(t.has_names());
  EXPECT_EQ(t.names(), N({"a", "b", "c"}));
  // The nested level's leading dims carry the parent's names, its own extra dim keeps "x".
  EXPECT_EQ(t.get_tensordict("n").names(), N({"a", "b", "c", "x"}));
  // A plain dict set under a named parent gets its names too.
  t.set({"p", "q"}, at::zeros({2, 3, 4}));
  EXPECT_EQ(t.get_tensordict("p").names(), N({"a", "b", "c"}));
}

TEST(NamesTest, SetNamesPropagatesAndUnnames) {
  TensorDict t = Named();
  t.set_names({"u", nullopt, "w"});
  EXPECT_EQ(t.names(), N({"u", nullopt, "w"}));
  EXPECT_EQ(t.get_tensordict("n").names(), N({"u", nullopt, "w", "x"}));
  t.set_names({nullopt, nullopt, nullopt});  // all nullopt: unnamed
  EXPECT_FALSE(t.has_names());
  EXPECT_EQ(t.get_tensordict("n").names(), N({nullopt, nullopt, nullopt, "x"}));
}

TEST(NamesTest, Errors) {
  TensorDict t = Named();
  TD_EXPECT_THROW_MSG(t.set_names({"a", "a", nullopt}), ValueError,
                      {"'a' repeats", "['a', 'a', None]", "[2, 3, 4]"});
  TD_EXPECT_THROW_MSG(t.set_names({"a", "b"}), ValueError, {"2 dim names", "3 batch dims"});
  TD_EXPECT_THROW_MSG(t.set_names({"a", "...", "c"}), ValueError, {"\"...\" is not a dim name"});
  TD_EXPECT_THROW_MSG(t.rename(DimRenames{{"zz", "q"}}), ValueError,
                      {"no batch dim is named 'zz'", "['a', 'b', 'c']"});
  TD_EXPECT_THROW_MSG(t.rename(DimRenames{{"a", "b"}}), ValueError, {"'b' repeats"});
  TD_EXPECT_THROW_MSG(t.refine_names({"a", "z", nullopt}), ValueError,
                      {"dim 1 named 'b'", "'z'"});
  TD_EXPECT_THROW_MSG(t.refine_names({"...", "...", "c"}), ValueError, {"at most one \"...\""});
  TD_EXPECT_THROW_MSG(TensorDict({}, {2}, nullopt, {"a", "b"}), ValueError,
                      {"TensorDict", "2 dim names", "[2]"});
  // A failed call changed nothing.
  EXPECT_EQ(t.names(), N({"a", "b", "c"}));
  // A sub-TensorDict whose leading dim is named otherwise cannot be set under a named parent.
  TensorDict other({}, {2, 3, 4}, nullopt, {"q", nullopt, nullopt});
  TD_EXPECT_THROW_MSG(t.set("o", other), ValueError, {"'o'", "named 'q'", "named 'a'"});
}

// rename maps every pair at once (upstream's rename(env="time", time="env") swaps the names);
// a name renamed twice in one call is an error.
TEST(NamesTest, RenameSwapsAtOnce) {
  TensorDict t = Named();
  TensorDict swapped = t.rename(DimRenames{{"a", "b"}, {"b", "a"}});
  EXPECT_EQ(swapped.names(), N({"b", "a", "c"}));
  EXPECT_EQ(swapped.get_tensordict("n").names(), N({"b", "a", "c", "x"}));
  t.rename_(DimRenames{{"a", "c"}, {"b", "a"}, {"c", "b"}});  // a cycle of three
  EXPECT_EQ(t.names(), N({"c", "a", "b"}));
  TD_EXPECT_THROW_MSG(t.rename(DimRenames{{"a", "p"}, {"a", "q"}}), ValueError,
                      {"'a' is renamed twice", "['c', 'a', 'b']"});
  EXPECT_EQ(t.names(), N({"c", "a", "b"}));
}

// Naming a parent must not give a nested level a name twice (its own extra dim is named 'x'):
// ValueError naming the key and the names, and no level renamed.
TEST(NamesTest, ParentNamesRepeatingANestedName) {
  TensorDict t = Named();
  TD_EXPECT_THROW_MSG(t.set_names({"x", "b", "c"}), ValueError,
                      {"key 'n'", "['x', 'b', 'c', 'x']", "'x' repeats", "nothing was renamed"});
  EXPECT_EQ(t.names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.get_tensordict("n").names(), N({"a", "b", "c", "x"}));
  TD_EXPECT_THROW_MSG(t.rename_(DimRenames{{"c", "x"}}), ValueError, {"key 'n'", "'x' repeats"});
  TD_EXPECT_THROW_MSG(t.rename(DimRenames{{"c", "x"}}), ValueError, {"key 'n'", "'x' repeats"});
  EXPECT_EQ(t.names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.get_tensordict("n").names(), N({"a", "b", "c", "x"}));
  // Two levels down.
  TensorDict deep({{"n", t.get_tensordict("n").copy()}}, {2, 3, 4});
  TensorDict top({{"d", deep}}, {2, 3});
  TD_EXPECT_THROW_MSG(top.set_names({"x", nullopt}), ValueError, {"key ('d', 'n')"});
  EXPECT_FALSE(top.has_names());
  // A TensorDict set under a named parent: the parent's names over its own.
  TensorDict sub({}, {2, 3, 4, 5}, nullopt, {nullopt, nullopt, nullopt, "a"});
  TD_EXPECT_THROW_MSG(t.set("s2", sub), ValueError, {"set key 's2'", "'a' repeats"});
  EXPECT_FALSE(t.contains("s2"));
}

TEST(NamesTest, SetNamedSubCopiesWhenNamesDiffer) {
  TensorDict t = Named();
  TensorDict sub({{"z", at::zeros({2, 3, 4})}}, {2, 3, 4});
  t.set("sub", sub);
  EXPECT_FALSE(sub.has_names());  // the caller's TensorDict is left as it is
  EXPECT_EQ(t.get_tensordict("sub").names(), N({"a", "b", "c"}));
  EXPECT_TRUE(t.get({"sub", "z"}).is_same(sub.get("z")));  // a shallow copy
}

TEST(NamesTest, RefineNames) {
  TensorDict t({}, {2, 3, 4, 5});
  t.refine_names({nullopt, nullopt, nullopt, "d"});
  EXPECT_EQ(t.names(), N({nullopt, nullopt, nullopt, "d"}));
  TensorDict& same = t.refine_names({"a", "...", "d"});  // in place, as upstream
  EXPECT_TRUE(same.is_same(t));
  EXPECT_EQ(t.names(), N({"a", nullopt, nullopt, "d"}));
  t.refine_names({"...", "c", nullopt});
  EXPECT_EQ(t.names(), N({"a", nullopt, "c", "d"}));
  t.refine_names({"..."});
  EXPECT_EQ(t.names(), N({"a", nullopt, "c", "d"}));
}

TEST(NamesTest, RenameAndRenameInPlace) {
  TensorDict t = Named();
  TensorDict r = t.rename({"x1", "x2", "x3"});
  EXPECT_EQ(r.names(), N({"x1", "x2", "x3"}));
  EXPECT_EQ(t.names(), N({"a", "b", "c"}));                   // the original keeps its names
  EXPECT_TRUE(r.get("a").is_same(t.get("a")));                // shallow copy
  EXPECT_EQ(t.get_tensordict("n").names(), N({"a", "b", "c", "x"}));
  EXPECT_EQ(r.get_tensordict("n").names(), N({"x1", "x2", "x3", "x"}));
  TensorDict m = t.rename(DimRenames{{"b", "time"}, {"c", nullopt}});
  EXPECT_EQ(m.names(), N({"a", "time", nullopt}));
  t.rename_(DimRenames{{"a", "env"}});
  EXPECT_EQ(t.names(), N({"env", "b", "c"}));
  t.rename_({nullopt, "b", nullopt});
  EXPECT_EQ(t.names(), N({nullopt, "b", nullopt}));
  EXPECT_EQ(t.rename(DimRenames{}).names(), t.names());
}

TEST(NamesTest, Indexing) {
  TensorDict t = Named();
  EXPECT_EQ(t.index({0}).names(), N({"b", "c"}));                       // int drops
  EXPECT_EQ(t.index({Slice(0, 1)}).names(), N({"a", "b", "c"}));        // slice keeps
  EXPECT_EQ(t.index({None, 1}).names(), N({nullopt, "b", "c"}));        // None: unnamed
  EXPECT_EQ(t.index({at::indexing::Ellipsis, 0}).names(), N({"a", "b"}));
  EXPECT_EQ(t.index({Slice(), 2, None}).names(), N({"a", nullopt, "c"}));
  EXPECT_EQ(t.index({0}).get_tensordict("n").names(), N({"b", "c", "x"}));
  // A one-dim index tensor keeps its dim's name; a mask's dim is unnamed.
  EXPECT_EQ(t.index({Slice(), at::tensor({2, 0}, at::kLong)}).names(), N({"a", "b", "c"}));
  at::Tensor mask = at::ones({2, 3}, at::kBool);
  EXPECT_EQ(t.index({mask}).names(), N({nullopt, "c"}));
  EXPECT_EQ(t.masked_select(mask).names(), N({nullopt, "c"}));
}

TEST(NamesTest, ShapeOps) {
  TensorDict t = Named();
  EXPECT_EQ(t.permute({2, 0, 1}).names(), N({"c", "a", "b"}));
  EXPECT_EQ(t.permute({2, 0, 1}).get_tensordict("n").names(), N({"c", "a", "b", "x"}));
  EXPECT_EQ(t.transpose(0, 2).names(), N({"c", "b", "a"}));
  EXPECT_EQ(t.movedim({0}, {2}).names(), N({"b", "c", "a"}));
  EXPECT_EQ(t.unsqueeze(1).names(), N({"a", nullopt, "b", "c"}));
  EXPECT_EQ(t.unsqueeze(-1).names(), N({"a", "b", "c", nullopt}));
  EXPECT_EQ(t.unsqueeze(1).get_tensordict("n").names(), N({"a", nullopt, "b", "c", "x"}));
  EXPECT_EQ(t.unsqueeze(1).squeeze(1).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.unsqueeze(0).squeeze().names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.expand({7, 2, 3, 4}).names(), N({nullopt, "a", "b", "c"}));
  EXPECT_EQ(t.flatten(0, 1).names(), N({nullopt, "c"}));
  EXPECT_EQ(t.flatten(1, 1).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.unflatten(2, {2, 2}).names(), N({"a", "b", nullopt, nullopt}));
  EXPECT_EQ(t.rot90(1, {1, 2}).names(), N({"a", "c", "b"}));
  std::vector<TensorDict> parts = t.unbind(1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].names(), N({"a", "c"}));
  EXPECT_EQ(t.split(1, 0)[1].names(), N({"a", "b", "c"}));
  // Ops that keep the number of batch dims keep the names.
  EXPECT_EQ(t.flip({0}).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.narrow(1, 0, 2).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.clone().names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.clone().get_tensordict("n").names(), N({"a", "b", "c", "x"}));
  EXPECT_EQ(t.apply([](const at::Tensor& x) { return x + 1; }).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.select({"a"}).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.exclude({"a"}).names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.copy().names(), N({"a", "b", "c"}));
  EXPECT_EQ(t.empty().names(), N({"a", "b", "c"}));
  // view / reshape to another shape drop the names (upstream does too); to the same shape keep.
  EXPECT_FALSE(t.view({6, 4}).has_names());
  EXPECT_FALSE(t.reshape({-1}).has_names());
  EXPECT_EQ(t.reshape({2, 3, 4}).names(), N({"a", "b", "c"}));
}

TEST(NamesTest, StackAndCat) {
  TensorDict t = Named();
  TensorDict s = stack({t, t.clone()}, 1);
  EXPECT_EQ(s.names(), N({"a", nullopt, "b", "c"}));
  EXPECT_EQ(s.get_tensordict("n").names(), N({"a", nullopt, "b", "c", "x"}));
  // Names that disagree are dropped (upstream's stack).
  EXPECT_FALSE(stack({t, t.rename({"a", "b", "q"})}, 0).has_names());
  EXPECT_EQ(cat({t, t}, 2).names(), N({"a", "b", "c"}));
}

TEST(NamesTest, BatchSizeSetter) {
  TensorDict t({{"a", at::zeros({2, 3, 4})}}, {2, 3}, nullopt, {"a", "b"});
  t.set_batch_size({2});
  EXPECT_EQ(t.names(), N({"a"}));
  t.set_batch_size({2, 3, 4});
  EXPECT_EQ(t.names(), N({"a", nullopt, nullopt}));
  t.set_batch_size({});
  EXPECT_FALSE(t.has_names());
}

}  // namespace
}  // namespace td
