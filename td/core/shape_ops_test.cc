#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>

#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::Slice;

using test::kLeaves;
using test::SampleTensorDict;

// `r` has batch size `batch`, "n" keeps its extra dim, "s" is carried, and every tensor leaf is
// fn(the source leaf).
void ExpectLeafwise(const TensorDict& src, const TensorDict& r, at::IntArrayRef batch,
                    const std::function<at::Tensor(const at::Tensor&)>& fn) {
  EXPECT_EQ(r.batch_size(), batch);
  std::vector<int64_t> nb = batch.vec();
  nb.push_back(2);
  EXPECT_EQ(r.get_tensordict("n").batch_size(), at::IntArrayRef(nb));
  EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    EXPECT_TRUE(r.get(k).equal(fn(src.get(k)))) << k;
  }
}

TEST(ShapeOpsTest, ViewReshapeFlattenUnflatten) {
  TensorDict t = SampleTensorDict();
  ExpectLeafwise(t, t.view({-1}), {12}, [](const at::Tensor& x) {
    std::vector<int64_t> s = {12};
    s.insert(s.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.view(s);
  });
  ExpectLeafwise(t, t.view({2, 6}), {2, 6}, [](const at::Tensor& x) {
    std::vector<int64_t> s = {2, 6};
    s.insert(s.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.view(s);
  });
  // A view shares memory.
  t.view({12}).get("a").zero_();
  EXPECT_TRUE(t.get("a").eq(0).all().item<bool>());
  TensorDict tt = SampleTensorDict().transpose(0, 1);
  ExpectLeafwise(tt, tt.reshape({-1}), {12}, [](const at::Tensor& x) {
    std::vector<int64_t> s = {12};
    s.insert(s.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.reshape(s);
  });
  TD_EXPECT_THROW_MSG(tt.view({12}), c10::Error, {"view", "'a'"});
  ExpectLeafwise(t, t.flatten(), {12}, [](const at::Tensor& x) { return x.flatten(0, 1); });
  ExpectLeafwise(t, t.flatten(-2, -1), {12}, [](const at::Tensor& x) { return x.flatten(0, 1); });
  ExpectLeafwise(t, t.unflatten(1, {2, -1}), {3, 2, 2},
                 [](const at::Tensor& x) { return x.unflatten(1, {2, 2}); });
  EXPECT_EQ(TensorDict({{"a", at::ones({5})}}, {}).flatten().batch_size(), at::IntArrayRef({1}));
  TD_EXPECT_THROW_MSG(t.view({5}), c10::ValueError, {"[5]", "torch.Size([3, 4])", "12 elements"});
  TD_EXPECT_THROW_MSG(t.view({-1, -1}), c10::ValueError, {"only one dimension"});
  TD_EXPECT_THROW_MSG(t.reshape({5, -1}), c10::ValueError, {"torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.unflatten(0, {2, 2}), c10::ValueError, {"[2, 2]"});
  TD_EXPECT_THROW_MSG(t.flatten(1, 0), c10::ValueError, {"start_dim"});
  TD_EXPECT_THROW_MSG(t.flatten(0, 2), c10::IndexError,
                      {"dimension 2", "torch.Size([3, 4])", "[-2, 1]"});
}

// A one-level TensorDict and the same with a nested level: same results, non-tensor entries
// carried, key order kept, errors name the key.
TEST(ShapeOpsTest, FlatAndNestedTensorDictsGiveTheSameResults) {
  TensorDict flat({{"b", at::randn({3, 4, 2})}, {"s", "a string!"}, {"a", at::randn({3, 4})}},
                  {3, 4});
  TensorDict nested = flat.clone();
  nested.set("n", TensorDict({}, {3, 4}));  // an empty level
  for (const auto& op : std::vector<std::function<TensorDict(const TensorDict&)>>{
           [](const TensorDict& t) { return t.unsqueeze(1); },
           [](const TensorDict& t) { return t.reshape({2, 6}); },
           [](const TensorDict& t) { return t.permute({1, 0}); },
           [](const TensorDict& t) { return t.index({1}); },
           [](const TensorDict& t) { return t.index({Slice(0, 2), at::tensor({0, 3}, at::kLong)}); }}) {
    TensorDict f = op(flat);
    TensorDict n = op(nested);
    EXPECT_EQ(f.keys(), (std::vector<NestedKey>{"b", "s", "a"}));
    EXPECT_EQ(f.batch_size(), n.batch_size());
    EXPECT_EQ(f.get_non_tensor("s"), "a string!");
    EXPECT_TRUE(f.get("a").equal(n.get("a")));
    EXPECT_TRUE(f.get("b").equal(n.get("b")));
  }
  TD_EXPECT_THROW_MSG(flat.transpose(0, 1).view({12}), c10::Error, {"view", "'b'"});
  TD_EXPECT_THROW_MSG(TensorDict({{"s", "x"}}, {3}).index({5}), c10::IndexError, {"5"});
  EXPECT_EQ(TensorDict({{"s", "x"}}, {3, 2}).index({1}).batch_size(), at::IntArrayRef({2}));
}

TEST(ShapeOpsTest, SqueezeUnsqueezePermuteTranspose) {
  TensorDict t = SampleTensorDict();
  TensorDict u = t.unsqueeze(1);
  ExpectLeafwise(t, u, {3, 1, 4}, [](const at::Tensor& x) { return x.unsqueeze(1); });
  ExpectLeafwise(t, t.unsqueeze(-1), {3, 4, 1}, [](const at::Tensor& x) { return x.unsqueeze(2); });
  ExpectLeafwise(t, t.unsqueeze(0).unsqueeze(-1).squeeze(), {3, 4},
                 [](const at::Tensor& x) { return x; });
  ExpectLeafwise(t, u.squeeze(1), {3, 4}, [](const at::Tensor& x) { return x; });
  ExpectLeafwise(t, u.squeeze(0).squeeze(-2), {3, 4}, [](const at::Tensor& x) { return x; });
  EXPECT_EQ(u.squeeze(0).batch_size(), at::IntArrayRef({3, 1, 4}));  // not size 1: no-op
  // squeeze() only touches batch dims: a feature dim of size 1 stays.
  TensorDict one({{"x", at::ones({1, 1})}}, {1});
  EXPECT_EQ(one.squeeze().get("x").sizes(), at::IntArrayRef({1}));
  ExpectLeafwise(t, t.permute({1, 0}), {4, 3},
                 [](const at::Tensor& x) { return x.transpose(0, 1); });
  ExpectLeafwise(t, t.permute({-1, 0}), {4, 3},
                 [](const at::Tensor& x) { return x.transpose(0, 1); });
  ExpectLeafwise(t, t.transpose(0, -1), {4, 3},
                 [](const at::Tensor& x) { return x.transpose(0, 1); });
  TD_EXPECT_THROW_MSG(t.unsqueeze(3), c10::IndexError, {"unsqueeze", "[-3, 2]"});
  TD_EXPECT_THROW_MSG(t.squeeze(2), c10::IndexError, {"squeeze", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.permute({0}), c10::ValueError, {"permute", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.permute({0, 0}), c10::ValueError, {"repeats"});
  TD_EXPECT_THROW_MSG(t.transpose(0, 2), c10::IndexError, {"transpose"});
}

TEST(ShapeOpsTest, ExpandRepeat) {
  TensorDict t = SampleTensorDict().index({Slice(0, 1)});  // [1, 4]
  ExpectLeafwise(t, t.expand({5, 3, 4}), {5, 3, 4}, [](const at::Tensor& x) {
    std::vector<int64_t> s = {5, 3, 4};
    s.insert(s.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.expand(s);
  });
  ExpectLeafwise(t, t.expand({3, -1}), {3, 4}, [](const at::Tensor& x) {
    std::vector<int64_t> s = {3, 4};
    s.insert(s.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.expand(s);
  });
  TD_EXPECT_THROW_MSG(t.expand({1, 5}), c10::ValueError,
                      {"torch.Size([1, 4])", "[1, 5]", "dim 1 has size 4"});
  TD_EXPECT_THROW_MSG(t.expand({4}), c10::ValueError, {"fewer dims"});
  ExpectLeafwise(t, t.repeat({2, 3}), {2, 12}, [](const at::Tensor& x) {
    std::vector<int64_t> r = {2, 3};
    r.resize(x.dim(), 1);
    return x.repeat(r);
  });
  ExpectLeafwise(t, t.repeat({2, 1, 1}), {2, 1, 4}, [](const at::Tensor& x) {
    std::vector<int64_t> r = {2, 1, 1};
    r.resize(x.dim() + 1, 1);
    return x.repeat(r);
  });
  TD_EXPECT_THROW_MSG(t.repeat({2}), c10::ValueError, {"at least 2"});
  TensorDict s = SampleTensorDict();
  ExpectLeafwise(s, s.repeat_interleave(2, 1), {3, 8},
                 [](const at::Tensor& x) { return x.repeat_interleave(2, 1); });
  ExpectLeafwise(s, s.repeat_interleave(at::tensor({1, 0, 2}), 0), {3, 4},
                 [](const at::Tensor& x) { return x.repeat_interleave(at::tensor({1, 0, 2}), 0); });
  ExpectLeafwise(s, s.repeat_interleave(2), {24},
                 [](const at::Tensor& x) { return x.flatten(0, 1).repeat_interleave(2, 0); });
  TD_EXPECT_THROW_MSG(s.repeat_interleave(at::tensor({1, 2}), 0), c10::ValueError,
                      {"one entry per element", "size 3"});
  TD_EXPECT_THROW_MSG(s.repeat_interleave(-1, 0), c10::ValueError, {">= 0"});
}

TEST(ShapeOpsTest, SplitChunkUnbind) {
  TensorDict t = SampleTensorDict();
  std::vector<TensorDict> parts = t.split(3, 1);
  ASSERT_EQ(parts.size(), 2u);
  ExpectLeafwise(t, parts[0], {3, 3}, [](const at::Tensor& x) { return x.split(3, 1)[0]; });
  ExpectLeafwise(t, parts[1], {3, 1}, [](const at::Tensor& x) { return x.split(3, 1)[1]; });
  parts = t.split({1, 2}, 0);
  ASSERT_EQ(parts.size(), 2u);
  ExpectLeafwise(t, parts[1], {2, 4}, [](const at::Tensor& x) { return x.narrow(0, 1, 2); });
  parts = t.chunk(3, -1);
  ASSERT_EQ(parts.size(), 2u);  // as torch: ceil(4 / 3) = 2 per chunk
  ExpectLeafwise(t, parts[1], {3, 2}, [](const at::Tensor& x) { return x.chunk(3, 1)[1]; });
  std::vector<TensorDict> rows = t.unbind(0);
  ASSERT_EQ(rows.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    ExpectLeafwise(t, rows[i], {4}, [i](const at::Tensor& x) { return x[i]; });
  }
  rows[1].get("a").fill_(3);  // views
  EXPECT_TRUE(t.get("a")[1].eq(3).all().item<bool>());
  std::vector<TensorDict> cols = t.unbind(-1);
  ASSERT_EQ(cols.size(), 4u);
  ExpectLeafwise(t, cols[2], {3}, [](const at::Tensor& x) { return x.select(1, 2); });
  TD_EXPECT_THROW_MSG(t.split({1, 1}, 0), c10::ValueError, {"sum to 2", "size 3"});
  TD_EXPECT_THROW_MSG(t.split(0, 0), c10::ValueError, {"positive"});
  TD_EXPECT_THROW_MSG(t.chunk(0), c10::ValueError, {"positive"});
  TD_EXPECT_THROW_MSG(t.unbind(2), c10::IndexError, {"unbind", "[-2, 1]"});
  TD_EXPECT_THROW_MSG(TensorDict().unbind(0), c10::IndexError, {"unbind", "torch.Size([])"});
}

TEST(ShapeOpsTest, FlipRollNarrow) {
  TensorDict t = SampleTensorDict();
  ExpectLeafwise(t, t.flip({0, -1}), {3, 4}, [](const at::Tensor& x) { return x.flip({0, 1}); });
  ExpectLeafwise(t, t.roll({1, -1}, {0, 1}), {3, 4},
                 [](const at::Tensor& x) { return x.roll({1, -1}, {0, 1}); });
  ExpectLeafwise(t, t.narrow(1, 1, 2), {3, 2}, [](const at::Tensor& x) { return x.narrow(1, 1, 2); });
  ExpectLeafwise(t, t.narrow(-1, -2, 2), {3, 2},
                 [](const at::Tensor& x) { return x.narrow(1, 2, 2); });
  TD_EXPECT_THROW_MSG(t.narrow(0, 2, 2), c10::IndexError, {"start 2", "length 2", "size 3"});
  TD_EXPECT_THROW_MSG(t.roll({1}, {0, 1}), c10::ValueError, {"one shift per dim"});
  TD_EXPECT_THROW_MSG(t.flip({2}), c10::IndexError, {"flip"});
}

TEST(ShapeOpsTest, GatherWhereMasked) {
  TensorDict t = SampleTensorDict();
  at::Tensor index = at::tensor({3, 0, 1, 2, 2, 2}, at::kLong).view({3, 2});
  ExpectLeafwise(t, t.gather(1, index), {3, 2}, [&](const at::Tensor& x) {
    std::vector<int64_t> s = {3, 2};
    s.resize(x.dim(), 1);
    std::vector<int64_t> e = {3, 2};
    e.insert(e.end(), x.sizes().begin() + 2, x.sizes().end());
    return x.gather(1, index.view(s).expand(e));
  });
  TD_EXPECT_THROW_MSG(t.gather(1, at::tensor({0, 4}, at::kLong).view({1, 2})), c10::IndexError,
                      {"[0, 4)", "got [0, 4]"});
  TD_EXPECT_THROW_MSG(t.gather(1, at::tensor({0}, at::kLong)), c10::ValueError, {"2 dims"});
  TD_EXPECT_THROW_MSG(t.gather(0, at::zeros({3, 5}, at::kLong)), c10::ValueError,
                      {"larger than the batch size"});

  at::Tensor cond = at::tensor({1, 0, 1}).to(at::kBool).view({3, 1});
  TensorDict other = t.apply([](const at::Tensor& x) { return at::ones_like(x) * 100; });
  auto expand_cond = [&](const at::Tensor& x) {
    std::vector<int64_t> s = {3, 1};
    s.resize(x.dim(), 1);
    return cond.view(s);
  };
  ExpectLeafwise(t, t.where(cond, other), {3, 4}, [&](const at::Tensor& x) {
    return at::where(expand_cond(x), x, at::ones_like(x) * 100);
  });
  ExpectLeafwise(t, t.where(cond, -1), {3, 4}, [&](const at::Tensor& x) {
    return at::where(expand_cond(x), x, at::full_like(x, -1));
  });
  ExpectLeafwise(t, t.masked_fill(cond, 7), {3, 4},
                 [&](const at::Tensor& x) { return x.masked_fill(expand_cond(x), 7); });
  TensorDict c = t.clone();
  c.masked_fill_(cond, 7);
  ExpectLeafwise(t, c, {3, 4}, [&](const at::Tensor& x) { return x.masked_fill(expand_cond(x), 7); });
  at::Tensor m = at::rand({3, 4}) > 0.5;
  ExpectLeafwise(t, t.masked_select(m), {m.sum().item<int64_t>()},
                 [&](const at::Tensor& x) { return x.index({m}); });
  TD_EXPECT_THROW_MSG(t.where(at::ones({4}, at::kBool), other), c10::ValueError,
                      {"torch.Size([4])", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.where(at::ones({3}), other), c10::TypeError, {"bool"});
  TD_EXPECT_THROW_MSG(t.where(cond, other.exclude({"a"})), KeyError, {"'a'", "missing"});
  TD_EXPECT_THROW_MSG(t.where(cond, other.index({0})), BatchSizeError, {"torch.Size([4])"});
  TD_EXPECT_THROW_MSG(t.masked_fill(at::ones({3, 5}, at::kBool), 0), c10::ValueError,
                      {"torch.Size([3, 5])"});
  TD_EXPECT_THROW_MSG(t.masked_select(at::ones({2}, at::kBool)), c10::IndexError,
                      {"torch.Size([2])"});
}

TEST(ShapeOpsTest, Pad) {
  TensorDict t = SampleTensorDict();
  ExpectLeafwise(t, t.pad({1, 2}), {6, 4}, [](const at::Tensor& x) {
    std::vector<int64_t> p(2 * x.dim(), 0);
    p[2 * (x.dim() - 1)] = 1;
    p[2 * (x.dim() - 1) + 1] = 2;
    return at::constant_pad_nd(x, p, 0);
  });
  ExpectLeafwise(t, t.pad({0, 0, -1, 1}, 5), {3, 4}, [](const at::Tensor& x) {
    std::vector<int64_t> p(2 * x.dim(), 0);
    p[2 * (x.dim() - 2)] = -1;
    p[2 * (x.dim() - 2) + 1] = 1;
    return at::constant_pad_nd(x, p, 5);
  });
  TD_EXPECT_THROW_MSG(t.pad({1}), c10::ValueError, {"pairs"});
  TD_EXPECT_THROW_MSG(t.pad({1, 1, 1, 1, 1, 1}), c10::ValueError, {"at most 2"});
  TD_EXPECT_THROW_MSG(t.pad({-4, 0}), c10::ValueError, {"negative"});
  // Negative amounts cannot remove more than the dim has, even when the other side adds more
  // (constant_pad_nd refuses it too), with or without leaves.
  TD_EXPECT_THROW_MSG(TensorDict({}, {0}).pad({-1, 2}), c10::ValueError,
                      {"removes more than batch dim 0 has"});
  TD_EXPECT_THROW_MSG(t.pad({-4, 5}), c10::ValueError, {"removes more"});
}

// fliplr / flipud / rot90 / tile / atleast_*d / swapdims against torch's op on every leaf's batch
// dims (nested leaves keep their extra dims after them).
TEST(ShapeOpsTest, FlipsRot90TileAtLeast) {
  const TensorDict t = SampleTensorDict();  // batch [3, 4]
  ExpectLeafwise(t, t.fliplr(), {3, 4}, [](const at::Tensor& x) { return x.flip({1}); });
  ExpectLeafwise(t, t.flipud(), {3, 4}, [](const at::Tensor& x) { return x.flip({0}); });
  ExpectLeafwise(t, t.rot90(), {4, 3}, [](const at::Tensor& x) { return at::rot90(x, 1, {0, 1}); });
  ExpectLeafwise(t, t.rot90(2), {3, 4}, [](const at::Tensor& x) { return at::rot90(x, 2, {0, 1}); });
  ExpectLeafwise(t, t.rot90(-1, {1, 0}), {4, 3},
                 [](const at::Tensor& x) { return at::rot90(x, -1, {1, 0}); });
  ExpectLeafwise(t, t.rot90(3, {-1, 0}), {4, 3},
                 [](const at::Tensor& x) { return at::rot90(x, 3, {1, 0}); });
  // tile: fewer entries than batch dims are leading 1s; more add leading dims.
  ExpectLeafwise(t, t.tile({2}), {3, 8}, [](const at::Tensor& x) {
    std::vector<int64_t> r(x.dim(), 1);
    r[1] = 2;
    return x.repeat(r);
  });
  ExpectLeafwise(t, t.tile({2, 1, 3}), {2, 3, 12}, [](const at::Tensor& x) {
    std::vector<int64_t> r(x.dim() + 1, 1);
    r[0] = 2;
    r[2] = 3;
    return x.repeat(r);
  });
  ExpectLeafwise(t, t.swapdims(0, -1), {4, 3}, [](const at::Tensor& x) { return x.transpose(0, 1); });
  ExpectLeafwise(t, t.atleast_1d(), {3, 4}, [](const at::Tensor& x) { return x; });
  ExpectLeafwise(t, t.atleast_2d(), {3, 4}, [](const at::Tensor& x) { return x; });
  ExpectLeafwise(t, t.atleast_3d(), {1, 3, 4}, [](const at::Tensor& x) { return x.unsqueeze(0); });
  EXPECT_TRUE(t.atleast_2d().is_same(t));  // already there: this TensorDict, as in Python
  const TensorDict scalar({{"a", at::ones({5})}, {"n", {{"b", at::zeros({})}}}}, {});
  EXPECT_EQ(scalar.atleast_1d().batch_size(), at::IntArrayRef({1}));
  EXPECT_EQ(scalar.atleast_2d().get("a").sizes(), at::IntArrayRef({1, 1, 5}));
  EXPECT_EQ(scalar.atleast_3d().get({"n", "b"}).sizes(), at::IntArrayRef({1, 1, 1}));
  // fliplr needs two batch dims, flipud one; rot90 two distinct dims in range.
  const TensorDict row = t.index({0});  // batch [4]
  TD_EXPECT_THROW_MSG(row.fliplr(), c10::ValueError, {"fliplr", "2 batch dims", "torch.Size([4])"});
  TD_EXPECT_THROW_MSG(scalar.flipud(), c10::ValueError, {"flipud", "torch.Size([])"});
  TD_EXPECT_THROW_MSG(t.rot90(1, {0, 0}), c10::ValueError, {"rot90", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.rot90(1, {0}), c10::ValueError, {"rot90", "two batch dims"});
  TD_EXPECT_THROW_MSG(t.rot90(1, {0, 2}), c10::IndexError, {"rot90", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.tile({-1}), c10::ValueError, {"negative"});
}

// Agreement with LibTorch on edge cases the generative test (//tests/generative) found.
TEST(ShapeOpsTest, EdgeCasesAsLibTorch) {
  // chunk / split of a dim of size 0: at::chunk gives `chunks` empty pieces, split(0) one.
  const TensorDict empty({{"a", at::zeros({0, 2, 3})}}, {0, 2});
  EXPECT_EQ(empty.chunk(3, 0).size(), at::zeros({0, 2}).chunk(3, 0).size());
  EXPECT_EQ(empty.chunk(3, 0).size(), 3u);
  EXPECT_EQ(empty.split(0, 0).size(), 1u);
  TD_EXPECT_THROW_MSG(empty.split(0, 1), c10::ValueError, {"split", "size 2"});
  // flip refuses a repeated dim as torch.flip does.
  const TensorDict t({{"a", at::zeros({3, 3, 2})}}, {3, 3});
  TD_EXPECT_THROW_MSG(t.flip({0, -2}), c10::ValueError, {"flip", "more than once"});
  // where(condition, number) promotes as torch.where: a bool leaf and 2 give int64, an int leaf
  // and 0.5 the default float dtype.
  const TensorDict w({{"b", at::ones({2, 3}, at::kBool)}, {"i", at::ones({2}, at::kInt)}}, {2});
  const at::Tensor cond = at::tensor({1, 0}).to(at::kBool);
  EXPECT_EQ(w.where(cond, 2).get("b").scalar_type(), at::kLong);
  EXPECT_EQ(w.where(cond, 0.5).get("i").scalar_type(), at::kFloat);
  EXPECT_TRUE(w.where(cond, 0.5).get("i").equal(at::tensor({1.0f, 0.5f})));
}

}  // namespace
}  // namespace td
