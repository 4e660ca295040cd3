// td::nn::AotiModule on the packages of testdata/export_policies.py (the genrule :exported), whose
// eager outputs for fixed inputs it saved in reference.pt.
#include "td/nn/aoti/aoti_module.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <sstream>

#include "td/core/testing.h"
#include "td/nn/distributions.h"
#include "td/nn/probabilistic.h"
#include "td/nn/sequence.h"
#include "td/nn/script_module.h"

namespace {

using td::nn::AotiModule;
using td::nn::AotiModuleOptions;

const std::string kDir = "td/nn/aoti/exported/";

struct Reference {
  torch::jit::script::Module holder = torch::jit::load(kDir + "reference.pt");
  at::Tensor get(const std::string& name) { return holder.attr(name).toTensor(); }
  // The inputs as the exported TensorDict module reads them.
  td::TensorDict inputs() {
    return td::TensorDict({{"obs", get("obs")}, {{"next", "hidden"}, get("next_hidden")}},
                          {get("obs").size(0)});
  }
};

std::vector<td::NestedKey> K(std::vector<td::NestedKey> keys) { return keys; }

TEST(AotiModule, KeysAndOutputsFromTheSignature) {
  Reference ref;
  AotiModule policy(kDir + "policy.pt2");
  EXPECT_TRUE(policy->has_signature());
  EXPECT_EQ(policy->device_type(), "cpu");
  EXPECT_EQ(policy->in_keys(), K({"obs", {"next", "hidden"}}));
  EXPECT_EQ(policy->out_keys(), K({"action"}));
  td::TensorDict data = ref.inputs();
  td::TensorDict out = policy(data);
  EXPECT_TRUE(out.is_same(data));
  EXPECT_TRUE(at::allclose(data.get("action"), ref.get("action"), 1e-5, 1e-6));
  // forward_tensors: the same, in in_keys order.
  std::vector<at::Tensor> t = policy->forward_tensors({ref.get("obs"), ref.get("next_hidden")});
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(at::allclose(t[0], ref.get("action"), 1e-5, 1e-6));
  // Another batch size (the batch dimension was exported dynamic).
  td::TensorDict big({{"obs", at::randn({64, 6})}, {{"next", "hidden"}, at::randn({64, 10})}},
                     {64});
  EXPECT_EQ(policy(big).get("action").sizes(), (std::vector<int64_t>{64, 3}));
  // Non-contiguous inputs are made contiguous first.
  at::Tensor obs_t = ref.get("obs").t().contiguous().t();
  ASSERT_FALSE(obs_t.is_contiguous());
  td::TensorDict strided({{"obs", obs_t}, {{"next", "hidden"}, ref.get("next_hidden")}}, {5});
  EXPECT_TRUE(at::allclose(policy(strided).get("action"), ref.get("action"), 1e-5, 1e-6));
  std::ostringstream os;
  os << *policy;
  EXPECT_NE(os.str().find("in_keys=['obs', ('next', 'hidden')]"), std::string::npos) << os.str();
}

TEST(AotiModule, GivenKeysAreMatchedByJoinedName) {
  Reference ref;
  // Given in another order: in_keys() follows the package's arguments.
  AotiModule policy(kDir + "policy.pt2", {{"next", "hidden"}, "obs"}, {"act"});
  EXPECT_EQ(policy->in_keys(), K({"obs", {"next", "hidden"}}));
  td::TensorDict data = ref.inputs();
  policy(data);
  EXPECT_TRUE(at::allclose(data.get("act"), ref.get("action"), 1e-5, 1e-6));
  // The flat key "next_hidden" joins to the same argument.
  AotiModule flat(kDir + "policy.pt2", {"obs", "next_hidden"}, {"action"});
  EXPECT_EQ(flat->in_keys(), K({"obs", "next_hidden"}));
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy.pt2", {"obs", "hidden"}, {"action"}),
                      c10::ValueError, {"'hidden'", "['obs', 'next_hidden']"});
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy.pt2", {"obs"}, {"action"}), c10::ValueError,
                      {"no in key fills argument 'next_hidden'"});
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy.pt2", {"obs", "next_hidden", {"next", "hidden"}},
                                 {"action"}),
                      c10::ValueError, {"already fills"});
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy.pt2", {}, {"a", "b"}), c10::ValueError,
                      {"returns 1 tensor(s) but out_keys lists 2"});
}

TEST(AotiModule, PackageWithoutSignature) {
  Reference ref;
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy_plain.pt2"), c10::ValueError,
                      {"no tensordict.signature metadata", "give out_keys"});
  AotiModule plain(kDir + "policy_plain.pt2", {}, {"action"});
  EXPECT_FALSE(plain->has_signature());
  EXPECT_EQ(plain->in_keys(), K({"obs", "next_hidden"}));  // "_" kept: it may be in a key
  AotiModule split(kDir + "policy_plain.pt2", {}, {"action"},
                   AotiModuleOptions().split_names(true));
  EXPECT_EQ(split->in_keys(), K({"obs", {"next", "hidden"}}));
  td::TensorDict data = ref.inputs();
  split(data);
  EXPECT_TRUE(at::allclose(data.get("action"), ref.get("action"), 1e-5, 1e-6));
  // Names and device are still checked.
  TD_EXPECT_THROW_MSG(plain(ref.inputs()), td::KeyError, {"'next_hidden'"});
}

