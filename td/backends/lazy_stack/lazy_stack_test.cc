// The lazy_stack backend's own behaviour (the common behaviour is in tests/conformance): no
// copies, write-through, ragged keys and their alternatives, differing key sets, append/insert/
// extend, nested stacks, printing, locks.
#include "td/backends/lazy_stack/lazy_stack.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/testing.h"

namespace td {
namespace {

std::vector<TensorDict> Members(int n) {
  std::vector<TensorDict> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(TensorDict({{"a", at::full({3, 2}, static_cast<double>(i))},
                              {"n", {{"x", at::full({3}, 10.0 * i)}}}},
                             {3}));
  }
  return out;
}

TEST(LazyStackTest, StacksWithoutCopyingAndGetStacksOneKey) {
  std::vector<TensorDict> m = Members(4);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  EXPECT_EQ(s.backend(), "lazy_stack");
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(s.stack_dim(), 0);
  ASSERT_EQ(s.tensordicts().size(), 4u);
  EXPECT_TRUE(s.tensordicts()[2].is_same(m[2]));  // the handles, not copies
  at::Tensor a = s.get("a");
  EXPECT_EQ(a.sizes(), at::IntArrayRef({4, 3, 2}));
  EXPECT_TRUE(a.select(0, 3).equal(at::full({3, 2}, 3.0)));
  // The members change under the stack: the next get sees it.
  m[1].set_("a", at::full({3, 2}, -1.0));
  EXPECT_TRUE(s.get("a").select(0, 1).equal(at::full({3, 2}, -1.0)));
  LazyStackedTensorDict s1 = lazy_stack(m, 1);
  EXPECT_EQ(s1.batch_size(), at::IntArrayRef({3, 4}));
  EXPECT_TRUE(s1.get("a").select(1, 2).equal(m[2].get("a")));
  EXPECT_EQ(lazy_stack(m, -1).stack_dim(), 1);
}

TEST(LazyStackTest, GetOverMembersInAnyOrderAndOnOtherBackends) {
  std::vector<TensorDict> m = Members(3);
  // Keys in another order in one member, a member that is itself a lazy stack (its get()
  // computes a fresh tensor), and a key missing from one member.
  m[1] = TensorDict({{"n", {{"x", at::full({3}, 10.0)}}}, {"a", at::full({3, 2}, 1.0)}}, {3});
  m.push_back(lazy_stack({TensorDict({{"a", at::full({2}, 7.0)}, {"n", {{"x", at::zeros({})}}}},
                                     {}),
                          TensorDict({{"a", at::full({2}, 8.0)}, {"n", {{"x", at::zeros({})}}}},
                                     {}),
                          TensorDict({{"a", at::full({2}, 9.0)}, {"n", {{"x", at::zeros({})}}}},
                                     {})},
                         0));
  LazyStackedTensorDict s = lazy_stack(m, 0);
  std::vector<at::Tensor> by_hand;
  for (const TensorDict& t : m) by_hand.push_back(t.get("a"));
  at::Tensor a = s.get("a");
  EXPECT_TRUE(a.equal(at::stack(by_hand, 0)));
  EXPECT_TRUE(a.select(0, 3).equal(at::tensor({7.0, 7.0, 8.0, 8.0, 9.0, 9.0}).view({3, 2})));
  EXPECT_TRUE(s.get({"n", "x"}).select(0, 1).equal(at::full({3}, 10.0)));
  // Reading neither keeps nor drops references to the members' tensors.
  const auto before = m[0].get("a").use_count();
  for (int i = 0; i < 3; ++i) s.get("a");
  EXPECT_EQ(m[0].get("a").use_count(), before);
  m[2].del_("a");
  EXPECT_FALSE(s.contains("a"));
  TD_EXPECT_THROW_MSG(s.get("a"), KeyError, {"'a'"});
}

TEST(LazyStackTest, ConstructionErrors) {
  TD_EXPECT_THROW_MSG(lazy_stack({}, 0), c10::ValueError, {"at least one"});
  std::vector<TensorDict> m = Members(2);
  m.push_back(TensorDict({}, {5}));
  TD_EXPECT_THROW_MSG(lazy_stack(m, 0), BatchSizeError,
                      {"TensorDict 2", "torch.Size([5])", "torch.Size([3])"});
  TD_EXPECT_THROW_MSG(lazy_stack(Members(2), 2), c10::IndexError, {"dim 2", "[-2, 1]"});
  TD_EXPECT_THROW_MSG(LazyStackedTensorDict(TensorDict()), c10::TypeError, {"'dense'"});
  EXPECT_FALSE(LazyStackedTensorDict::from(TensorDict()).has_value());
}

TEST(LazyStackTest, FromGivesTheHandleOfALazyStackOnly) {
  const TensorDict plain = lazy_stack(Members(2), 0);  // the stack seen as a plain TensorDict
  const std::optional<LazyStackedTensorDict> s = LazyStackedTensorDict::from(plain);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->is_same(plain));
  EXPECT_EQ(s->tensordicts().size(), 2u);
  EXPECT_FALSE(LazyStackedTensorDict::from(plain.to_dense()).has_value());
  EXPECT_FALSE(LazyStackedTensorDict::from(s->tensordicts()[0]).has_value());
}

