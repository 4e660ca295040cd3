// Deep nesting and locks that span levels: TensorDicts nest at most td::kMaxNestingDepth levels
// (a NestingError at the write that would go deeper, however the TensorDict is built), and the
// deepest TensorDict that can be built is destroyed, cloned, listed, printed and moved without
// exhausting the stack (these tests also run under --config=asan, whose frames are larger).
// Nested levels with batch dims of their own, two and three levels down, keep exactly those dims
// through every kind of operation (NOTE [ Rebuilt batch sizes ] in td/core/leaves.cc).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "td/core/internal/leaves.h"
#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

// Builds bottom-up: each step wraps the previous TensorDict as entry "a" of a new root.
// Returns how many wraps succeeded before the NestingError (or `levels`).
int BuildBottomUp(int levels, TensorDict* out) {
  TensorDict cur({{"x", at::zeros({2})}}, {2});
  int built = 0;
  try {
    for (int i = 0; i < levels; ++i) {
      TensorDict next({{"a", cur}}, {2});
      cur = next;
      ++built;
    }
  } catch (const NestingError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'a'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(kMaxNestingDepth + 1) + " levels deep"), std::string::npos)
        << msg;
  }
  *out = cur;
  return built;
}

// Builds top-down through handles to the deepest child.
int BuildTopDown(int levels, TensorDict* root) {
  *root = TensorDict({}, {2});
  TensorDict c = *root;
  int built = 0;
  try {
    for (int i = 0; i < levels; ++i) {
      c.set("a", TensorDict({{"x", at::ones({2})}}, {2}));
      c = c.get_tensordict("a");
      ++built;
    }
  } catch (const NestingError& e) {
    EXPECT_NE(std::string(e.what()).find("td::kMaxNestingDepth"), std::string::npos);
  }
  return built;
}

// Every walk works on the deepest TensorDict that can be built.
void ExerciseDeep(const TensorDict& deep) {
  const std::vector<NestedKey> keys = deep.keys(KeysOptions().include_nested(true));
  EXPECT_EQ(keys.size(), static_cast<size_t>(kMaxNestingDepth + 1));
  TensorDict copy = deep.clone();
  EXPECT_EQ(copy.keys(test::kLeaves).size(), deep.keys(test::kLeaves).size());
  std::ostringstream os;
  os << deep;
  EXPECT_GT(os.str().size(), static_cast<size_t>(kMaxNestingDepth));
  TensorDict moved = deep.to(at::kCPU);
  TensorDict doubled = deep.apply([](const at::Tensor& x) { return x * 2; });
  EXPECT_TRUE((doubled == deep.apply([](const at::Tensor& x) { return x + x; })).all());
  TensorDict flat = deep.flatten_keys(".");
  EXPECT_EQ(flat.unflatten_keys(".").keys(test::kLeaves).size(), keys.size() - kMaxNestingDepth);
  TensorDict shallow = deep.copy();
  TensorDict skeleton = deep.empty(/*recurse=*/true);
  TensorDict first = deep.index({0});
  EXPECT_EQ(first.batch_size().size(), 0u);
  TensorDict locked = deep.clone();
  locked.lock_();
  locked.unlock_();
}

TEST(NestingTest, BottomUpStopsAtTheLimit) {
  for (int levels : {10000, 100000}) {
    TensorDict deep;
    EXPECT_EQ(BuildBottomUp(levels, &deep), kMaxNestingDepth) << levels;
    ExerciseDeep(deep);
  }  // destroyed here
}

TEST(NestingTest, TopDownThroughHandlesStopsAtTheLimit) {
  for (int levels : {10000, 100000}) {
    TensorDict root;
    EXPECT_EQ(BuildTopDown(levels, &root), kMaxNestingDepth) << levels;
    // Setting the limit-deep TensorDict one level lower anywhere is refused, nothing written.
    TensorDict outer({}, {2});
    TD_EXPECT_THROW_MSG(outer.set("wrap", root), NestingError, {"'wrap'"});
    EXPECT_FALSE(outer.contains("wrap"));
  }
}