TEST(AotiModule, InputsAreCheckedBeforeTheRun) {
  Reference ref;
  AotiModule policy(kDir + "policy.pt2");
  td::TensorDict data = ref.inputs();
  data.del_({"next", "hidden"});
  TD_EXPECT_THROW_MSG(policy(data), td::KeyError,
                      {"('next', 'hidden')", "argument 'next_hidden'", "missing"});
  EXPECT_FALSE(data.contains("action"));
  td::TensorDict wrong_dtype = ref.inputs();
  wrong_dtype.set("obs", ref.get("obs").to(at::kDouble));
  TD_EXPECT_THROW_MSG(policy(wrong_dtype), c10::TypeError,
                      {"'obs'", "expected dtype torch.float32", "found torch.float64"});
  td::TensorDict wrong_size = ref.inputs();
  wrong_size.set("obs", at::randn({5, 7}));
  TD_EXPECT_THROW_MSG(policy(wrong_size), c10::ValueError,
                      {"'obs'", "expected shape [*, 6]", "torch.Size([5, 7])"});
  td::TensorDict wrong_rank = ref.inputs();
  wrong_rank.set("obs", at::randn({5, 2, 6}));
  TD_EXPECT_THROW_MSG(policy(wrong_rank), c10::ValueError, {"'obs'", "2 dims"});
  EXPECT_FALSE(wrong_rank.contains("action"));
  TD_EXPECT_THROW_MSG(policy->forward_tensors({ref.get("obs")}), c10::ValueError,
                      {"got 1 input tensor(s) but the package takes 2"});
  TD_EXPECT_THROW_MSG(
      policy->forward_tensors({ref.get("obs"), ref.get("next_hidden"), ref.get("obs")}),
      c10::ValueError, {"got 3 input tensor(s)"});
}

TEST(AotiModule, NotAPackage) {
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "missing.pt2"), c10::ValueError,
                      {"cannot load the AOTInductor package", "missing.pt2"});
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "reference.pt"), c10::ValueError,
                      {"cannot load the AOTInductor package", "reference.pt"});
  TD_EXPECT_THROW_MSG(AotiModule(kDir + "policy.pt2", AotiModuleOptions().model_name("other")),
                      c10::ValueError, {"model 'other'"});
}

TEST(AotiModule, InSequentialAndProbabilisticChains) {
  Reference ref;
  AotiModule head(kDir + "two_outputs.pt2");
  EXPECT_EQ(head->out_keys(), K({"loc", "scale"}));
  td::nn::TensorDictSequential seq(
      head, td::nn::TensorDictModule([](at::Tensor loc, at::Tensor scale) { return loc * scale; },
                                     {"loc", "scale"}, {"y"}));
  td::TensorDict data = ref.inputs();
  seq(data);
  EXPECT_TRUE(at::allclose(data.get("loc"), ref.get("loc"), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(data.get("y"), ref.get("loc") * ref.get("scale"), 1e-5, 1e-6));
  // select_subsequence keeps the package module.
  td::nn::TensorDictSequential sub = seq->select_subsequence(std::nullopt, K({"scale"}));
  td::TensorDict only = td::TensorDict({{"obs", ref.get("obs")}}, {5});
  sub(only);
  EXPECT_TRUE(at::allclose(only.get("scale"), ref.get("scale"), 1e-5, 1e-6));
  EXPECT_FALSE(only.contains("y"));
  // forward_into a new TensorDict leaves the input alone.
  td::TensorDict in = ref.inputs();
  td::TensorDict out = seq->forward_into(in, in.empty());
  EXPECT_TRUE(out.contains("y"));
  EXPECT_FALSE(in.contains("loc"));
  // A probabilistic chain: the package gives loc and scale, a Normal draws the action.
  td::nn::ProbabilisticTensorDictSequential actor(
      AotiModule(kDir + "two_outputs.pt2"),
      td::nn::ProbabilisticTensorDictModule(
          {"loc", "scale"}, {"action"}, td::nn::Normal::factory(),
          td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true)));
  td::TensorDict rollout = ref.inputs();
  actor(rollout);  // the default interaction type takes the mean
  EXPECT_TRUE(at::allclose(rollout.get("action"), ref.get("loc"), 1e-5, 1e-6));
  EXPECT_EQ(rollout.get("action_log_prob").sizes(), (std::vector<int64_t>{5, 3}));
}

