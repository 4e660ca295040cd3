// NonTensorStack and MetaData entries (NOTE [ Non-tensor stacks ] in
// td/core/internal/non_tensor_stack.h): set-time checks, every batch op that moves elements
// against the same op on a tensor of element numbers, combining, and the refusals.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "td/core/core.h"
#include "td/core/testing.h"

namespace td {

// Readable failures.
void PrintTo(const NonTensorData& d, std::ostream* os) {
  static const char* kKinds[] = {"NonTensorData", "MetaData", "NonTensorStack"};
  *os << kKinds[static_cast<int>(d.kind)] << "(" << d.data.dump() << ")";
}

namespace {

using json = nlohmann::json;
json J(const char* text) { return json::parse(text); }

// The values "v<i>" nested as `shape`, i counting elements in row-major order.
json Numbered(at::IntArrayRef shape, int64_t* next, size_t d = 0) {
  if (d == shape.size()) return "v" + std::to_string((*next)++);
  json out = json::array();
  for (int64_t k = 0; k < shape[d]; ++k) out.push_back(Numbered(shape, next, d + 1));
  return out;
}
json Numbered(at::IntArrayRef shape) {
  int64_t next = 0;
  return Numbered(shape, &next);
}

// What a NonTensorStack of Numbered(shape) must hold after an op that gave `moved` when applied
// to at::arange(numel).view(shape): "v<moved[...]>" nested as moved's shape.
json Expected(const at::Tensor& moved) {
  if (moved.dim() == 0) return "v" + std::to_string(moved.item<int64_t>());
  json out = json::array();
  for (int64_t k = 0; k < moved.size(0); ++k) out.push_back(Expected(moved[k]));
  return out;
}

// A root of batch size `shape` with a leaf, a NonTensorStack "s", and a level "n" with one
// extra dim of 2 holding a stack "t" of its own, plus plain data "p" and MetaData "m".
TensorDict Make(at::IntArrayRef shape) {
  std::vector<int64_t> nb = shape.vec();
  nb.push_back(2);
  TensorDict n({{"x", at::zeros(nb)}}, nb);
  n.set("t", NonTensorData::stack(Numbered(nb)));
  TensorDict td({{"a", at::arange(c10::multiply_integers(shape)).view(shape)}, {"n", n}}, shape);
  td.set("s", NonTensorData::stack(Numbered(shape)));
  td.set("p", "plain");
  td.set("m", NonTensorData::meta(json{{"rate", 30}}));
  return td;
}

// Checks `r` (the op's result on Make(shape)) against the same op on numbered tensors: root
// leaf "a" numbers the root's elements, so the stack "s" must hold "v<a>" everywhere; "n/t"
// likewise against an arange over the nested level's batch.
// `root_moved` replaces "a" for ops that change values rather than move them.
void ExpectMoved(const TensorDict& r, const at::Tensor& nested_moved, const std::string& what,
                 const at::Tensor& root_moved = {}) {
  SCOPED_TRACE(what);
  const at::Tensor a = root_moved.defined() ? root_moved : r.get("a");
  const Value s = r.get_value("s");
  if (a.dim() == 0) {
    EXPECT_EQ(s.kind(), "NonTensorData");  // a single element: NonTensorStack[0] in Python
  } else {
    EXPECT_EQ(s.kind(), "NonTensorStack");
  }
  EXPECT_EQ(s.non_tensor(), Expected(a));
  EXPECT_EQ(r.get_value(NestedKey({"n", "t"})).non_tensor(), Expected(nested_moved));
  EXPECT_EQ(r.get_value("p").non_tensor_data(), NonTensorData("plain"));
  EXPECT_EQ(r.get_value("m").non_tensor_data(), NonTensorData::meta(json{{"rate", 30}}));
}

TEST(NonTensorStackTest, KindsAndEquality) {
  EXPECT_EQ(Value(NonTensorData::stack({1, 2})).kind(), "NonTensorStack");
  EXPECT_EQ(Value(NonTensorData::meta(1)).kind(), "MetaData");
  EXPECT_EQ(Value(NonTensorData(1)).kind(), "NonTensorData");
  EXPECT_FALSE(NonTensorData::stack({1, 2}) == NonTensorData(json{1, 2}));
  EXPECT_FALSE(NonTensorData::meta(1) == NonTensorData(1));
  EXPECT_TRUE(NonTensorData::stack({1, 2}) == NonTensorData::stack({1, 2}));
}

TEST(NonTensorStackTest, SetChecksTheValuesAgainstTheBatchSize) {
  TensorDict td({}, {3, 2});
  td.set("ok", NonTensorData::stack(Numbered({3, 2})));
  EXPECT_EQ(td.get_non_tensor("ok")[2][1], "v5");
  TD_EXPECT_THROW_MSG(td.set("short", NonTensorData::stack(Numbered({2, 2}))), BatchSizeError,
                      {"NonTensorStack 'short'", "lists of shape torch.Size([2, 2])", "torch.Size([3, 2])"});
  TD_EXPECT_THROW_MSG(td.set("ragged", NonTensorData::stack(J("[[1, 2], [3], [4, 5]]"))),
                      BatchSizeError, {"NonTensorStack 'ragged'", "torch.Size([3, 2])"});
  TD_EXPECT_THROW_MSG(td.set("scalar", NonTensorData::stack(7)), BatchSizeError,
                      {"NonTensorStack 'scalar'", "not a list (number)"});
  TensorDict scalar_batch({}, {});
  TD_EXPECT_THROW_MSG(scalar_batch.set("s", NonTensorData::stack({1})), BatchSizeError,
                      {"NonTensorStack 's'", "batch size torch.Size([])"});
  // A nested key checks against the level it lands in.
  TD_EXPECT_THROW_MSG(td.set(NestedKey({"sub", "s"}), NonTensorData::stack(Numbered({3}))),
                      BatchSizeError, {"('sub', 's')"});
  EXPECT_FALSE(td.contains("short"));
  EXPECT_FALSE(td.contains("ragged"));
}

TEST(NonTensorStackTest, EveryElementMovingOpMovesTheValues) {
  const std::vector<int64_t> shape = {4, 3};
  const TensorDict td = Make(shape);
  const at::Tensor nested = at::arange(24).view({4, 3, 2});
  ExpectMoved(td.index({1}), nested.index({1}), "index int");
  ExpectMoved(td.index({1, 2}), nested.index({1, 2}), "index two ints");
  using at::indexing::Slice;
  ExpectMoved(td.index({Slice(1, 4, 2)}), nested.index({Slice(1, 4, 2)}), "slice");
  const at::Tensor rows = at::tensor({3, 0, 0}, at::kLong);
  ExpectMoved(td.index({rows}), nested.index({rows}), "tensor index");
  const at::Tensor mask = at::tensor({1, 0, 1, 1}).to(at::kBool);
  ExpectMoved(td.index({mask}), nested.index({mask}), "bool mask");
  ExpectMoved(td.index({at::indexing::None}), nested.unsqueeze(0), "None");
  ExpectMoved(td.reshape({12}), nested.reshape({12, 2}), "reshape");
  ExpectMoved(td.view({2, 6}), nested.view({2, 6, 2}), "view");
  ExpectMoved(td.permute({1, 0}), nested.permute({1, 0, 2}), "permute");
  ExpectMoved(td.transpose(0, 1), nested.transpose(0, 1), "transpose");
  ExpectMoved(td.flatten(0, 1), nested.flatten(0, 1), "flatten");
  ExpectMoved(td.unsqueeze(1), nested.unsqueeze(1), "unsqueeze");
  ExpectMoved(td.flip({0}), nested.flip({0}), "flip");
  ExpectMoved(td.roll({1}, {1}), nested.roll({1}, {1}), "roll");
  ExpectMoved(td.narrow(1, 1, 2), nested.narrow(1, 1, 2), "narrow");
  ExpectMoved(td.repeat({2, 1}), nested.repeat({2, 1, 1}), "repeat");
  const at::Tensor g = at::tensor({2, 0, 1, 1}, at::kLong).view({4, 1}).expand({4, 3});
  ExpectMoved(td.gather(1, g), nested.gather(1, g.unsqueeze(-1).expand({4, 3, 2})), "gather");
  std::vector<TensorDict> parts = td.split(std::vector<int64_t>{1, 3}, 0);
  ExpectMoved(parts[1], nested.split_with_sizes({1, 3}, 0)[1], "split");
  std::vector<TensorDict> cols = td.unbind(1);
  ExpectMoved(cols[2], nested.unbind(1)[2], "unbind");
  const TensorDict squeezable = Make({4, 1});
  ExpectMoved(squeezable.squeeze(1), at::arange(8).view({4, 2}), "squeeze");
  const TensorDict expandable = Make({1, 3});
  ExpectMoved(expandable.expand({5, 3}), at::arange(6).view({1, 3, 2}).expand({5, 3, 2}),
              "expand");
  // Operations that keep the batch size and elements carry every non-tensor entry.
  ExpectMoved(td.clone(), nested, "clone");
  ExpectMoved(td.to(at::kDouble), nested, "to", td.get("a"));
  ExpectMoved(td.masked_fill(at::ones({4, 3}, at::kBool), 0), nested, "masked_fill", td.get("a"));
}

// Random shapes and random chains of element-moving ops (seeded): the stack stays in step with
// a tensor of element numbers put through the same chain.
TEST(NonTensorStackTest, GenerativeChainsAgreeWithATensorOfElementNumbers) {
  std::mt19937 rng(4646);
  for (int c = 0; c < 300; ++c) {
    SCOPED_TRACE("case " + std::to_string(c) + " of seed 4646");
    std::vector<int64_t> shape;
    const int dims = 1 + static_cast<int>(rng() % 3);
    for (int d = 0; d < dims; ++d) shape.push_back(static_cast<int64_t>(rng() % 4));
    TensorDict td({{"a", at::arange(c10::multiply_integers(shape)).view(shape)}}, shape);
    td.set("s", NonTensorData::stack(Numbered(shape)));
    for (int step = 0; step < 4 && td.batch_dims() > 0; ++step) {
      const int64_t bd = td.batch_dims();
      const int64_t d = static_cast<int64_t>(rng() % bd);
      switch (rng() % 6) {
        case 0:
          if (td.batch_size()[d] > 0) {
            td = td.index({at::indexing::Slice(), at::indexing::Ellipsis}).transpose(0, d);
          }
          break;
        case 1:
          td = td.flip({d});
          break;
        case 2:
          td = td.unsqueeze(d);
          break;
        case 3:
          if (td.batch_size()[0] > 0) {
            td = td.index({at::randint(td.batch_size()[0], {3}, at::kLong)});
          }
          break;
        case 4:
          td = td.reshape({-1});
          break;
        default:
          if (td.batch_size()[d] > 1) td = td.narrow(d, 1, td.batch_size()[d] - 1);
          break;
      }
      const at::Tensor a = td.get("a");
      if (a.dim() == 0) {
        EXPECT_EQ(td.get_value("s").non_tensor(), Expected(a));
        break;
      }
      ASSERT_EQ(td.get_value("s").non_tensor(), Expected(a)) << "after step " << step;
    }
  }
}

TEST(NonTensorStackTest, StackAndCatCombineAsUpstream) {
  TensorDict a({}, {2});
  TensorDict b({}, {2});
  a.set("same", "x");
  b.set("same", "x");
  a.set("diff", "x");
  b.set("diff", "y");
  a.set("meta", NonTensorData::meta(1));
  b.set("meta", NonTensorData::meta(1));
  a.set("mixed", NonTensorData::meta(1));
  b.set("mixed", NonTensorData(1));
  a.set("st", NonTensorData::stack({"a0", "a1"}));
  b.set("st", NonTensorData::stack({"b0", "b1"}));
  const TensorDict s = stack({a, b}, 0);
  EXPECT_EQ(s.get_value("same").non_tensor_data(), NonTensorData("x"));
  EXPECT_EQ(s.get_value("diff").non_tensor_data(),
            NonTensorData::stack(J(R"([["x", "x"], ["y", "y"]])")));
  EXPECT_EQ(s.get_value("meta").non_tensor_data(), NonTensorData::meta(1));
  EXPECT_EQ(s.get_value("mixed").non_tensor_data(), NonTensorData::stack(J("[[1, 1], [1, 1]]")));
  EXPECT_EQ(s.get_value("st").non_tensor_data(),
            NonTensorData::stack(J(R"([["a0", "a1"], ["b0", "b1"]])")));
  EXPECT_EQ(stack({a, b}, 1).get_value("st").non_tensor_data(),
            NonTensorData::stack(J(R"([["a0", "b0"], ["a1", "b1"]])")));
  const TensorDict c = cat({a, b}, 0);
  EXPECT_EQ(c.get_value("st").non_tensor_data(), NonTensorData::stack({"a0", "a1", "b0", "b1"}));
  EXPECT_EQ(c.get_value("diff").non_tensor_data(), NonTensorData::stack({"x", "x", "y", "y"}));
  EXPECT_EQ(c.get_value("same").non_tensor_data(), NonTensorData("x"));
  // Unbinding the stack gives the inputs back.
  EXPECT_EQ(s.unbind(0)[1].get_value("st").non_tensor_data(), NonTensorData::stack({"b0", "b1"}));
  EXPECT_EQ(s.unbind(0)[1].get_value("diff").non_tensor_data(), NonTensorData::stack({"y", "y"}));
  // A non-tensor entry facing a tensor is still a TypeError naming the key.
  TensorDict t({{"diff", at::zeros({2})}}, {2});
  t.set("same", "x");
  t.set("meta", NonTensorData::meta(1));
  t.set("mixed", NonTensorData(1));
  t.set("st", "z");
  TD_EXPECT_THROW_MSG(stack({a, t}, 0), TypeError, {"'diff'", "non-tensor data"});
}

TEST(NonTensorStackTest, OpsThatDoNotMoveElementsRefuseAStack) {
  const TensorDict td = Make({4, 3});
  // The nested level comes first in key order.
  TD_EXPECT_THROW_MSG(td.sum(std::vector<int64_t>{0}), ValueError,
                      {"NonTensorStack ('n', 't')", "torch.Size([4, 3, 2])", "torch.Size([3, 2])"});
  TD_EXPECT_THROW_MSG(td.pad({1, 1}), ValueError, {"NonTensorStack ('n', 't')", "torch.Size([6, 3, 2])"});
  TD_EXPECT_THROW_MSG(td.exclude({"n"}).pad({1, 1}), ValueError,
                      {"NonTensorStack 's'", "torch.Size([4, 3])", "torch.Size([6, 3])"});
  TensorDict copy = td.clone();
  TD_EXPECT_THROW_MSG(copy.set_batch_size({4}), BatchSizeError,
                      {"NonTensorStack 's'", "torch.Size([4, 3])"});
  EXPECT_EQ(copy.batch_size(), at::IntArrayRef({4, 3}));
  // Without stacks those ops carry non-tensor data, as before.
  TensorDict plain = td.exclude({"s", NestedKey({"n", "t"})});
  EXPECT_EQ(plain.sum(std::vector<int64_t>{0}).get_non_tensor("p"), "plain");
}

}  // namespace
}  // namespace td