TEST(NestingTest, LongNestedKeyIsRefusedBeforeCreatingLevels) {
  for (size_t parts : {10000u, 100000u}) {
    TensorDict root({}, {2});
    NestedKey key(std::vector<std::string>(parts, "a"));
    TD_EXPECT_THROW_MSG(root.set(key, at::zeros({2})), NestingError,
                        {std::to_string(parts) + " parts", "td::kMaxNestingDepth"});
    EXPECT_TRUE(root.is_empty());
  }
  // Exactly at the limit is fine.
  TensorDict root({}, {2});
  root.set(NestedKey(std::vector<std::string>(kMaxNestingDepth + 1, "a")), at::zeros({2}));
  EXPECT_EQ(root.keys(KeysOptions().include_nested(true)).size(),
            static_cast<size_t>(kMaxNestingDepth + 1));
}

TEST(NestingTest, CyclesAreRefused) {
  TensorDict a({}, {2});
  TensorDict b({}, {2});
  a.set("b", b);
  TD_EXPECT_THROW_MSG(b.set("a", a), NestingError, {"'a'", "cannot contain itself"});
  TD_EXPECT_THROW_MSG(b.set({"x", "a"}, a), NestingError, {"cannot contain itself"});
  EXPECT_FALSE(b.contains("a"));
  EXPECT_THROW(a.set("self", a), ValueError);
}

// Dense-specific lock cases (the conformance suite covers every backend's basic case).
TEST(NestingTest, LockHoldsThroughHandlesAndDepth) {
  TensorDict t({{"n", {{"m", {{"x", at::zeros({2})}}}}}}, {2});
  TensorDict early = t.get_tensordict({"n", "m"});  // taken before lock_()
  t.lock_();
  TD_EXPECT_THROW_MSG(early.unlock_(), LockedError, {"('n', 'm')", "cannot unlock"});
  TD_EXPECT_THROW_MSG(t.get_tensordict("n").unlock_(), LockedError, {"'n'"});
  EXPECT_TRUE(early.is_locked());
  t.unlock_();
  early.set("y", at::ones({2}));
  EXPECT_TRUE(t.contains({"n", "m", "y"}));
  // A parent that is gone no longer holds its child.
  TensorDict orphan;
  {
    TensorDict p({{"c", {{"x", at::zeros({2})}}}}, {2});
    p.lock_();
    orphan = p.get_tensordict("c");
  }
  orphan.unlock_();
  EXPECT_FALSE(orphan.is_locked());
}

// ---- nested levels with batch dims of their own -------------------------------------------

// The levels below the root of ExtraDimsTree and the batch dims each has beyond the root's.
const std::vector<std::pair<NestedKey, std::vector<int64_t>>>& ExtraDimsLevels() {
  static const auto* levels = new std::vector<std::pair<NestedKey, std::vector<int64_t>>>{
      {"n", {2}},
      {{"n", "m"}, {2, 5}},
      {{"n", "m", "k"}, {2, 5, 2}},
      {{"n", "p"}, {2}},  // no dims beyond its parent's, holding a leaf of exactly its batch size
  };
  return *levels;
}

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out = a.vec();
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

at::Tensor Distinct(std::vector<int64_t> shape, double offset) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::arange(n, at::kFloat) + offset).view(shape);
}

// Root `batch` > "n" (+[2]) > ("n", "m") (+[2, 5]) > ("n", "m", "k") (+[2, 5, 2]), and
// ("n", "p") (+[2]), each level holding one leaf with a feature dim, ("n", "p", "w") without.
TensorDict ExtraDimsTree(std::vector<int64_t> batch = {3, 4}) {
  TensorDict k({{"z", Distinct(Concat(batch, {2, 5, 2, 3}), 5000)}}, Concat(batch, {2, 5, 2}));
  TensorDict m({{"y", Distinct(Concat(batch, {2, 5, 1}), 3000)}, {"k", k}}, Concat(batch, {2, 5}));
  TensorDict p({{"w", Distinct(Concat(batch, {2}), 2000)}}, Concat(batch, {2}));
  TensorDict n({{"x", Distinct(Concat(batch, {2, 6}), 1000)}, {"m", m}, {"p", p}},
               Concat(batch, {2}));
  return TensorDict({{"a", Distinct(Concat(batch, {3}), 0)}, {"n", n}}, batch);
}