TEST(LazyStackTest, WritesGoToTheMembers) {
  std::vector<TensorDict> m = Members(3);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  s.set_("a", at::arange(18.0).view({3, 3, 2}));
  EXPECT_TRUE(m[2].get("a").equal(at::arange(12.0, 18.0).view({3, 2})));
  s.set("new", at::ones({3, 3, 5}));
  EXPECT_TRUE(m[0].get("new").equal(at::ones({3, 5})));
  s.set({"n", "y"}, at::zeros({3, 3}));
  EXPECT_TRUE(m[1].contains({"n", "y"}));
  s.set("text", "hello");
  EXPECT_EQ(m[2].get_non_tensor("text"), "hello");
  EXPECT_EQ(s.get_non_tensor("text"), "hello");
  m[1].set("text", "other");
  // Members' different values read as a NonTensorStack over the stack's batch size [3, 3]
  // (NOTE [ Non-tensor stacks ]): each member's value on each of its elements.
  EXPECT_EQ(s.get_value("text").kind(), "NonTensorStack");
  EXPECT_EQ(s.get_non_tensor("text"),
            nlohmann::json::parse(R"([["hello", "hello", "hello"], ["other", "other", "other"],
                                       ["hello", "hello", "hello"]])"));
  EXPECT_EQ(s.index({1, 2}).get_non_tensor("text"), "other");
  // Setting a NonTensorStack gives each member its values.
  s.set("task", NonTensorData::stack(nlohmann::json::parse(
                    R"([["a", "b", "c"], ["d", "e", "f"], ["g", "h", "i"]])")));
  EXPECT_EQ(m[1].get_value("task").non_tensor_data(),
            NonTensorData::stack(nlohmann::json::parse(R"(["d", "e", "f"])")));
  EXPECT_EQ(s.get_value("task").non_tensor_data().data[2][0], "g");
  s.del_("new");
  EXPECT_FALSE(m[0].contains("new"));
  // A sub-TensorDict read through the stack is a lazy stack of the members' ones.
  TensorDict sub = s.get_tensordict("n");
  EXPECT_EQ(sub.backend(), "lazy_stack");
  sub.set_("x", at::full({3, 3}, 5.0));
  EXPECT_TRUE(m[0].get({"n", "x"}).equal(at::full({3}, 5.0)));
  // apply_ writes back through the members.
  s.apply_([](const at::Tensor& t) { return t.add_(1); });
  EXPECT_TRUE(m[0].get({"n", "x"}).equal(at::full({3}, 6.0)));
  // Setting a TensorDict splits it between the members.
  TensorDict value({{"z", at::arange(9.0).view({3, 3})}}, {3, 3});
  s.set("sub", value);
  EXPECT_TRUE(m[1].get({"sub", "z"}).equal(at::arange(3.0, 6.0)));
}

