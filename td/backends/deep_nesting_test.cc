// Deep nesting across backends: every TensorDict the core lets one build (at most
// td::kMaxNestingDepth levels, NOTE [ Nesting depth ] in td/core/entry_list.cc) can be written to
// and loaded from a memmap directory, shared and attached, stacked and viewed lazily, and every
// backend refuses the write that would nest one level deeper with a NestingError. Chains of lazy
// views of views are bounded the same way. Also run under --config=asan, whose frames are larger.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <sstream>
#include <string>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/backends/shared_memory/shared_memory.h"
#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"

namespace td {
namespace {

// A root with batch size [2] whose sub-TensorDicts "d" nest kMaxNestingDepth levels deep, with a
// leaf "x" at every level.
TensorDict Deepest() {
  TensorDict root({{"x", at::arange(2.)}}, {2});
  TensorDict c = root;
  for (int depth = 1; depth <= kMaxNestingDepth; ++depth) {
    c.set("d", TensorDict({{"x", at::arange(2.) + depth}}, {2}));
    c = c.get_tensordict("d");
  }
  return root;
}

// The handle to the deepest level of a TensorDict built like Deepest().
TensorDict DeepestLevel(const TensorDict& root) {
  TensorDict c = root;
  for (int depth = 1; depth <= kMaxNestingDepth; ++depth) c = c.get_tensordict("d");
  return c;
}

// Every walk gives the dense answer and the TensorDict is destroyed afterwards.
void ExpectWalksMatch(const TensorDict& t, const TensorDict& dense) {
  EXPECT_EQ(t.keys(test::kLeaves).size(), static_cast<size_t>(kMaxNestingDepth + 1));
  assert_allclose(t, dense);
  assert_allclose(t.clone(), dense);
  assert_allclose(t.to_dense(), dense);
  std::ostringstream os, dense_os;
  os << t;
  dense_os << dense;
  // Same structure (the header line names the backend): within a few hundred characters.
  EXPECT_NEAR(static_cast<double>(os.str().size()), static_cast<double>(dense_os.str().size()),
              1000.0);
}

// The write one level deeper, through a handle to the deepest level, is refused and writes
// nothing.
void ExpectOneDeeperRefused(const TensorDict& root) {
  TensorDict deepest = DeepestLevel(root);
  TD_EXPECT_THROW_MSG(deepest.set("d", TensorDict({}, root.batch_size())), NestingError,
                      {"'d'", "td::kMaxNestingDepth"});
  EXPECT_FALSE(deepest.contains("d"));
  TD_EXPECT_THROW_MSG(deepest.set({"e", "f"}, at::zeros(root.batch_size())), NestingError,
                      {"td::kMaxNestingDepth"});
  EXPECT_FALSE(deepest.contains("e"));
}

TEST(DeepNestingTest, MemmapWritesAndLoadsTheDeepest) {
  const TensorDict dense = Deepest();
  const std::string dir = testing_util::FreshDir("deep-nesting");
  TensorDict saved = dense.memmap(dir + "/td");
  ExpectWalksMatch(saved, dense);
  TensorDict loaded = TensorDict::load_memmap(dir + "/td");
  EXPECT_EQ(loaded.backend(), "memmap");
  ExpectWalksMatch(loaded, dense);
  loaded.unlock_();
  ExpectOneDeeperRefused(loaded);
  // The refused write left the directory as it was.
  ExpectWalksMatch(TensorDict::load_memmap(dir + "/td"), dense);
}

TEST(DeepNestingTest, SharedMemorySharesAndAttachesTheDeepest) {
  const TensorDict dense = Deepest();
  TensorDict shared = dense.clone();
  shared.share_memory_();
  ExpectWalksMatch(shared, dense);
  TensorDict attached = AttachSharedMemory(SharedMemoryHandle(shared));
  EXPECT_EQ(attached.backend(), "shared_memory");
  ExpectWalksMatch(attached, dense);
  TensorDict open = MakeTensorDict("shared_memory", StorageSpec().batch_size({2}));
  open.update(dense);
  ExpectWalksMatch(open, dense);
  ExpectOneDeeperRefused(open);
}

TEST(DeepNestingTest, LazyStacksAndViewsOfTheDeepest) {
  const TensorDict dense = Deepest();
  TensorDict a = dense.clone();
  TensorDict b = dense.clone();
  LazyStackedTensorDict stacked = lazy_stack({a, b}, 0);
  ExpectWalksMatch(stacked, td::stack({dense, dense}, 0));
  ExpectOneDeeperRefused(stacked);
  EXPECT_FALSE(DeepestLevel(a).contains("d"));
  TensorDict view = index_view(a, {at::indexing::Slice(0, 1)});
  ExpectWalksMatch(view, dense.index({at::indexing::Slice(0, 1)}));
  ExpectOneDeeperRefused(view);
  TensorDict unsqueezed = unsqueeze_view(a, 0);
  ExpectWalksMatch(unsqueezed, dense.unsqueeze(0));
  ExpectOneDeeperRefused(unsqueezed);
  EXPECT_FALSE(DeepestLevel(a).contains("d"));
  // The deepest TensorDict cannot be put one level down inside a stack or a view either.
  TensorDict holder({}, {2});
  TD_EXPECT_THROW_MSG(holder.set("s", lazy_stack({a, b}, 0).index({0})), NestingError,
                      {"'s'"});
  TD_EXPECT_THROW_MSG(holder.set("v", index_view(a, {at::indexing::Slice()})), NestingError,
                      {"'v'"});
  EXPECT_TRUE(holder.is_empty());
}

// Views of views (indexing a view gives a view of it, and views can be taken of views) and lazy stacks of lazy stacks form chains
// that every read walks and destruction unwinds: asked for 10,000 or 100,000 links, the chain
// stops at kMaxNestingDepth with a NestingError, and the chain built works and is destroyed.
TEST(DeepNestingTest, ChainsOfViewsAreBounded) {
  for (int links : {10000, 100000}) {
    TensorDict source({{"x", at::arange(6.).view({2, 3})}, {"n", {{"y", at::zeros({2, 3})}}}},
                      {2, 3});
    TensorDict v = source;
    int built = 0;
    try {
      for (int i = 0; i < links; ++i) {
        v = (i % 2 == 0) ? unsqueeze_view(v, 0) : squeeze_view(v, 0);
        ++built;
      }
    } catch (const NestingError& e) {
      EXPECT_NE(std::string(e.what()).find("td::kMaxNestingDepth"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(built, kMaxNestingDepth);
    const TensorDict expected = built % 2 == 0 ? source : source.unsqueeze(0);
    assert_allclose(v, expected);
    std::ostringstream os;
    os << v;
    EXPECT_NE(os.str().find("y"), std::string::npos);
    v.set_("x", expected.get("x") * 2);
    EXPECT_TRUE(source.get("x").equal(at::arange(6.).view({2, 3}) * 2));
    // A view of the chain's source is one link again.
    EXPECT_NO_THROW(index_view(LazyViewTensorDict::from(index_view(source, {0}))->source(), {1}));
  }  // destroyed here
}

TEST(DeepNestingTest, ChainsOfLazyStacksAreBounded) {
  for (int links : {10000, 100000}) {
    TensorDict s({{"x", at::arange(2.)}}, {2});
    int built = 0;
    try {
      for (int i = 0; i < links; ++i) {
        s = lazy_stack({s}, 0);
        ++built;
      }
    } catch (const NestingError& e) {
      EXPECT_NE(std::string(e.what()).find("lazy_stack"), std::string::npos) << e.what();
    }
    EXPECT_EQ(built, kMaxNestingDepth);
    EXPECT_EQ(s.batch_dims(), kMaxNestingDepth + 1);
    EXPECT_TRUE(s.get("x").flatten().equal(at::arange(2.)));
    LazyStackedTensorDict top(s);
    // A member as deep as the chain (a view of the current member) would make it one longer.
    TD_EXPECT_THROW_MSG(top.append(index_view(top.index({0}), {at::indexing::Slice()})),
                        NestingError, {"lazy_stack", "td::kMaxNestingDepth"});
    EXPECT_EQ(top.batch_size()[0], 1);
  }
}

}  // namespace
}  // namespace td
