#include "td/nn/sequence.h"

#include <gtest/gtest.h>
#include <torch/nn.h>

#include <sstream>

#include "td/core/testing.h"
#include "td/nn/functional.h"

namespace {

namespace tnn = torch::nn;
using td::nn::TensorDictModule;
using td::nn::TensorDictSequential;
using Keys = std::vector<td::NestedKey>;

TensorDictModule Idn(td::NestedKey in, td::NestedKey out) {
  return TensorDictModule([](at::Tensor x) { return x; }, {std::move(in)}, {std::move(out)});
}

TEST(TensorDictSequential, ReferenceExample) {
  at::manual_seed(0);
  tnn::Linear linear(3, 4);
  TensorDictSequential module(
      TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"x+1"}),
      TensorDictModule(linear, {"x+1"}, {"w*(x+1)+b"}));
  EXPECT_EQ(td::KeysRepr(module->in_keys()), "['x']");
  EXPECT_EQ(td::KeysRepr(module->out_keys()), "['x+1', 'w*(x+1)+b']");
  td::TensorDict out = module(td::TensorDict({{"x", at::zeros({3})}}, {}));
  // Fields print sorted by key (the seed lists 'x+1' before 'x', which no sort order gives
  // together with its other examples; the printed content is the same).
  EXPECT_EQ(out.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        w*(x+1)+b: Tensor(shape=torch.Size([4]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        x: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, "
            "is_shared=False),\n"
            "        x+1: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "    batch_size=torch.Size([]),\n"
            "    device=None,\n"
            "    is_shared=False)");
  // With tensor input: all the output keys in the order of the modules.
  std::vector<at::Tensor> outs = module->forward_tensors({at::zeros({3})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(at::equal(outs[0], at::ones({3})));
  EXPECT_TRUE(at::allclose(outs[1], linear->forward(at::ones({3}))));
  EXPECT_TRUE(outs[1].requires_grad());
}

TEST(TensorDictSequential, OverviewNetAndMasker) {
  tnn::Sequential net(tnn::Linear(100, 50), tnn::ReLU(), tnn::Linear(50, 10));
  TensorDictModule net_module(net, {{"input", "x"}}, {{"intermediate", "x"}});
  TensorDictModule masker(
      [](at::Tensor x, at::Tensor mask) { return at::softmax(x * mask, 1); },
      {{"intermediate", "x"}, {"input", "mask"}}, {{"output", "probabilities"}});
  TensorDictSequential module(net_module, masker);
  td::TensorDict tensordict(
      {{"input", td::TensorDict({{"x", at::rand({32, 100})},
                                 {"mask", at::randint(2, {32, 10})}},
                                {32})}},
      {32});
  tensordict = module(tensordict);
  EXPECT_EQ(tensordict.get({"intermediate", "x"}).sizes(), at::IntArrayRef({32, 10}));
  const at::Tensor probabilities = tensordict.get({"output", "probabilities"});
  EXPECT_TRUE(at::allclose(probabilities.sum(1), at::ones({32})));
  EXPECT_EQ(td::KeysRepr(module->in_keys()), "[('input', 'x'), ('input', 'mask')]");
  EXPECT_EQ(td::KeysRepr(module->out_keys()),
            "[('intermediate', 'x'), ('output', 'probabilities')]");
}

TEST(TensorDictSequential, SelectOutKeys) {
  TensorDictSequential seq(TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"y"}),
                           TensorDictModule([](at::Tensor x) { return x + 1; }, {"y"}, {"z"}));
  td::TensorDict data({{"x", at::zeros({})}}, {});
  EXPECT_EQ(td::KeysRepr(seq(data.copy()).keys()), "['x', 'y', 'z']");
  seq->select_out_keys({"z"});
  td::TensorDict out = seq(data.copy());
  EXPECT_EQ(td::KeysRepr(out.keys()), "['x', 'z']");
  EXPECT_EQ(out.get("z").item<float>(), 2.0f);
  seq->reset_out_keys();
  EXPECT_EQ(td::KeysRepr(seq(data.copy()).keys()), "['x', 'y', 'z']");
  TensorDictSequential selected(
      std::vector<std::shared_ptr<td::nn::TensorDictModuleBase>>{seq[0], seq[1]},
      td::nn::TensorDictSequentialOptions().selected_out_keys(Keys{"z"}));
  EXPECT_EQ(td::KeysRepr(selected(data.copy()).keys()), "['x', 'z']");
  TD_EXPECT_THROW_MSG(seq->select_out_keys({"q"}), td::KeyError, {"'q'", "['y', 'z']"});
}

TEST(TensorDictSequential, SelectSubsequence) {
  TensorDictModule ab = Idn("a", "b"), bc = Idn("b", "c"), cd = Idn("c", "d"), ae = Idn("a", "e");
  TensorDictSequential module(ab, bc, cd, ae);
  // All modules whose output depends on "a".
  TensorDictSequential s1 = module->select_subsequence(Keys{"a"});
  ASSERT_EQ(s1->size(), 4u);
  EXPECT_EQ(td::KeysRepr(s1->in_keys()), "['a']");
  EXPECT_EQ(td::KeysRepr(s1->out_keys()), "['b', 'c', 'd', 'e']");
  // ... on "c".
  TensorDictSequential s2 = module->select_subsequence(Keys{"c"});
  ASSERT_EQ(s2->size(), 1u);
  EXPECT_EQ((*s2)[0], cd.ptr());
  EXPECT_EQ(td::KeysRepr(s2->in_keys()), "['c']");
  EXPECT_EQ(td::KeysRepr(s2->out_keys()), "['d']");
  // All modules that affect "c".
  TensorDictSequential s3 = module->select_subsequence(std::nullopt, Keys{"c"});
  ASSERT_EQ(s3->size(), 2u);
  EXPECT_EQ((*s3)[0], ab.ptr());
  EXPECT_EQ((*s3)[1], bc.ptr());
  EXPECT_EQ(td::KeysRepr(s3->out_keys()), "['b', 'c']");
  // ... "e".
  TensorDictSequential s4 = module->select_subsequence(std::nullopt, Keys{"e"});
  ASSERT_EQ(s4->size(), 1u);
  EXPECT_EQ((*s4)[0], ae.ptr());
  EXPECT_EQ(td::KeysRepr(s4->in_keys()), "['a']");

  // Nested sequences.
  TensorDictSequential nested(TensorDictSequential(Idn("a", "b"), Idn("b", "c")),
                              TensorDictSequential(Idn("b", "d"), Idn("d", "e")));
  TensorDictSequential s5 = nested->select_subsequence(Keys{"b", "d"}, Keys{"e"});
  ASSERT_EQ(s5->size(), 1u);
  auto inner = std::dynamic_pointer_cast<td::nn::TensorDictSequentialImpl>((*s5)[0]);
  ASSERT_TRUE(inner);
  EXPECT_EQ(inner->size(), 2u);
  EXPECT_EQ(td::KeysRepr(inner->in_keys()), "['b']");
  EXPECT_EQ(td::KeysRepr(inner->out_keys()), "['d', 'e']");
  EXPECT_EQ(td::KeysRepr(s5->in_keys()), "['b']");
  EXPECT_EQ(td::KeysRepr(s5->out_keys()), "['d', 'e']");
  // The original is untouched.
  EXPECT_EQ(std::dynamic_pointer_cast<td::nn::TensorDictSequentialImpl>((*nested)[0])->size(), 2u);

  TD_EXPECT_THROW_MSG(module->select_subsequence(Keys{"zz"}), td::ValueError,
                      {"no modules left", "['zz']"});
}

TEST(TensorDictSequential, PartialTolerantIndexingAppend) {
  TensorDictSequential seq(td::nn::TensorDictSequentialOptions().partial_tolerant(true),
                           Idn("a", "b"), Idn("missing", "c"), Idn("b", "d"));
  td::TensorDict out = seq(td::TensorDict({{"a", at::ones({2})}}, {2}));
  EXPECT_EQ(td::KeysRepr(out.keys()), "['a', 'b', 'd']");
  EXPECT_EQ(seq->size(), 3u);
  TD_EXPECT_THROW_MSG(seq[7], td::IndexError, {"7", "3 module(s)"});
  seq->append(Idn("d", "e"));
  EXPECT_EQ(seq->size(), 4u);
  EXPECT_EQ(td::KeysRepr(seq->out_keys()), "['b', 'c', 'd', 'e']");
  EXPECT_EQ(td::KeysRepr(seq->in_keys()), "['a', 'missing']");

  TensorDictSequential strict(Idn("a", "b"), Idn("missing", "c"));
  TD_EXPECT_THROW_MSG(strict(td::TensorDict({{"a", at::ones({2})}}, {2})), td::KeyError,
                      {"'missing'", "module 1 of TensorDictSequential"});
}

TEST(TensorDictSequential, ParametersCloneAndPrint) {
  tnn::Linear l1(3, 4), l2(4, 2);
  TensorDictSequential seq(TensorDictModule(l1, {"x"}, {"h"}), TensorDictModule(l2, {"h"}, {"y"}));
  EXPECT_EQ(seq->parameters().size(), 4u);
  td::TensorDict params = td::nn::from_module(seq);
  EXPECT_TRUE(params.get({"module", "1", "module", "weight"}).is_same(l2->weight));
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictSequentialImpl>(seq->clone());
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->size(), 2u);
  td::TensorDict data({{"x", at::randn({5, 3})}}, {5});
  EXPECT_TRUE(at::allclose(copy->forward(data.copy()).get("y"), seq(data.copy()).get("y")));
  EXPECT_FALSE(copy->parameters()[0].is_same(l1->weight));
  std::ostringstream os;
  os << *seq;
  EXPECT_NE(os.str().find("td::nn::TensorDictSequential(in_keys=['x'], out_keys=['h', 'y'])"),
            std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("(1): td::nn::TensorDictModule(in_keys=['h'], out_keys=['y'])"),
            std::string::npos)
      << os.str();
}

}  // namespace

