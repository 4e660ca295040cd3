#include "td/core/stack.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/testing.h"

namespace td {
namespace {

TensorDict Make(double v) {
  TensorDict n({{"x", at::full({3, 4, 2, 6}, v)}}, {3, 4, 2});
  return TensorDict({{"a", at::randn({3, 4, 5})},
                     {"b", at::arange(12).view({3, 4}) + static_cast<int64_t>(v)},
                     {"n", n},
                     {"s", "tag"}},
                    {3, 4});
}

using test::kLeaves;

TEST(StackTest, StackMatchesTorchOnEveryLeaf) {
  std::vector<TensorDict> tds = {Make(0), Make(1), Make(2)};
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    TensorDict s = stack(tds, dim);
    at::Tensor probe = at::stack({at::zeros({3, 4}), at::zeros({3, 4}), at::zeros({3, 4})}, dim);
    EXPECT_EQ(s.batch_size(), probe.sizes());
    std::vector<int64_t> nb = probe.sizes().vec();
    nb.push_back(2);
    EXPECT_EQ(s.get_tensordict("n").batch_size(), at::IntArrayRef(nb));
    EXPECT_EQ(s.get_non_tensor("s"), "tag");
    const int64_t d = dim < 0 ? dim + 3 : dim;
    for (const NestedKey& k : tds[0].keys(kLeaves)) {
      if (!tds[0].get_value(k).is_tensor()) continue;
      EXPECT_TRUE(s.get(k).equal(
          at::stack({tds[0].get(k), tds[1].get(k), tds[2].get(k)}, d)))
          << k << " dim " << dim;
    }
  }
  // Round trip with unbind.
  TensorDict s = stack(tds, 1);
  std::vector<TensorDict> back = unbind(s, 1);
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) assert_allclose(back[i], tds[i]);
}

TEST(StackTest, CatMatchesTorchOnEveryLeaf) {
  std::vector<TensorDict> tds = {Make(0), Make(1).index({at::indexing::Slice(0, 2)})};
  TensorDict c = cat(tds, 0);
  EXPECT_EQ(c.batch_size(), at::IntArrayRef({5, 4}));
  EXPECT_EQ(c.get_tensordict("n").batch_size(), at::IntArrayRef({5, 4, 2}));
  for (const NestedKey& k : tds[0].keys(kLeaves)) {
    if (!tds[0].get_value(k).is_tensor()) continue;
    EXPECT_TRUE(c.get(k).equal(at::cat({tds[0].get(k), tds[1].get(k)}, 0))) << k;
  }
  std::vector<TensorDict> same = {Make(0), Make(1)};
  TensorDict c1 = cat(same, -1);
  EXPECT_EQ(c1.batch_size(), at::IntArrayRef({3, 8}));
  EXPECT_TRUE(c1.get("a").equal(at::cat({same[0].get("a"), same[1].get("a")}, 1)));
  EXPECT_EQ(c1.get_non_tensor("s"), "tag");
}

TEST(StackTest, Errors) {
  TensorDict a = Make(0);
  TensorDict b = Make(1);
  b.del_("a");
  b.set({"n", "extra"}, at::zeros({3, 4, 2}));
  TD_EXPECT_THROW_MSG(stack({a, b}, 0), KeyError,
                      {"different keys", "['a']", "only in the first", "[('n', 'extra')]",
                       "TensorDict 1"});
  TD_EXPECT_THROW_MSG(cat({a, b}, 0), KeyError, {"['a']", "('n', 'extra')"});
  TD_EXPECT_THROW_MSG(stack({a, a.index({0})}, 0), BatchSizeError,
                      {"TensorDict 1", "torch.Size([4])", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(cat({a, a.transpose(0, 1)}, 0), BatchSizeError,
                      {"TensorDict 1", "torch.Size([4, 3])", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(stack({}, 0), c10::ValueError, {"non-empty"});
  TD_EXPECT_THROW_MSG(cat({}, 0), c10::ValueError, {"non-empty"});
  TD_EXPECT_THROW_MSG(stack({a, a}, 3), c10::IndexError, {"stack", "[-3, 2]"});
  TD_EXPECT_THROW_MSG(cat({a, a}, 2), c10::IndexError, {"cat", "[-2, 1]"});
  TensorDict c = Make(2);
  c.set("s", "other tag");
  // Different non-tensor values stack into a NonTensorStack, as upstream's _stack_non_tensor
  // (td/core/non_tensor_stack_test.cc).
  EXPECT_EQ(stack({a, c}, 0).get_value("s").kind(), "NonTensorStack");
  TensorDict d = Make(3);
  d.set("a", TensorDict({}, {3, 4}));
  TD_EXPECT_THROW_MSG(stack({a, d}, 0), c10::TypeError, {"'a'", "TensorDict"});
  TensorDict e = Make(4);
  e.set("a", at::zeros({3, 4, 6}));
  TD_EXPECT_THROW_MSG(stack({a, e}, 0), c10::Error, {"stacking key 'a'"});
}

}  // namespace
}  // namespace td
