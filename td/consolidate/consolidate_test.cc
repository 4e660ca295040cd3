#include "td/consolidate/consolidate.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>

#include "td/consolidate/internal/layout.h"
#include "td/core/testing.h"

namespace td {
namespace {

using internal::kAlign;

std::vector<at::Tensor> Leaves(const TensorDict& t) {
  std::vector<at::Tensor> out;
  for (const Value& v : t.values(KeysOptions().include_nested(true).leaves_only(true))) {
    if (v.is_tensor()) out.push_back(v.tensor());
  }
  return out;
}

TEST(Consolidate, EveryLeafIsAnAlignedViewIntoOneBuffer) {
  TensorDict td = test::SampleTensorDict();
  td.set({"n", "y"}, at::ones({3, 4, 2, 3}, at::kDouble));
  TensorDict c = consolidate(td);
  EXPECT_FALSE(is_consolidated(td));
  ASSERT_TRUE(is_consolidated(c));
  EXPECT_EQ(c.keys(KeysOptions().include_nested(true)), td.keys(KeysOptions().include_nested(true)));
  EXPECT_TRUE(allclose(c, td));
  EXPECT_EQ(c.get_non_tensor("s"), td.get_non_tensor("s"));
  EXPECT_EQ(c.get_tensordict("n").batch_size(), td.get_tensordict("n").batch_size());
  std::set<const void*> storages;
  at::Tensor buffer = *consolidated_buffer(c);
  const auto* base = static_cast<const uint8_t*>(buffer.data_ptr());
  for (const at::Tensor& t : Leaves(c)) {
    storages.insert(t.storage().unsafeGetStorageImpl());
    EXPECT_TRUE(t.is_contiguous());
    const auto off = static_cast<const uint8_t*>(t.data_ptr()) - base;
    EXPECT_EQ(off % kAlign, 0);
    EXPECT_LE(off + t.numel() * static_cast<int64_t>(t.element_size()), buffer.numel());
  }
  EXPECT_EQ(storages.size(), 1u);
  // Independent of the source.
  td.get("a").fill_(7);
  EXPECT_FALSE(c.get("a").eq(7).all().item<bool>());
}

// Dim names of every level are kept, in memory and through a file.
TEST(Consolidate, KeepsDimNames) {
  TensorDict td = test::SampleTensorDict();  // batch [3, 4], "n" [3, 4, 2]
  td.set_names({"env", "time"});
  td.get_tensordict("n").set_names({"env", "time", "agent"});
  for (const TensorDict& c : {consolidate(td), consolidate(td, ConsolidateOptions().num_threads(2)),
                              consolidate(td, ConsolidateOptions().share_memory(true))}) {
    ASSERT_TRUE(is_consolidated(c));
    EXPECT_EQ(c.names(), DimNames({"env", "time"}));
    EXPECT_EQ(c.get_tensordict("n").names(), DimNames({"env", "time", "agent"}));
  }
}

TEST(Consolidate, ConsolidatedIsReturnedAsIs) {
  TensorDict c = consolidate(test::SampleTensorDict());
  TensorDict again = consolidate(c, ConsolidateOptions().pin_memory(true).num_threads(2));
  EXPECT_TRUE(again.is_same(c));
  TensorDict shallow = c.copy();  // same leaves: still consolidated
  EXPECT_TRUE(is_consolidated(shallow));
}

TEST(Consolidate, WhatEndsIt) {
  TensorDict c = consolidate(test::SampleTensorDict());
  {
    TensorDict d = c.copy();
    d.set("new", at::zeros({3, 4}));
    EXPECT_FALSE(is_consolidated(d));
    EXPECT_FALSE(consolidated_buffer(d).has_value());
  }
  {
    TensorDict d = c.copy();
    d.set("a", at::zeros({3, 4, 7}));  // another shape
    EXPECT_FALSE(is_consolidated(d));
  }
  {
    TensorDict d = c.copy();
    d.set("a", d.get("a").clone());  // same shape, other memory
    EXPECT_FALSE(is_consolidated(d));
  }
  {
    TensorDict d = c.copy();
    d.del_({"n", "x"});
    EXPECT_FALSE(is_consolidated(d));
  }
  EXPECT_FALSE(is_consolidated(c.index({0})));
  EXPECT_FALSE(is_consolidated(c.get_tensordict("n")));  // part of the buffer only
  // In-place writes keep it.
  c.set_("a", at::ones({3, 4, 5}));
  c.get("b").add_(1);
  c.set("a", c.get("a"));
  EXPECT_TRUE(is_consolidated(c));
  EXPECT_TRUE(c.get("a").eq(1).all().item<bool>());
  // Re-consolidating a TensorDict whose consolidation ended gives a new buffer.
  TensorDict d = c.copy();
  d.set("z", at::ones({3, 4}));
  TensorDict e = consolidate(d);
  EXPECT_TRUE(is_consolidated(e));
  EXPECT_TRUE(allclose(e, d));
}

TEST(Consolidate, NoLeavesIsNotConsolidated) {
  TensorDict empty({}, {2});
  EXPECT_FALSE(is_consolidated(empty));
  TensorDict c = consolidate(empty);
  EXPECT_FALSE(is_consolidated(c));
  EXPECT_EQ(c.batch_size(), at::IntArrayRef({2}));
}

TEST(Consolidate, ZeroSizedAndNonContiguousLeaves) {
  TensorDict td({{"e", at::zeros({4, 0})},
                 {"t", at::arange(12, at::kFloat).view({3, 4}).t()},
                 {"b", at::ones({4}, at::kBool)}},
                {4});
  TensorDict c = consolidate(td);
  ASSERT_TRUE(is_consolidated(c));
  EXPECT_TRUE(allclose(c.select({"t"}), td.select({"t"})));
  EXPECT_TRUE(c.get("b").all().item<bool>());
  EXPECT_EQ(c.get("e").sizes(), at::IntArrayRef({4, 0}));
}

TEST(Consolidate, ThreadsAndOptionsGiveTheSameValues) {
  TensorDict td({}, {8});
  for (int i = 0; i < 40; ++i) td.set("k" + std::to_string(i), at::randn({8, 1000}));
  TensorDict serial = consolidate(td, ConsolidateOptions().num_threads(1));
  TensorDict threaded = consolidate(td, ConsolidateOptions().num_threads(4));
  // Pinned memory needs CUDA; without it the option is ignored.
  TensorDict pinned = consolidate(td, ConsolidateOptions().pin_memory(true));
  TensorDict on_cpu = consolidate(td, ConsolidateOptions().device(at::kCPU));
  for (const TensorDict& c : {serial, threaded, pinned, on_cpu}) {
    EXPECT_TRUE(is_consolidated(c));
    EXPECT_TRUE(allclose(c, td));
  }
  EXPECT_EQ(on_cpu.device(), std::optional<at::Device>(at::kCPU));
}

TEST(Consolidate, SharedMemory) {
  TensorDict td = test::SampleTensorDict();
  TensorDict c = consolidate(td, ConsolidateOptions().share_memory(true));
  EXPECT_TRUE(is_consolidated(c));
  EXPECT_TRUE(c.is_shared());
  EXPECT_TRUE(allclose(c, td));
}

TEST(Consolidate, RefusesNonStridedLeaves) {
  TensorDict td({{"s", at::eye(3).to_sparse()}}, {3});
  TD_EXPECT_THROW_MSG(consolidate(td), ValueError, {"'s'", "strided"});
}

TEST(Consolidate, FileAndDeviceAreExclusive) {
  TensorDict td = test::SampleTensorDict();
  TD_EXPECT_THROW_MSG(
      consolidate(td, ConsolidateOptions().filename("/tmp/x.td").device(at::Device("meta"))),
      ValueError, {"exclusive"});
}

// The members run one kernel over a consolidated TensorDict's buffer (NOTE [ One buffer, one
// kernel ] in td/core/leafwise.cc) and give the leaf-by-leaf result.

// Float leaves only (one dtype), nested, with odd sizes so that there are gaps between leaves.
TensorDict Floats() {
  at::manual_seed(1);
  return TensorDict({{"a", at::randn({4, 3})},
                     {"b", at::randn({4, 7, 2})},
                     {"n", {{"x", at::randn({4, 1})}, {"y", at::randn({4, 5})}}},
                     {"s", "text"}},
                    {4});
}

// True when every tensor leaf of `t` is a view into one storage other than `not_in`'s.
bool OneNewBuffer(const TensorDict& t, const TensorDict& not_in) {
  std::set<const void*> storages;
  for (const at::Tensor& x : Leaves(t)) storages.insert(x.storage().unsafeGetStorageImpl());
  return storages.size() == 1 &&
         *storages.begin() != Leaves(not_in)[0].storage().unsafeGetStorageImpl();
}

// `exact`: false for transcendental functions, whose vectorised and scalar kernels may differ in
// the last bits depending on where a leaf sits in the buffer.
void ExpectSameLeaves(const TensorDict& got, const TensorDict& want, bool exact = true) {
  ASSERT_EQ(got.keys(KeysOptions().include_nested(true)),
            want.keys(KeysOptions().include_nested(true)));
  const std::vector<at::Tensor> g = Leaves(got), w = Leaves(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].scalar_type(), w[i].scalar_type()) << i;
    EXPECT_EQ(g[i].sizes(), w[i].sizes()) << i;
    EXPECT_TRUE(exact ? at::equal(g[i], w[i]) : at::allclose(g[i], w[i], 1e-6, 1e-30)) << i;
  }
  EXPECT_EQ(got.batch_size(), want.batch_size());
}