// Every level of `td` (built like ExtraDimsTree) has batch size `root` followed by its extra
// dims, and each of its leaves starts with that.
void ExpectLevels(const TensorDict& td, at::IntArrayRef root) {
  EXPECT_EQ(td.batch_size(), root);
  for (const auto& [key, extra] : ExtraDimsLevels()) {
    SCOPED_TRACE("level " + key.repr());
    const std::vector<int64_t> want = Concat(root, extra);
    const TensorDict level = td.get_tensordict(key);
    EXPECT_EQ(level.batch_size(), at::IntArrayRef(want));
    level.for_each_entry([&](const std::string& k, const Value& v) {
      if (!v.is_tensor()) return;
      const at::IntArrayRef shape = v.tensor().sizes();
      EXPECT_TRUE(shape.size() >= want.size() &&
                  std::equal(want.begin(), want.end(), shape.begin()))
          << "leaf '" << k << "' has shape " << shape << ", level batch size "
          << level.batch_size();
    });
  }
}

// The operation, named, and the root batch size of its result on ExtraDimsTree().
struct ExtraDimsCase {
  std::string name;
  std::function<TensorDict(const TensorDict&)> op;
  std::vector<int64_t> root;
};

TEST(NestedBatchDimsTest, EveryLevelKeepsItsOwnDims) {
  using at::indexing::Slice;
  const std::vector<ExtraDimsCase> cases = {
      {"clone", [](const TensorDict& t) { return t.clone(); }, {3, 4}},
      {"to(kDouble)", [](const TensorDict& t) { return t.to(at::kDouble); }, {3, 4}},
      {"contiguous", [](const TensorDict& t) { return t.contiguous(); }, {3, 4}},
      {"apply",
       [](const TensorDict& t) { return t.apply([](const at::Tensor& x) { return x * 2; }); },
       {3, 4}},
      {"apply(batch_size)",
       [](const TensorDict& t) {
         return t.apply([](const at::Tensor& x) { return x.select(0, 1); },
                        std::vector<int64_t>{4});
       },
       {4}},
      {"t + t", [](const TensorDict& t) { return t + t; }, {3, 4}},
      {"index({0})", [](const TensorDict& t) { return t.index({0}); }, {4}},
      {"index({0, 1})", [](const TensorDict& t) { return t.index({0, 1}); }, {}},
      {"index({1:3})", [](const TensorDict& t) { return t.index({Slice(1, 3)}); }, {2, 4}},
      {"index({tensor})",
       [](const TensorDict& t) { return t.index({at::tensor({2, 0, 2}, at::kLong)}); }, {3, 4}},
      {"index({mask})",
       [](const TensorDict& t) { return t.index({at::arange(12).view({3, 4}) % 3 == 0}); }, {4}},
      {"reshape({12})", [](const TensorDict& t) { return t.reshape({12}); }, {12}},
      {"view({2, 6})", [](const TensorDict& t) { return t.view({2, 6}); }, {2, 6}},
      {"flatten(0, 1)", [](const TensorDict& t) { return t.flatten(0, 1); }, {12}},
      {"unflatten(1, {2, 2})", [](const TensorDict& t) { return t.unflatten(1, {2, 2}); },
       {3, 2, 2}},
      {"unsqueeze(0)", [](const TensorDict& t) { return t.unsqueeze(0); }, {1, 3, 4}},
      {"unsqueeze(1).squeeze(1)", [](const TensorDict& t) { return t.unsqueeze(1).squeeze(1); },
       {3, 4}},
      {"permute({1, 0})", [](const TensorDict& t) { return t.permute({1, 0}); }, {4, 3}},
      {"transpose(0, 1)", [](const TensorDict& t) { return t.transpose(0, 1); }, {4, 3}},
      {"expand({2, 3, 4})", [](const TensorDict& t) { return t.expand({2, 3, 4}); }, {2, 3, 4}},
      {"repeat({2, 1})", [](const TensorDict& t) { return t.repeat({2, 1}); }, {6, 4}},
      {"narrow(1, 1, 2)", [](const TensorDict& t) { return t.narrow(1, 1, 2); }, {3, 2}},
      {"flip({0})", [](const TensorDict& t) { return t.flip({0}); }, {3, 4}},
      {"masked_select",
       [](const TensorDict& t) { return t.masked_select(at::arange(12).view({3, 4}) < 5); }, {5}},
      {"sum({1})", [](const TensorDict& t) { return t.sum({1}); }, {3}},
      {"max({0}, true)", [](const TensorDict& t) { return t.max({0}, true); }, {1, 4}},
      {"stack(0)", [](const TensorDict& t) { return stack({t, t}, 0); }, {2, 3, 4}},
      {"cat(1)", [](const TensorDict& t) { return cat({t, t}, 1); }, {3, 8}},
  };
  const TensorDict t = ExtraDimsTree();
  for (const ExtraDimsCase& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectLevels(c.op(t), c.root);
  }
  for (const TensorDict& part : t.unbind(1)) ExpectLevels(part, {3});
  for (const TensorDict& part : t.split(2, 0)) ExpectLevels(part, {part.batch_size()[0], 4});
  ExpectLevels(t, {3, 4});  // nothing above changed the input
}