TEST(LazyStackTest, IndexAlongTheStackDim) {
  std::vector<TensorDict> m = Members(4);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  using at::indexing::Ellipsis;
  using at::indexing::None;
  using at::indexing::Slice;
  EXPECT_TRUE(s.index({2}).is_same(m[2]));  // the member itself
  EXPECT_TRUE(s.index({-1, Slice()}).is_same(m[3]));
  LazyStackedTensorDict picked(s.index({Slice(1, 3)}));
  ASSERT_EQ(picked.tensordicts().size(), 2u);
  EXPECT_TRUE(picked.tensordicts()[0].is_same(m[1]));
  LazyStackedTensorDict by_tensor(s.index({at::tensor({3, 0}, at::kLong)}));
  EXPECT_TRUE(by_tensor.tensordicts()[0].is_same(m[3]));
  TensorDict by_mask = s.index({at::tensor({1, 0, 0, 1}, at::kLong).to(at::kBool)});
  EXPECT_EQ(by_mask.backend(), "lazy_stack");
  EXPECT_EQ(by_mask.batch_size(), at::IntArrayRef({2, 3}));
  LazyStackedTensorDict s1 = lazy_stack(m, 1);
  EXPECT_TRUE(s1.index({Ellipsis, 1}).is_same(m[1]));
  // Other dims indexed too: the members are indexed, the result stays lazy.
  TensorDict cell = s.index({1, 2});
  EXPECT_EQ(cell.batch_size(), at::IntArrayRef({}));
  EXPECT_TRUE(cell.get("a").equal(at::full({2}, 1.0)));
  LazyStackedTensorDict part(s.index({Slice(0, 2), Slice(1, None)}));
  EXPECT_EQ(part.batch_size(), at::IntArrayRef({2, 2}));
  EXPECT_TRUE(part.get("a").equal(s.get("a").index({Slice(0, 2), Slice(1, None)})));
  LazyStackedTensorDict with_none(s.index({None, Slice(1, 3), 0}));
  EXPECT_EQ(with_none.batch_size(), at::IntArrayRef({1, 2}));
  EXPECT_EQ(with_none.stack_dim(), 1);
  // Index tensors elsewhere than the stack dim: computed densely by the core.
  TensorDict dense = s.index({Slice(), at::tensor({0, 2}, at::kLong)});
  EXPECT_EQ(dense.backend(), "dense");
  EXPECT_TRUE(dense.get("a").equal(s.get("a").index({Slice(), at::tensor({0, 2}, at::kLong)})));
  TD_EXPECT_THROW_MSG(s.index({7}), c10::IndexError, {"7"});
}

TEST(LazyStackTest, IndexPutWritesThrough) {
  std::vector<TensorDict> m = Members(3);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  using at::indexing::Slice;
  TensorDict row({{"a", at::full({3, 2}, 9.0)}, {"fresh", at::ones({3})}}, {3});
  s.index_put_({1}, row);
  EXPECT_TRUE(m[1].get("a").equal(at::full({3, 2}, 9.0)));
  EXPECT_TRUE(m[1].contains("fresh"));  // preallocated in the member
  EXPECT_FALSE(m[0].contains("fresh"));
  TensorDict two({{"a", at::zeros({2, 3, 2})}}, {2, 3});
  s.index_put_({Slice(0, 2)}, two);
  EXPECT_TRUE(m[0].get("a").equal(at::zeros({3, 2})));
  EXPECT_TRUE(m[2].get("a").equal(at::full({3, 2}, 2.0)));
  TensorDict bad({{"a", at::zeros({2, 3, 7})}}, {2, 3});
  TD_EXPECT_THROW_MSG(s.index_put_({Slice(1, 3)}, bad), c10::ValueError,
                      {"'a'", "torch.Size([2, 3, 7])"});
  EXPECT_TRUE(m[1].get("a").equal(at::zeros({3, 2})));  // nothing written
  // Inside a member, and broadcast values: written through a dense copy of the touched keys.
  s.index_put_({0, 1}, TensorDict({{"a", at::full({2}, 4.0)}}, {}));
  EXPECT_TRUE(m[0].get("a")[1].equal(at::full({2}, 4.0)));
  s.index_put_({Slice(), 2}, TensorDict({{"a", at::full({2}, 5.0)}}, {}));
  EXPECT_TRUE(m[2].get("a")[2].equal(at::full({2}, 5.0)));
  // A write to every key needs every member to hold the same keys.
  TD_EXPECT_THROW_MSG(s.index_put_({Slice(0, 2)}, at::zeros({})), KeyError, {"['fresh']"});
  m[1].del_("fresh");
  s.index_put_({Slice(0, 2)}, at::zeros({}));
  EXPECT_TRUE(m[1].get({"n", "x"}).equal(at::zeros({3})));
  EXPECT_TRUE(m[2].get({"n", "x"}).equal(at::full({3}, 20.0)));
  s.index_put_({2}, -1.0);
  EXPECT_TRUE(m[2].get("a").equal(at::full({3, 2}, -1.0)));
  s.masked_fill_(at::tensor({1, 0, 0}, at::kLong).to(at::kBool), 8.0);
  EXPECT_TRUE(m[0].get("a").equal(at::full({3, 2}, 8.0)));
  EXPECT_TRUE(m[1].get("a").equal(at::zeros({3, 2})));
  // Lazy preallocation through the stack.
  LazyStackedTensorDict empty = lazy_stack({TensorDict({}, {2}), TensorDict({}, {2})}, 0);
  empty.index_put_({Slice(), 0}, TensorDict({{"v", at::ones({2, 3})}}, {2}));
  EXPECT_TRUE(empty.tensordicts()[1].get("v").equal(
      at::cat({at::ones({1, 3}), at::zeros({1, 3})})));
}