TEST(ConsolidatedMembers, CopiesAndCastsAreOneBuffer) {
  const TensorDict plain = Floats();
  const TensorDict c = consolidate(plain);
  const TensorDict d = c.clone();
  EXPECT_TRUE(OneNewBuffer(d, c));
  ExpectSameLeaves(d, plain);
  EXPECT_EQ(d.get_non_tensor("s"), "text");
  d.get("a").fill_(3);
  EXPECT_FALSE(c.get("a").eq(3).all().item<bool>());
  for (at::ScalarType dt : {at::kDouble, at::kHalf, at::kBFloat16, at::kInt}) {
    const TensorDict cast = c.to(dt);
    EXPECT_TRUE(OneNewBuffer(cast, c)) << dt;
    ExpectSameLeaves(cast, plain.to(dt));
  }
  // And back again through a half buffer.
  ExpectSameLeaves(c.to(at::kHalf).to(at::kFloat), plain.to(at::kHalf).to(at::kFloat));
  ExpectSameLeaves(c.to(at::Device(at::kCPU)), plain);
}

TEST(ConsolidatedMembers, PointwiseOpsAreOneBuffer) {
  const TensorDict plain = Floats();
  const TensorDict a = consolidate(plain);
  EXPECT_TRUE(OneNewBuffer(a * 2, a));
  ExpectSameLeaves(a * 2, plain * 2);
  ExpectSameLeaves(a.exp(), plain.exp(), /*exact=*/false);
  ExpectSameLeaves(a.clamp(-0.5, 0.5), plain.clamp(-0.5, 0.5));
  // Two operands laid out alike (b is one buffer with a's layout).
  const TensorDict b = a * 3;
  const TensorDict sum = a.add(b, 2);
  EXPECT_TRUE(OneNewBuffer(sum, a));
  ExpectSameLeaves(sum, plain.add(plain * 3, 2));
  // Same entries inserted in another order: another layout, leaf by leaf, same result.
  const TensorDict reordered = consolidate(TensorDict(
      {{"n", {{"y", b.get({"n", "y"})}, {"x", b.get({"n", "x"})}}}, {"b", b.get("b")},
       {"a", b.get("a")}},
      {4}));
  ExpectSameLeaves(a.add(reordered), plain.add(plain * 3));
  EXPECT_THROW(a.add(b.exclude({"a"})), KeyError);
}