TEST(AotiModule, SelectOutKeysAndOutputModes) {
  Reference ref;
  AotiModule head(kDir + "two_outputs.pt2", {}, {},
                  AotiModuleOptions().output(td::nn::OutputMode::kEmpty));
  head->select_out_keys({"scale"});
  td::TensorDict data = ref.inputs();
  td::TensorDict out = head(data);
  EXPECT_FALSE(out.is_same(data));
  EXPECT_EQ(out.keys(), K({"scale"}));
  EXPECT_FALSE(data.contains("scale"));
  EXPECT_EQ(head->forward_tensors({ref.get("obs")}).size(), 1u);
}

// Where the loader gives no constants (LibTorch 2.6), constants() and load_constants() must
// refuse by name; the test then stops there.
bool ConstantsRefused(AotiModule& policy) {
  if (td::nn::AotiModuleImpl::constants_available()) return false;
  TD_EXPECT_THROW_MSG(policy->constants(), c10::ValueError, {"does not give the values", "net"});
  TD_EXPECT_THROW_MSG(policy->load_constants(td::TensorDict({}, {})), c10::ValueError,
                      {"does not give the values"});
  return true;
}

TEST(AotiModule, ConstantsAreTheModuleParameters) {
  Reference ref;
  AotiModule policy(kDir + "policy.pt2");
  if (ConstantsRefused(policy)) GTEST_SKIP() << "this LibTorch's loader gives no constants";
  torch::jit::script::Module eager = torch::jit::load(kDir + "policy_script.pt");
  td::TensorDict expected = td::nn::from_module(eager);
  td::TensorDict constants = policy->constants();
  EXPECT_EQ(constants.keys(td::KeysOptions().include_nested(true).leaves_only(true).sort(true)),
            expected.keys(td::KeysOptions().include_nested(true).leaves_only(true).sort(true)));
  EXPECT_TRUE(at::equal(constants.get({"net", "0", "weight"}),
                        expected.get({"net", "0", "weight"})));
}

TEST(AotiModule, LoadConstantsChangesTheOutputs) {
  Reference ref;
  AotiModule policy(kDir + "policy.pt2");
  if (ConstantsRefused(policy)) GTEST_SKIP() << "this LibTorch's loader gives no constants";
  td::TensorDict learner = td::nn::from_module(ref.holder.attr("policy_new").toModule());
  td::TensorDict data = ref.inputs();
  policy->load_constants(learner);
  policy(data);
  EXPECT_TRUE(at::allclose(data.get("action"), ref.get("action_new"), 1e-5, 1e-6));
  // A subset: only the last bias.
  AotiModule other(kDir + "policy.pt2");
  at::Tensor bias = other->constants().get({"net", "4", "bias"});
  td::TensorDict shift({{{"net", "4", "bias"}, bias + 1}}, {});
  other->load_constants(shift);
  td::TensorDict moved = other(ref.inputs());
  EXPECT_TRUE(at::allclose(moved.get("action"), ref.get("action") + 1, 1e-5, 1e-5));
  // The caller's tensor was copied: changing it later changes nothing.
  shift.get({"net", "4", "bias"}).add_(100);
  EXPECT_TRUE(at::allclose(other(ref.inputs()).get("action"), ref.get("action") + 1, 1e-5, 1e-5));
  // clone(): a package of its own with the same constants.
  auto copy = std::dynamic_pointer_cast<td::nn::AotiModuleImpl>(other->clone());
  ASSERT_TRUE(copy);
  copy->load_constants(td::nn::from_module(torch::jit::load(kDir + "policy_script.pt")));
  EXPECT_TRUE(at::allclose(copy->forward(ref.inputs()).get("action"), ref.get("action"), 1e-5,
                           1e-6));
  EXPECT_TRUE(at::allclose(other(ref.inputs()).get("action"), ref.get("action") + 1, 1e-5, 1e-5));
}

TEST(AotiModule, LoadConstantsRefusesWrongEntries) {
  Reference ref;
  AotiModule policy(kDir + "policy.pt2");
  if (ConstantsRefused(policy)) GTEST_SKIP() << "this LibTorch's loader gives no constants";
  auto unchanged = [&] {
    EXPECT_TRUE(at::allclose(policy(ref.inputs()).get("action"), ref.get("action"), 1e-5, 1e-6));
  };
  at::Tensor w = policy->constants().get({"net", "0", "weight"});
  TD_EXPECT_THROW_MSG(policy->load_constants(td::TensorDict({{{"net", "9", "weight"}, w}}, {})),
                      td::KeyError, {"'net.9.weight'", "net.0.weight"});
  TD_EXPECT_THROW_MSG(
      policy->load_constants(td::TensorDict(
          {{{"net", "0", "bias"}, at::zeros({32})}, {{"net", "0", "weight"}, w.t()}}, {})),
      c10::ValueError, {"('net', '0', 'weight')", "torch.Size([16, 32])", "torch.Size([32, 16])"});
  TD_EXPECT_THROW_MSG(
      policy->load_constants(td::TensorDict({{{"net", "0", "weight"}, w.to(at::kDouble)}}, {})),
      c10::ValueError, {"torch.float64", "torch.float32"});
  unchanged();
}

}  // namespace