TensorDict Ragged(int64_t size, double v) {
  return TensorDict({{"r", at::full({2, size}, v)}, {"a", at::full({2}, v)}}, {2});
}

TEST(LazyStackTest, RaggedKeys) {
  LazyStackedTensorDict s = lazy_stack({Ragged(3, 1), Ragged(5, 2), Ragged(3, 3)}, 0);
  EXPECT_TRUE(s.get("a").equal(at::tensor({1.0, 1.0, 2.0, 2.0, 3.0, 3.0}).view({3, 2})));
  TD_EXPECT_THROW_MSG(s.get("r"), c10::ValueError,
                      {"'r'", "torch.Size([2, 3]) (members 0, 2)", "torch.Size([2, 5]) (member 1)",
                       "get_list", "get_padded", "padding_value", "padding_side", "get_nestedtensor"});
  std::vector<at::Tensor> list = s.get_list("r");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].sizes(), at::IntArrayRef({2, 5}));
  at::Tensor right = s.get_padded("r", PadOptions().padding_value(-1));
  EXPECT_EQ(right.sizes(), at::IntArrayRef({3, 2, 5}));
  EXPECT_TRUE(right[0][0].equal(at::tensor({1.0, 1.0, 1.0, -1.0, -1.0})));
  at::Tensor left = s.get_padded("r", PadOptions().padding_side("left"));
  EXPECT_TRUE(left[2][1].equal(at::tensor({0.0, 0.0, 3.0, 3.0, 3.0})));
  TD_EXPECT_THROW_MSG(s.get_padded("r", PadOptions().padding_side("up")), c10::ValueError,
                      {"\"up\""});
  at::Tensor nested = s.get_nestedtensor("r");
  EXPECT_TRUE(nested.is_nested());
  EXPECT_EQ(nested.unbind(0)[1].sizes(), at::IntArrayRef({2, 5}));
  // Printing and metadata show the ragged dim as -1, without stacking.
  EXPECT_NE(s.repr().find("r: Tensor(shape=torch.Size([3, 2, -1])"), std::string::npos)
      << s.repr();
  TD_EXPECT_THROW_MSG(s.set_("r", at::zeros({3, 2, 5})), c10::ValueError,
                      {"'r'", "torch.Size([3, 2, -1])"});
  TD_EXPECT_THROW_MSG(s.to_dense(), c10::ValueError, {"'r'", "get_list"});
  // Ragged keys can still be replaced as a whole.
  s.set("r", at::zeros({3, 2, 4}));
  EXPECT_EQ(s.get("r").sizes(), at::IntArrayRef({3, 2, 4}));
  TD_EXPECT_THROW_MSG(lazy_stack({Ragged(3, 1)}, 1).get_nestedtensor("r"), c10::ValueError,
                      {"dim 1", "get_padded"});
}

