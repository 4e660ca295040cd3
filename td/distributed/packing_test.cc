// The packed layout (single process): group order and alignment, pack/unpack round trips,
// signature mismatch descriptions, structure round trip.
#include "td/distributed/internal/packing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/core/testing.h"

namespace td {
namespace distributed {
namespace internal {
namespace {

// NOTE [ Scratch buffers ]: a released buffer is reused, a held one never is, and buffers over
// the pool's limits are not kept.
TEST(PackingTest, ScratchBuffersAreReusedOnlyWhenReleased) {
  const int64_t mib = int64_t{1} << 20;
  at::Tensor a = ScratchBytes(8 * mib, at::kCPU);
  const void* first = a.data_ptr();
  at::Tensor b = ScratchBytes(8 * mib, at::kCPU);
  EXPECT_NE(b.data_ptr(), first);  // `a` is held: never handed out twice
  a.fill_(1);
  b.fill_(2);
  EXPECT_TRUE(a.eq(1).all().item<bool>());
  a = at::Tensor();
  at::Tensor c = ScratchBytes(4 * mib, at::kCPU);  // fits into the released buffer
  EXPECT_EQ(c.data_ptr(), first);  // the first test of this binary: no other buffer is free
  EXPECT_NE(c.data_ptr(), b.data_ptr());
  EXPECT_EQ(c.numel(), 4 * mib);
  const int64_t held = ScratchPoolBytes();
  EXPECT_LE(held, kScratchSlots * 8 * mib);
  // Many concurrent holders: the ones past the slots are plain allocations, all distinct.
  std::vector<at::Tensor> many;
  for (int i = 0; i < kScratchSlots + 2; ++i) many.push_back(ScratchBytes(mib, at::kCPU));
  for (size_t i = 0; i < many.size(); ++i) {
    for (size_t j = i + 1; j < many.size(); ++j) {
      EXPECT_NE(many[i].data_ptr(), many[j].data_ptr());
    }
  }
  EXPECT_LE(ScratchPoolBytes(), kScratchSlots * 8 * mib);
}

// The padding behind each group travels as zeros whatever the reused scratch buffer held (NOTE
// [ Scratch buffers ]): no byte of an earlier message goes out with a later one.
TEST(PackingTest, PaddingIsZerosInAReusedBuffer) {
  const TensorDict td({{"b", at::ones({3}, at::kInt)}, {"d", at::ones({5}, at::kDouble)}}, {});
  const PackedLayout layout(td);  // 12 and 40 bytes, each group padded to kAlign
  ASSERT_EQ(layout.nbytes(), 2 * kAlign);
  for (int64_t prefix : {int64_t{0}, kAlign}) {
    ScratchBytes(prefix + layout.nbytes(), at::kCPU).fill_(0xAB);  // back in the pool
    const at::Tensor data = layout.Pack(prefix).narrow(0, prefix, layout.nbytes());
    at::Tensor padding = at::ones({layout.nbytes()}, at::kBool);
    for (const auto& leaf : layout.leaves()) {
      padding.narrow(0, leaf.offset, static_cast<int64_t>(leaf.tensor.nbytes())).fill_(false);
    }
    EXPECT_EQ(data.masked_select(padding).nonzero().numel(), 0) << "prefix " << prefix;
  }
}

TEST(PackingTest, GroupsAlignedAndRoundTrip) {
  TensorDict td({{"z", at::arange(5, at::kFloat)},
                 {"b", at::arange(2) > 0},
                 {"a", at::arange(3, at::kFloat).to(at::kBFloat16)},
                 {"n", TensorDict({{"x", at::arange(4, at::kDouble)}}, {})}},
                {});
  PackedLayout layout(td);
  ASSERT_EQ(layout.leaves().size(), 4u);
  EXPECT_EQ(layout.leaves()[0].key, NestedKey("a"));  // sorted by key
  EXPECT_EQ(layout.groups().size(), 4u);
  for (const auto& g : layout.groups()) EXPECT_EQ(g.offset % kAlign, 0);
  at::Tensor buf = layout.Pack(kAlign);
  EXPECT_EQ(buf.numel(), kAlign + layout.nbytes());
  TensorDict out = td.clone().zero_();
  PackedLayout(out).Unpack(buf.narrow(0, kAlign, layout.nbytes()), out);
  for (const auto& k : td.keys(td::test::kLeaves)) {
    EXPECT_TRUE(at::equal(out.get(k), td.get(k))) << k;
  }
}

// Unpack writes straight into leaves only when every level hands out its stored tensors: a
// dense TensorDict holding a lazy stack gets the stacked key through update_, into the members.
TEST(PackingTest, UnpackReachesTheMembersOfANestedLazyStack) {
  std::vector<TensorDict> members;
  for (int i = 0; i < 2; ++i) members.push_back(TensorDict({{"x", at::zeros({3})}}, {}));
  TensorDict td({{"a", at::zeros({2})}, {"s", td::lazy_stack(members, 0)}}, {});
  EXPECT_FALSE(LeavesWriteThrough(td));
  EXPECT_TRUE(LeavesWriteThrough(td.to_dense()));
  EXPECT_FALSE(LeavesWriteThrough(td::index_view(td.to_dense().unsqueeze(0), {0})));
  TensorDict sent({{"a", at::ones({2})}, {"s", {{"x", at::full({2, 3}, 2.0)}}}}, {});
  PackedLayout layout(sent);
  PackedLayout(td).Unpack(layout.Pack(), td);
  EXPECT_TRUE(at::equal(td.get("a"), at::ones({2})));
  for (const TensorDict& m : members) EXPECT_TRUE(at::equal(m.get("x"), at::full({3}, 2.0)));
}

// NOTE [ Packed layout ]: large leaves form groups of their own behind the small ones; the data
// unpacks alike from one piece or from the inline part and the large part.
TEST(PackingTest, LargeLeavesComeAfterTheInlineData) {
  const int64_t floats = kAloneMinBytes / 4;
  TensorDict td({{"a", at::arange(floats, at::kFloat)},
                 {"b", at::arange(3, at::kFloat)},
                 {"c", at::arange(floats / 2, at::kDouble)},
                 {"d", at::arange(5, at::kLong)},
                 {"e", at::arange(2 * floats, at::kFloat) - 7}},
                {});
  PackedLayout layout(td);
  ASSERT_EQ(layout.groups().size(), 4u);  // float, long small; float, double large
  EXPECT_FALSE(layout.groups()[0].large);
  EXPECT_FALSE(layout.groups()[1].large);
  EXPECT_TRUE(layout.groups()[2].large);
  EXPECT_EQ(layout.groups()[2].dtype, at::kFloat);
  EXPECT_EQ(layout.inline_nbytes(), 2 * kAlign);  // b (12 bytes) and d (40), each aligned
  EXPECT_EQ(layout.groups()[2].offset, layout.inline_nbytes());
  EXPECT_EQ(layout.nbytes(), layout.inline_nbytes() + 4 * kAloneMinBytes);
  // Leaves a, e (float), then c (double), in data order; every non-empty leaf for kPerLeaf.
  std::vector<NestedKey> alone;
  for (size_t i : layout.OwnMessages(false)) alone.push_back(layout.leaves()[i].key);
  EXPECT_EQ(alone, (std::vector<NestedKey>{"a", "e", "c"}));
  EXPECT_EQ(layout.OwnMessages(true).size(), 5u);
  EXPECT_EQ(layout.leaves()[4].offset, layout.inline_nbytes() + kAloneMinBytes);  // e after a
  at::Tensor whole = layout.Pack();
  at::Tensor inline_only = layout.Pack(kAlign, /*inline_only=*/true);
  EXPECT_EQ(inline_only.numel(), kAlign + layout.inline_nbytes());
  for (const auto& leaf : layout.leaves()) {  // padding aside, the same bytes
    if (leaf.offset >= layout.inline_nbytes()) continue;
    const auto n = static_cast<int64_t>(leaf.tensor.nbytes());
    EXPECT_TRUE(at::equal(inline_only.narrow(0, kAlign + leaf.offset, n),
                          whole.narrow(0, leaf.offset, n)))
        << leaf.key;
  }
  TensorDict one = td.clone().zero_(), two = td.clone().zero_();
  PackedLayout(one).Unpack(whole, one);
  at::Tensor large = whole.narrow(0, layout.inline_nbytes(), layout.nbytes() - layout.inline_nbytes())
                         .clone();
  PackedLayout(two).Unpack(inline_only.narrow(0, kAlign, layout.inline_nbytes()), large, two);
  for (const auto& k : td.keys(td::test::kLeaves)) {
    EXPECT_TRUE(at::equal(one.get(k), td.get(k))) << k;
    EXPECT_TRUE(at::equal(two.get(k), td.get(k))) << k;
  }
}

TEST(PackingTest, SignatureAndMismatch) {
  TensorDict a({{"x", at::zeros({2, 3})}, {"y", at::zeros({2})}}, {2});
  TensorDict b({{"x", at::zeros({2, 4})}, {"y", at::zeros({2})}}, {2});
  TensorDict c({{"x", at::zeros({2, 3})}}, {2});
  PackedLayout la(a), lb(b), lc(c);
  EXPECT_NE(la.fingerprint(), lb.fingerprint());
  EXPECT_EQ(la.fingerprint(), PackedLayout(a.clone()).fingerprint());
  EXPECT_EQ(DescribeMismatch(la.signature(), "A", lb.signature(), "B"),
            "key 'x': shape [2,3] (A) vs [2,4] (B)");
  EXPECT_EQ(DescribeMismatch(la.signature(), "A", lc.signature(), "C"),
            "key 'y' is present on the A side but not on the C side");
}

TEST(PackingTest, StructureJsonRoundTrip) {
  TensorDict td = td::test::SampleTensorDict();
  TensorDict empty = EmptyFromJson(StructureToJson(td));
  EXPECT_EQ(PackedLayout(empty).signature(), PackedLayout(td).signature());
  EXPECT_EQ(empty.get_non_tensor("s"), "a string!");
  EXPECT_EQ(empty.get_tensordict("n").batch_size(), td.get_tensordict("n").batch_size());
  TD_EXPECT_THROW_MSG(EmptyFromJson(nlohmann::json::object()), ValueError, {"malformed"});
}

// The three non-tensor kinds travel in the structure message with their class ("cls"); a
// NonTensorStack that does not fit its level is refused by set() on receipt, naming the key.
TEST(PackingTest, NonTensorKindsTravelInTheStructure) {
  TensorDict td({{"x", at::zeros({3})}}, {3});
  td.set("task", NonTensorData::stack({"walk", "run", "jump"}));
  td.set("robot", NonTensorData::meta("franka"));
  td.set("note", "plain");
  nlohmann::json j = StructureToJson(td);
  const TensorDict empty = EmptyFromJson(j);
  for (const char* k : {"task", "robot", "note"}) {
    EXPECT_EQ(empty.get_value(k).non_tensor_data(), td.get_value(k).non_tensor_data()) << k;
  }
  for (auto& e : j["entries"]) {
    if (e["key"] == "task") e["value"] = {"a", "b"};
  }
  TD_EXPECT_THROW_MSG(EmptyFromJson(j), BatchSizeError, {"NonTensorStack 'task'", "[3]"});
}

// A class the wire does not carry is refused by name, not read as plain NonTensorData.
TEST(PackingTest, UnknownNonTensorClassIsRefused) {
  TensorDict td({{"x", at::zeros({3})}}, {3});
  td.set("robot", NonTensorData::meta("franka"));
  nlohmann::json j = StructureToJson(td);
  for (auto& e : j["entries"]) {
    if (e["key"] == "robot") e["cls"] = "Pickled";
  }
  TD_EXPECT_THROW_MSG(EmptyFromJson(j), ValueError,
                      {"key 'robot'", "non-tensor class \"Pickled\" is unknown"});
}

}  // namespace
}  // namespace internal
}  // namespace distributed
}  // namespace td