TEST(ConsolidatedMembers, InPlaceOpsWriteTheBuffer) {
  const TensorDict plain = Floats();
  TensorDict a = consolidate(plain);
  const at::Tensor buffer = *consolidated_buffer(a);
  a.mul_(2).add_(consolidate(plain), 0.5).clamp_(-1, 1);
  EXPECT_TRUE(is_consolidated(a));
  EXPECT_TRUE(consolidated_buffer(a)->is_same(buffer) ||
              consolidated_buffer(a)->data_ptr() == buffer.data_ptr());
  ExpectSameLeaves(a, (plain * 2 + plain * 0.5).clamp(-1, 1));
  a.zero_();
  ExpectSameLeaves(a, plain.clone().zero_());
}

TEST(ConsolidatedMembers, MixedDtypesAndUnconsolidatedGiveTheSameResults) {
  const TensorDict mixed = test::SampleTensorDict();
  const TensorDict c = consolidate(mixed);
  ExpectSameLeaves(c.clone(), mixed);
  ExpectSameLeaves(c * 2, mixed * 2);
  ExpectSameLeaves(c.to(at::kDouble), mixed.to(at::kDouble));
  TensorDict z = c.clone();
  z.zero_();
  ExpectSameLeaves(z, mixed.clone().zero_());
  // A consolidated TensorDict that got a new key: still right.
  TensorDict grown = consolidate(Floats());
  grown.set("extra", at::ones({4, 2}));
  EXPECT_FALSE(is_consolidated(grown));
  ExpectSameLeaves(grown * 2, grown.apply([](const at::Tensor& x) { return x * 2; }));
}

}  // namespace
}  // namespace td