// Python's get_nestedtensor: a LibTorch nested tensor of the members' tensors (a default tensor
// stands in for members lacking the key); a TensorDict holding it pads it with
// to_padded_tensor() as get_padded() does.
TEST(LazyStackTest, GetNestedTensorAndToPaddedTensor) {
  std::vector<TensorDict> members = {Ragged(3, 1), Ragged(5, 2)};
  members[1].set({"sub", "y"}, at::ones({2, 4}));
  LazyStackedTensorDict s = lazy_stack(members, 0);
  const at::Tensor nested = s.get_nestedtensor("r");
  ASSERT_TRUE(nested.is_nested());
  EXPECT_TRUE(nested.unbind(0)[0].equal(members[0].get("r")));
  EXPECT_TRUE(nested.unbind(0)[1].equal(members[1].get("r")));
  const TensorDict holder({{"r", nested}}, {2});
  EXPECT_EQ(holder.get_item_shape("r"), (std::vector<int64_t>{2, 2, -1}));
  const PadOptions pad = PadOptions().padding_value(-1);
  EXPECT_TRUE(holder.to_padded_tensor(-1).get("r").equal(s.get_padded("r", pad)));
  // A missing key: KeyError naming the members without it; with a default, the default.
  TD_EXPECT_THROW_MSG(s.get_nestedtensor({"sub", "y"}), KeyError, {"('sub', 'y')", "member 0"});
  const at::Tensor filled = s.get_nestedtensor({"sub", "y"}, at::zeros({2, 1}));
  EXPECT_TRUE(filled.unbind(0)[0].equal(at::zeros({2, 1})));
  EXPECT_TRUE(filled.unbind(0)[1].equal(at::ones({2, 4})));
  TD_EXPECT_THROW_MSG(s.get_nestedtensor("r", at::Tensor()), c10::ValueError,
                      {"'r'", "undefined"});
  TD_EXPECT_THROW_MSG(lazy_stack({Ragged(3, 1)}, 1).get_nestedtensor("r", at::zeros({2})),
                      c10::ValueError, {"dim 1", "get_padded"});
}

// Python's valid_keys is keys(): the keys every member holds.
TEST(LazyStackTest, ValidKeys) {
  std::vector<TensorDict> members = {Ragged(3, 1), Ragged(3, 2)};
  members[0].set("only0", at::zeros({2}));
  LazyStackedTensorDict s = lazy_stack(members, 0);
  EXPECT_EQ(s.valid_keys(), s.keys());
  EXPECT_EQ(s.valid_keys(), (std::vector<NestedKey>{"r", "a"}));
  EXPECT_EQ(s.valid_keys(KeysOptions().sort(true)), (std::vector<NestedKey>{"a", "r"}));
  EXPECT_EQ(s.storage().lazy()->exclusive_keys(), std::vector<std::string>{"only0"});
}

// pin_memory_ and record_stream act on stored tensors: a lazy level is refused before anything
// is done, naming it and its backend.
TEST(LazyStackTest, PinMemoryInPlaceAndRecordStreamRefuseLazyLevels) {
  TensorDict parent({{"s", lazy_stack({Ragged(3, 1), Ragged(3, 2)}, 0)}, {"x", at::zeros({2})}},
                    {2});
  const at::Tensor x = parent.get("x");
  TD_EXPECT_THROW_MSG(parent.pin_memory_(), c10::ValueError,
                      {"pin_memory_()", "the level 's'", "'lazy_stack' backend", "pin_memory()"});
  EXPECT_TRUE(parent.get("x").is_same(x));
  TD_EXPECT_THROW_MSG(
      parent.record_stream(c10::Stream(c10::Stream::DEFAULT, at::Device(at::kCPU))),
      c10::TypeError, {"record_stream", "the level 's'", "'lazy_stack' backend"});
}

// lock_() finds sub-TensorDicts through metadata: a ragged leaf is never stacked for it.
TEST(LazyStackTest, LockingARaggedStackAndItsParent) {
  TensorDict parent({{"s", lazy_stack({Ragged(3, 1), Ragged(5, 2)}, 0)}}, {2});
  parent.lock_();
  EXPECT_TRUE(parent.is_locked());
  EXPECT_TRUE(parent.get_tensordict("s").is_locked());
  parent.unlock_();
  EXPECT_FALSE(parent.get_tensordict("s").is_locked());
}

TEST(LazyStackTest, DifferentKeySets) {
  TensorDict x({{"a", at::zeros({2})}, {"only_x", at::zeros({2})}}, {2});
  TensorDict y({{"a", at::ones({2})}, {"only_y", at::ones({2, 3})}}, {2});
  LazyStackedTensorDict s = lazy_stack({x, y}, 0);
  EXPECT_EQ(s.keys(), std::vector<NestedKey>{"a"});
  EXPECT_FALSE(s.contains("only_x"));
  ASSERT_NE(s.storage().lazy(), nullptr);
  EXPECT_EQ(s.storage().lazy()->exclusive_keys(), (std::vector<std::string>{"only_x", "only_y"}));
  TD_EXPECT_THROW_MSG(s.get("only_x"), KeyError, {"'only_x'", "['a']"});
  TD_EXPECT_THROW_MSG(s.to_dense(), KeyError, {"['only_x', 'only_y']", "select"});
  TD_EXPECT_THROW_MSG(s.contiguous(), KeyError, {"'only_x'"});
  TD_EXPECT_THROW_MSG(s.get_list("only_y"), KeyError, {"'only_y'", "member 0"});
  EXPECT_EQ(s.select(s.keys()).to_dense().keys(), std::vector<NestedKey>{"a"});
  // Exclusive keys are reached through the members.
  TD_EXPECT_THROW_MSG(s.del_("only_x"), KeyError, {"'only_x'"});
  EXPECT_TRUE(x.contains("only_x"));
}