TEST(TensorDictSequential, InplaceOption) {
  auto make = [](td::nn::SequentialOutput where) {
    return TensorDictSequential(td::nn::TensorDictSequentialOptions().inplace(where),
                                TensorDictModule([](at::Tensor x) { return x + 1; }, {"x"}, {"y"}),
                                TensorDictModule([](at::Tensor y) { return y * 2; }, {"y"},
                                                 Keys{td::NestedKey{"n", "z"}}));
  };
  auto input = [] { return td::TensorDict({{"x", at::zeros({2, 3})}, {"other", at::ones({2})}}, {2}); };
  // inplace=True: the input, written.
  td::TensorDict in1 = input();
  td::TensorDict r1 = make(td::nn::SequentialOutput::kInput)(in1);
  EXPECT_TRUE(r1.is_same(in1));
  EXPECT_TRUE(in1.get({"n", "z"}).equal(at::full({2, 3}, 2.0)));
  // inplace=False: a new TensorDict of batch [] with the out keys only; the input untouched.
  td::TensorDict in2 = input();
  td::TensorDict r2 = make(td::nn::SequentialOutput::kNew)(in2);
  EXPECT_FALSE(r2.is_same(in2));
  EXPECT_EQ(r2.batch_size().size(), 0u);
  EXPECT_EQ(td::KeysRepr(r2.keys(td::KeysOptions().include_nested(true).leaves_only(true))),
            "['y', ('n', 'z')]");
  EXPECT_TRUE(r2.get("y").equal(at::ones({2, 3})));
  EXPECT_FALSE(in2.contains("y"));
  // inplace="empty": input.empty(), so the batch size is kept.
  td::TensorDict in3 = input();
  td::TensorDict r3 = make(td::nn::SequentialOutput::kEmpty)(in3);
  EXPECT_EQ(r3.batch_size(), at::IntArrayRef({2}));
  EXPECT_FALSE(r3.contains("x"));
  EXPECT_FALSE(r3.contains("other"));
  EXPECT_TRUE(r3.get({"n", "z"}).equal(at::full({2, 3}, 2.0)));
  EXPECT_FALSE(in3.contains("y"));
}