// The values follow the batch sizes: each leaf of the result is the op on the input's leaf
// (the leaves were right before the batch sizes were; this guards the values).
TEST(NestedBatchDimsTest, LeavesMatchTheirOwnOp) {
  const TensorDict t = ExtraDimsTree();
  const NestedKey z{"n", "m", "k", "z"};
  const NestedKey w{"n", "p", "w"};
  EXPECT_TRUE(t.clone().get(z).equal(t.get(z)));
  EXPECT_TRUE(t.to(at::kDouble).get(w).equal(t.get(w).to(at::kDouble)));
  EXPECT_TRUE(t.index({0}).get(z).equal(t.get(z)[0]));
  EXPECT_TRUE(t.permute({1, 0}).get(z).equal(t.get(z).transpose(0, 1)));
  EXPECT_TRUE(t.reshape({12}).get(z).equal(t.get(z).reshape({12, 2, 5, 2, 3})));
}

// The shape: root [3] > "n" [3, 2] > ("n", "m") [3, 2] holding a [3, 2] leaf.
TEST(NestedBatchDimsTest, LevelWithoutDimsOfItsOwnUnderOneWithDims) {
  TensorDict t({{"n", TensorDict({{"m", TensorDict({{"y", at::ones({3, 2})}}, {3, 2})}}, {3, 2})}},
               {3});
  for (const TensorDict& r : {t.clone(), t.to(at::kDouble), t.apply([](const at::Tensor& x) {
                                return x + 1;
                              })}) {
    EXPECT_EQ(r.get_tensordict({"n", "m"}).batch_size(), at::IntArrayRef({3, 2}));
  }
  EXPECT_EQ(t.index({0}).get_tensordict({"n", "m"}).batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(t.unsqueeze(0).get_tensordict({"n", "m"}).batch_size(), at::IntArrayRef({1, 3, 2}));
}

// Names of a nested level's own dims stay on those dims.
TEST(NestedBatchDimsTest, NamesOfNestedDimsFollow) {
  TensorDict t = ExtraDimsTree();
  t.set_names({"b", "t"});
  t.get_tensordict({"n", "m"}).set_names({"b", "t", "c", "s"});
  const TensorDict r = t.permute({1, 0});
  EXPECT_EQ(r.get_tensordict({"n", "m"}).batch_size(), at::IntArrayRef({4, 3, 2, 5}));
  EXPECT_EQ(r.get_tensordict({"n", "m"}).names(), (DimNames{"t", "b", "c", "s"}));
  EXPECT_EQ(r.get_tensordict({"n", "m", "k"}).names(),
            (DimNames{"t", "b", "c", "s", std::nullopt}));
  EXPECT_EQ(r.get_tensordict("n").names(), (DimNames{"t", "b", std::nullopt}));
  const TensorDict row = t.index({0});
  EXPECT_EQ(row.get_tensordict({"n", "m"}).batch_size(), at::IntArrayRef({4, 2, 5}));
  EXPECT_EQ(row.get_tensordict({"n", "m"}).names(), (DimNames{"t", "c", "s"}));
}

// Rebuild checks every level it builds against its leaves: an output that does not fit is a
// BatchSizeError naming the key when the caller asked for checks, and an internal error naming
// the level, the key and both shapes when the caller promised the shapes; never a TensorDict.
TEST(NestedBatchDimsTest, RebuildRefusesOutputsThatDoNotFitTheirLevel) {
  const TensorDict t = ExtraDimsTree();
  internal::LeafTree tree(t);
  std::vector<at::Tensor> outputs = tree.leaves();
  size_t z = tree.num_leaves();
  for (size_t i = 0; i < tree.num_leaves(); ++i) {
    if (tree.key(i) == NestedKey({"n", "m", "k", "z"})) z = i;
  }
  ASSERT_LT(z, tree.num_leaves());
  outputs[z] = outputs[z].select(-2, 0);  // [3, 4, 2, 5, 3]: not [3, 4, 2, 5, 2, ...]
  TD_EXPECT_THROW_MSG(tree.Rebuild(outputs, t.batch_size(), /*check=*/true), BatchSizeError,
                      {"('n', 'm', 'k', 'z')", "torch.Size([3, 4, 2, 5, 3])",
                       "torch.Size([3, 4, 2, 5, 2])"});
  TD_EXPECT_THROW_MSG(tree.Rebuild(outputs, t.batch_size(), /*check=*/false), c10::Error,
                      {"internal error", "level ('n', 'm', 'k')", "('n', 'm', 'k', 'z')",
                       "torch.Size([3, 4, 2, 5, 3])", "torch.Size([3, 4, 2, 5, 2])"});
  std::vector<at::Tensor> root_outputs = tree.leaves();
  root_outputs[0] = root_outputs[0].transpose(0, 1);  // "a": [4, 3, 3] under the root's [3, 4]
  TD_EXPECT_THROW_MSG(tree.Rebuild(root_outputs, t.batch_size(), /*check=*/false), c10::Error,
                      {"internal error", "the root", "'a'", "torch.Size([4, 3, 3])",
                       "torch.Size([3, 4])"});
  // The unchanged leaves rebuild to the same levels.
  ExpectLevels(tree.Rebuild(tree.leaves(), t.batch_size(), /*check=*/false), {3, 4});
}

// A nested tensor (ragged) leaf two levels down passes the checks on its regular dims (its
// sizes() throws: the checks read ShapeOf).
TEST(NestedBatchDimsTest, RaggedLeafTwoLevelsDown) {
  const at::Tensor ragged =
      at::_nested_tensor_from_tensor_list({at::ones({2, 3}), at::full({4, 3}, 2.0)});
  TensorDict t({{"n", TensorDict({{"m", TensorDict({{"r", ragged}}, {2})}}, {2})}}, {2});
  EXPECT_TRUE(t.apply([](const at::Tensor& x) { return x; }).get({"n", "m", "r"}).is_nested());
  EXPECT_TRUE(t.detach().get({"n", "m", "r"}).is_nested());
  EXPECT_EQ(t.to_padded_tensor().get({"n", "m", "r"}).sizes(), at::IntArrayRef({2, 4, 3}));
}

}  // namespace
}  // namespace td