TEST(LazyStackTest, AppendInsertExtend) {
  std::vector<TensorDict> m = Members(2);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  TensorDict alias = s;  // another handle sees the growth
  s.append(Members(3)[2]);
  EXPECT_EQ(alias.batch_size(), at::IntArrayRef({3, 3}));
  EXPECT_TRUE(s.get("a").select(0, 2).equal(at::full({3, 2}, 2.0)));
  s.insert(0, Members(4)[3]);
  EXPECT_TRUE(s.get("a").select(0, 0).equal(at::full({3, 2}, 3.0)));
  s.insert(-1, Members(2)[0]);  // before the last
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({5, 3}));
  EXPECT_TRUE(s.get("a").select(0, 3).equal(at::zeros({3, 2})));
  TD_EXPECT_THROW_MSG(s.insert(9, m[0]), c10::IndexError, {"9", "5"});
  TD_EXPECT_THROW_MSG(s.append(TensorDict({}, {4})), BatchSizeError,
                      {"torch.Size([4])", "torch.Size([3])"});
  std::vector<TensorDict> more = Members(2);
  more.push_back(TensorDict({}, {1}));
  TD_EXPECT_THROW_MSG(s.extend(more), BatchSizeError, {"torch.Size([1])"});
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({5, 3}));  // all checked first
  s.extend(Members(2));
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({7, 3}));
  s.lock_();
  TD_EXPECT_THROW_MSG(s.append(m[0]), LockedError, {"locked"});
}

TEST(LazyStackTest, LockForwardsToMembers) {
  std::vector<TensorDict> m = Members(2);
  LazyStackedTensorDict s = lazy_stack(m, 0);
  s.lock_();
  EXPECT_TRUE(m[0].is_locked());
  EXPECT_TRUE(m[1].get_tensordict("n").is_locked());
  EXPECT_TRUE(s.get_tensordict("n").is_locked());
  TD_EXPECT_THROW_MSG(s.set("z", at::zeros({2, 3})), LockedError, {"'z'"});
  s.unlock_();
  EXPECT_FALSE(m[1].is_locked());
  // A member locked on its own refuses structural writes before anything is written.
  m[1].lock_();
  TD_EXPECT_THROW_MSG(s.set("z", at::zeros({2, 3})), LockedError, {"member 1", "locked"});
  EXPECT_FALSE(m[0].contains("z"));
  TD_EXPECT_THROW_MSG(s.del_("a"), LockedError, {"member 1"});
  EXPECT_TRUE(m[0].contains("a"));
  s.set("a", at::zeros({2, 3, 2}));  // same shape: in place, allowed
  EXPECT_TRUE(m[1].get("a").equal(at::zeros({3, 2})));
}

TEST(LazyStackTest, BatchSizeOfMembers) {
  std::vector<TensorDict> m = {TensorDict({{"a", at::zeros({3, 4, 2})}}, {3}),
                               TensorDict({{"a", at::zeros({3, 4, 2})}}, {3})};
  LazyStackedTensorDict s = lazy_stack(m, 0);
  s.set_batch_size({2, 3, 4});
  EXPECT_EQ(m[0].batch_size(), at::IntArrayRef({3, 4}));
  s.set_batch_size({2, 3});
  EXPECT_EQ(m[1].batch_size(), at::IntArrayRef({3}));
  LazyStackedTensorDict s1 = lazy_stack(m, 1);  // [3, 2]
  s1.set_batch_size({3, 2, 4});
  EXPECT_EQ(m[0].batch_size(), at::IntArrayRef({3, 4}));
  TD_EXPECT_THROW_MSG(s1.set_batch_size({3}), BatchSizeError, {"stack dim 1", "to_dense"});
  EXPECT_EQ(s1.batch_size(), at::IntArrayRef({3, 2, 4}));
  EXPECT_EQ(m[0].batch_size(), at::IntArrayRef({3, 4}));  // untouched
}

