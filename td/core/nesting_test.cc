// Deep nesting and locks that span levels: TensorDicts nest at most td::kMaxNestingDepth levels
// (a NestingError at the write that would go deeper, however the TensorDict is built), and the
// deepest TensorDict that can be built is destroyed, cloned, listed, printed and moved without
// exhausting the stack (these tests also run under --config=asan, whose frames are larger).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace td