// A lazy stack is made from its members by td::lazy_stack, never opened by id; it is a
// LazyStorage (the lazy hooks), as its kLazy capability says.
TEST(LazyStackTest, MadeFromMembersNotOpenedById) {
  TD_EXPECT_THROW_MSG(MakeTensorDict("lazy_stack", StorageSpec().batch_size({3, 2})), KeyError,
                      {"'lazy_stack'", "dense"});
  LazyStackedTensorDict s = lazy_stack({TensorDict({}, {2}), TensorDict({}, {2})}, 0);
  EXPECT_TRUE(s.storage().capabilities().has(Capability::kLazy));
  EXPECT_NE(s.storage().lazy(), nullptr);
}

TEST(LazyStackTest, ToLazystackUnbindsAndRestacks) {
  TensorDict td({{"a", at::arange(6, at::kFloat).view({2, 3})}, {"n", {{"x", at::zeros({2, 3, 4})}}}},
                {2, 3});
  LazyStackedTensorDict s = to_lazystack(td);
  EXPECT_EQ(s.stack_dim(), 0);
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({2, 3}));
  ASSERT_EQ(s.tensordicts().size(), 2u);
  EXPECT_TRUE(s.get("a").equal(td.get("a")));
  // The members are views of td's slices: in-place writes through the stack reach td.
  s.set_("a", at::full({2, 3}, 7.0));
  EXPECT_TRUE(td.get("a").equal(at::full({2, 3}, 7.0)));
  // Already stacked along the dim: the same stack; along another: restacked.
  EXPECT_TRUE(to_lazystack(s, -2).is_same(s));
  LazyStackedTensorDict s1 = to_lazystack(s, 1);
  EXPECT_EQ(s1.stack_dim(), 1);
  EXPECT_EQ(s1.tensordicts().size(), 3u);
  EXPECT_EQ(s1.batch_size(), at::IntArrayRef({2, 3}));
  EXPECT_TRUE(s1.get({"n", "x"}).equal(td.get({"n", "x"})));
  TD_EXPECT_THROW_MSG(to_lazystack(td, 2), c10::IndexError, {"dim 2", "[2, 3]"});
  TD_EXPECT_THROW_MSG(to_lazystack(TensorDict({}, {}), 0), c10::IndexError, {"dim 0"});
  TD_EXPECT_THROW_MSG(to_lazystack(TensorDict({}, {0, 2}), 0), c10::ValueError,
                      {"[0, 2]", "at least one member"});
}

// Dim names (NOTE [ Dim names ] in td/core/names.cc): the members' names with an unnamed stack
// dim; naming the stack names its members (the stack dim's name stays on the stack).
TEST(LazyStackTest, DimNames) {
  std::vector<TensorDict> m = Members(2);
  for (TensorDict& t : m) t.set_names({"time"});
  LazyStackedTensorDict s = lazy_stack(m, 0);
  EXPECT_EQ(s.names(), DimNames({std::nullopt, "time"}));
  EXPECT_EQ(s.get_tensordict("n").names(), DimNames({std::nullopt, "time"}));
  EXPECT_EQ(s.index({0}).names(), DimNames({"time"}));      // a member
  EXPECT_EQ(s.index({at::indexing::Slice(), 0}).names(), DimNames({std::nullopt}));
  EXPECT_EQ(s.to_dense().names(), DimNames({std::nullopt, "time"}));
  s.set_names({"env", "t"});
  EXPECT_EQ(s.names(), DimNames({"env", "t"}));
  EXPECT_EQ(m[1].names(), DimNames({"t"}));
  EXPECT_EQ(m[0].get_tensordict("n").names(), DimNames({"t"}));
  TD_EXPECT_THROW_MSG(s.set_names({"t", "t"}), ValueError, {"'t' repeats"});
  s.rename_({std::nullopt, std::nullopt});
  EXPECT_FALSE(s.has_names());
  EXPECT_FALSE(m[0].has_names());
  // Members named differently: the stack is unnamed (upstream's stack drops them too).
  std::vector<TensorDict> d = Members(2);
  d[0].set_names({"a"});
  EXPECT_FALSE(lazy_stack(d, 0).has_names());
}

}  // namespace
}  // namespace td
