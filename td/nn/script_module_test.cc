// TorchScript policies built at test time by testdata/make_scripted_policies.py (Debian's
// python3-torch, see the genrule in BUILD.bazel): outputs compared with the ones Python saved,
// parameters swapped in from checkpoints Python wrote in tensordict's memmap layout.
#include "td/nn/script_module.h"

#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "td/core/testing.h"

namespace {

namespace fs = std::filesystem;
using td::NestedKey;
using td::TensorDict;

const std::string kDir = "td/nn/scripted/";

at::Tensor Ref(const std::string& name) {
  static torch::jit::script::Module refs = torch::jit::load(kDir + "refs.pt");
  return refs.attr(name).toTensor();
}

torch::jit::script::Module Load(const std::string& name) {
  return torch::jit::load(kDir + name);
}

void ExpectClose(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(at::allclose(actual, expected, /*rtol=*/0, /*atol=*/1e-6))
      << "max abs diff " << (actual - expected).abs().max().item<double>();
}

// A checkpoint directory copied out of the runfiles tree (whose files are symlinks, which
// loading refuses).
TensorDict LoadCheckpoint(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / ("ckpt_" + name);
  fs::remove_all(dir);
  fs::copy(kDir + name, dir, fs::copy_options::recursive);
  return TensorDict::load_memmap(dir.string());
}

TEST(ScriptModule, MlpPolicyMatchesPython) {
  td::nn::TensorDictModule actor = td::nn::script_module(Load("mlp_policy.pt"), {"obs"},
                                                         {"action"});
  TensorDict data({{"obs", Ref("mlp_obs")}}, {5});
  TensorDict out = actor(data);
  EXPECT_TRUE(out.is_same(data));
  ExpectClose(data.get("action"), Ref("mlp_action"));
  // The tensor calling convention goes through the same call.
  ExpectClose(actor->forward_tensors({Ref("mlp_obs")})[0], Ref("mlp_action"));
}

TEST(ScriptModule, LoadScriptModuleAndOutputModes) {
  auto actor = td::nn::load_script_module(
      kDir + "mlp_policy.pt", {{"agent", "obs"}}, {{"agent", "action"}},
      td::nn::ScriptModuleOptions().output(td::nn::OutputMode::kEmpty));
  TensorDict data({{"agent", {{"obs", Ref("mlp_obs")}}}}, {5});
  TensorDict out = actor(data);
  EXPECT_FALSE(data.contains({"agent", "action"}));
  ExpectClose(out.get({"agent", "action"}), Ref("mlp_action"));
}

TEST(ScriptModule, GruPolicyTupleOutput) {
  auto policy = td::nn::script_module(Load("gru_policy.pt"), {"obs", "hidden"},
                                      {"action", {"next", "hidden"}});
  TensorDict data({{"obs", Ref("gru_obs")}, {"hidden", Ref("gru_hidden")}}, {});
  policy(data);
  ExpectClose(data.get("action"), Ref("gru_action"));
  ExpectClose(data.get({"next", "hidden"}), Ref("gru_next_hidden"));
}

TEST(ScriptModule, DictOutputFillsOutKeysByName) {
  // Out keys in another order than the dict's, and one discarded.
  auto ac = td::nn::script_module(Load("ac_policy.pt"), {"obs"}, {"state_value", "action"});
  TensorDict data({{"obs", Ref("ac_obs")}}, {7});
  ac(data);
  ExpectClose(data.get("action"), Ref("ac_action"));
  ExpectClose(data.get("state_value"), Ref("ac_state_value"));

  auto value_only = td::nn::script_module(Load("ac_policy.pt"), {"obs"}, {"_", "state_value"});
  TensorDict d2({{"obs", Ref("ac_obs")}}, {7});
  value_only(d2);
  EXPECT_FALSE(d2.contains("action"));
  ExpectClose(d2.get("state_value"), Ref("ac_state_value"));

  auto wrong = td::nn::script_module(Load("ac_policy.pt"), {"obs"}, {"action", "log_prob"});
  TensorDict d3({{"obs", Ref("ac_obs")}}, {7});
  TD_EXPECT_THROW_MSG(wrong(d3), td::KeyError,
                      {"'log_prob'", "'action'", "'state_value'", "forward("});
  EXPECT_FALSE(d3.contains("action"));  // nothing written
}

TEST(ScriptModule, SchemaErrors) {
  TD_EXPECT_THROW_MSG(td::nn::script_module(Load("gru_policy.pt"), {"obs"}, {"a", "h"}),
                      td::ValueError,
                      {"forward(", "Tensor obs, Tensor hidden", "takes 2", "lists 1"});
  TD_EXPECT_THROW_MSG(
      td::nn::script_module(Load("mlp_policy.pt"), {"obs"}, {"a"},
                            td::nn::ScriptModuleOptions().method("act")),
      td::ValueError, {"no method 'act'", "'forward'"});

  torch::jit::script::Module m("Scaled");
  m.define(R"(
def forward(self, x: Tensor, n: int = 2) -> Tensor:
    return x * n
)");
  TD_EXPECT_THROW_MSG(td::nn::script_module(m, {"x", "n"}, {"y"}), td::TypeError,
                      {"argument 'n'", "int", "forward(", "'n'"});
  // A defaulted argument may be left out.
  auto scaled = td::nn::script_module(m, {"x"}, {"y"});
  TensorDict data({{"x", at::ones({2})}}, {2});
  scaled(data);
  EXPECT_TRUE(at::equal(data.get("y"), at::full({2}, 2.0)));

  // The method's own error gets the schema and the module's keys.
  auto actor = td::nn::script_module(Load("mlp_policy.pt"), {"obs"}, {"action"});
  TensorDict bad({{"obs", at::zeros({5, 3})}}, {5});
  TD_EXPECT_THROW_MSG(actor(bad), c10::Error, {"calling TorchScript method forward(", "'obs'"});

  torch::jit::script::Module returns_int("ReturnsInt");
  returns_int.define("def forward(self, x: Tensor) -> int:\n    return 3\n");
  auto r = td::nn::script_module(returns_int, {"x"}, {"y"});
  TD_EXPECT_THROW_MSG(r(data), td::TypeError, {"returned a Int", "forward("});
}

TEST(ScriptModule, InKeysByArgumentName) {
  // Python: TensorDictModule(gru, in_keys={"h0": "hidden", "o": "obs"}, ...): the schema's names
  // place the keys, whatever the order of the pairs.
  auto gru = td::nn::script_module(Load("gru_policy.pt"),
                                   td::nn::by_name({{"h0", "hidden"}, {"o", "obs"}}),
                                   {"action", {"next", "hidden"}});
  EXPECT_EQ(gru->in_keys(), (std::vector<NestedKey>{"h0", "o"}));
  EXPECT_EQ(gru->in_key_args(), (std::vector<std::string>{"hidden", "obs"}));
  TensorDict data({{"o", Ref("gru_obs")}, {"h0", Ref("gru_hidden")}}, {});
  gru(data);
  ExpectClose(data.get("action"), Ref("gru_action"));
  ExpectClose(data.get({"next", "hidden"}), Ref("gru_next_hidden"));
  EXPECT_EQ(gru->parameters().size(), 6u);  // the scripted module's, as for positional in_keys

  // Two tensor arguments with distinct roles, and an optional one left to its default.
  torch::jit::script::Module m("TwoArgs");
  m.define(R"(
def forward(self, x: Tensor, h: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    y = x - 2 * h
    if bias is not None:
        y = y + bias
    return y
)");
  const at::Tensor obs = at::randn({4, 3}), hidden = at::randn({4, 3}), b = at::randn({4, 3});
  auto two = td::nn::script_module(m, td::nn::by_name({{"hidden", "h"}, {"obs", "x"}}), {"y"});
  TensorDict d2({{"obs", obs}, {"hidden", hidden}, {"b", b}}, {4});
  two(d2);
  EXPECT_TRUE(at::allclose(d2.get("y"), at::sub(obs, at::mul(hidden, 2))));
  auto three = td::nn::script_module(
      m, td::nn::by_name({{"b", "bias"}, {"hidden", "h"}, {"obs", "x"}}), {"y"});
  three(d2);
  EXPECT_TRUE(at::allclose(d2.get("y"), at::add(at::sub(obs, at::mul(hidden, 2)), b)));

  // Errors name the argument, the schema and what was expected.
  TD_EXPECT_THROW_MSG(
      td::nn::script_module(m, td::nn::by_name({{"obs", "x"}, {"hidden", "hh"}}), {"y"}),
      td::ValueError,
      {"no argument named 'hh'", "(in key 'hidden')", "forward(", "['x', 'h', 'bias']"});
  TD_EXPECT_THROW_MSG(td::nn::script_module(m, td::nn::by_name({{"hidden", "h"}}), {"y"}),
                      td::ValueError, {"argument 'x'", "no default", "['h']"});
  TD_EXPECT_THROW_MSG(
      td::nn::script_module(m, td::nn::by_name({{"obs", "x"}, {"hidden", "x"}}), {"y"}),
      td::ValueError, {"argument 'x' is filled by two in keys"});
  torch::jit::script::Module scaled("Scaled");
  scaled.define("def forward(self, x: Tensor, n: int = 2) -> Tensor:\n    return x * n\n");
  TD_EXPECT_THROW_MSG(
      td::nn::script_module(scaled, td::nn::by_name({{"obs", "x"}, {"k", "n"}}), {"y"}),
      td::TypeError, {"argument 'n'", "int", "(in key 'k')"});
  TensorDict partial({{"obs", obs}}, {4});
  TD_EXPECT_THROW_MSG(two(partial), td::KeyError, {"input key 'hidden' (argument 'h') is missing"});
  EXPECT_FALSE(partial.contains("y"));
  // The method's own error gets the schema.
  TensorDict bad({{"obs", at::zeros({4, 3})}, {"hidden", at::zeros({4, 5})}}, {4});
  TD_EXPECT_THROW_MSG(two(bad), c10::Error, {"calling TorchScript method forward("});

  // load_script_module takes them too.
  auto loaded = td::nn::load_script_module(
      kDir + "gru_policy.pt", td::nn::by_name({{"o", "obs"}, {"h0", "hidden"}}), {"a", "h1"});
  TensorDict d3({{"o", Ref("gru_obs")}, {"h0", Ref("gru_hidden")}}, {});
  loaded(d3);
  ExpectClose(d3.get("a"), Ref("gru_action"));
}

TEST(ScriptModule, FromModuleNamesLikeUpstream) {
  torch::jit::script::Module mlp = Load("mlp_policy.pt");
  TensorDict params = td::nn::from_module(mlp);
  EXPECT_EQ(params.keys(td::test::kLeaves),
            (std::vector<NestedKey>{{"0", "weight"}, {"0", "bias"}, {"2", "weight"},
                                    {"2", "bias"}}));
  EXPECT_FALSE(params.contains("1"));  // Tanh holds no tensor
  EXPECT_TRUE(td::nn::from_module(mlp, td::nn::FromModuleOptions().keep_empty(true))
                  .contains("1"));
  // The module's own tensors.
  EXPECT_TRUE(params.get({"0", "weight"})
                  .is_same(mlp.attr("0").toModule().attr("weight").toTensor()));

  TensorDict ac = td::nn::from_module(Load("ac_policy.pt"));
  EXPECT_TRUE(ac.contains("obs_offset"));  // buffers too
  EXPECT_FALSE(td::nn::from_module(Load("ac_policy.pt"),
                                   td::nn::FromModuleOptions().include_buffers(false))
                   .contains("obs_offset"));

  // The layout matches what Python's from_module(...).memmap() wrote.
  TensorDict ckpt = LoadCheckpoint("gru_ckpt");
  TensorDict gru = td::nn::from_module(Load("gru_policy.pt"));
  EXPECT_EQ(gru.keys(td::test::kLeaves), ckpt.keys(td::test::kLeaves));
}

TEST(ScriptModule, PythonCheckpointGoesIntoTheScriptedMlp) {
  torch::jit::script::Module mlp = Load("mlp_policy.pt");
  auto actor = td::nn::script_module(mlp, {"obs"}, {"action"});
  TensorDict ckpt = LoadCheckpoint("mlp_ckpt");
  TensorDict data({{"obs", Ref("mlp_obs")}}, {5});
  {
    auto guard = td::nn::to_module(ckpt, mlp);
    EXPECT_EQ(guard.size(), 4u);
    actor(data);
    ExpectClose(data.get("action"), Ref("mlp_action_trained"));
  }
  actor(data);
  ExpectClose(data.get("action"), Ref("mlp_action"));
}

TEST(ScriptModule, PythonCheckpointGoesIntoTheScriptedGru) {
  // Scripted GRU reads its weights through the _flat_weights list as well.
  torch::jit::script::Module gru = Load("gru_policy.pt");
  auto policy = td::nn::script_module(gru, {"obs", "hidden"}, {"action", "next_hidden"});
  TensorDict ckpt = LoadCheckpoint("gru_ckpt");
  TensorDict data({{"obs", Ref("gru_obs")}, {"hidden", Ref("gru_hidden")}}, {});
  {
    auto guard = td::nn::to_module(ckpt, gru);
    policy(data);
    ExpectClose(data.get("action"), Ref("gru_action_trained"));
    ExpectClose(data.get("next_hidden"), Ref("gru_next_hidden_trained"));
  }
  policy(data);
  ExpectClose(data.get("action"), Ref("gru_action"));
  ExpectClose(data.get("next_hidden"), Ref("gru_next_hidden"));

  // In-place mode: the values are copied into the module's tensors, and copied back.
  const at::Tensor w = gru.attr("gru").toModule().attr("weight_ih_l0").toTensor();
  const at::Tensor w_before = w.clone();
  {
    auto guard = td::nn::to_module(ckpt, gru, td::nn::ToModuleOptions().inplace(true));
    EXPECT_TRUE(gru.attr("gru").toModule().attr("weight_ih_l0").toTensor().is_same(w));
    EXPECT_TRUE(at::equal(w, ckpt.get({"gru", "weight_ih_l0"})));
    policy(data);
    ExpectClose(data.get("action"), Ref("gru_action_trained"));
  }
  EXPECT_TRUE(at::equal(w, w_before));

  // release(): the checkpoint stays in; the old tensors come back out.
  auto guard = td::nn::to_module(ckpt, gru);
  TensorDict old = guard.release();
  EXPECT_FALSE(guard.active());
  EXPECT_TRUE(old.get({"gru", "weight_ih_l0"}).is_same(w));
  policy(data);
  ExpectClose(data.get("action"), Ref("gru_action_trained"));
}

TEST(ScriptModule, ToModuleErrorsSwapNothing) {
  torch::jit::script::Module mlp = Load("mlp_policy.pt");
  TensorDict params = td::nn::from_module(mlp);
  const at::Tensor w0 = params.get({"0", "weight"});
  TensorDict bad = params.clone();
  bad.set({"2", "gain"}, at::ones({2}));
  TD_EXPECT_THROW_MSG(td::nn::to_module(bad, mlp), td::KeyError,
                      {"('2', 'gain')", "['weight', 'bias']", "submodule '2'"});
  EXPECT_TRUE(mlp.attr("0").toModule().attr("weight").toTensor().is_same(w0));

  TensorDict wrong_shape = params.clone();
  wrong_shape.set({"2", "bias"}, at::ones({3}));
  TD_EXPECT_THROW_MSG(td::nn::to_module(wrong_shape, mlp), td::ValueError,
                      {"('2', 'bias')", "torch.Size([3])", "torch.Size([2])"});
  EXPECT_TRUE(mlp.attr("0").toModule().attr("weight").toTensor().is_same(w0));

  TensorDict tensor_for_module({{"0", at::ones({1})}}, {});
  TD_EXPECT_THROW_MSG(td::nn::to_module(tensor_for_module, mlp), td::TypeError,
                      {"'0'", "names a submodule"});
  TensorDict td_for_tensor({{"0", {{"weight", {{"x", at::ones({1})}}}}}}, {});
  TD_EXPECT_THROW_MSG(td::nn::to_module(td_for_tensor, mlp), td::TypeError,
                      {"('0', 'weight')", "not a submodule"});
}

TEST(ScriptModule, ToModuleRefusesAnotherDtype) {
  torch::jit::script::Module mlp = Load("mlp_policy.pt");
  TensorDict params = td::nn::from_module(mlp);
  const at::Tensor w0 = params.get({"0", "weight"});
  TensorDict doubles = params.detach().clone();
  doubles.set({"2", "bias"}, doubles.get({"2", "bias"}).to(at::kDouble));
  TD_EXPECT_THROW_MSG(td::nn::to_module(doubles, mlp), td::ValueError,
                      {"('2', 'bias')", "dtype torch.float64", "has dtype torch.float32"});
  TD_EXPECT_THROW_MSG(td::nn::to_module(doubles, mlp, td::nn::ToModuleOptions().inplace(true)),
                      td::ValueError, {"('2', 'bias')", "torch.float64", "torch.float32"});
  EXPECT_TRUE(mlp.attr("0").toModule().attr("weight").toTensor().is_same(w0));
  EXPECT_EQ(mlp.attr("2").toModule().attr("bias").toTensor().scalar_type(), at::kFloat);
}

TEST(ScriptModule, PrintsTheScriptedType) {
  auto actor = td::nn::script_module(Load("mlp_policy.pt"), {"obs"}, {"action"});
  std::ostringstream os;
  actor->pretty_print(os);
  EXPECT_EQ(os.str(),
            "td::nn::TensorDictModule(module=torch::jit::Module("
            "__torch__.torch.nn.modules.container.Sequential), in_keys=['obs'], "
            "out_keys=['action'])");
  auto by_name = td::nn::script_module(Load("gru_policy.pt"),
                                       td::nn::by_name({{"obs", "obs"}, {"hidden", "hidden"}}),
                                       {"action", "next_hidden"});
  std::ostringstream os2;
  by_name->pretty_print(os2);
  EXPECT_NE(os2.str().find("module=torch::jit::Module(__torch__.GRUPolicy)"), std::string::npos)
      << os2.str();
}

// load_script_module of files that are not TorchScript archives: a ValueError naming the file,
// what it is and what was expected, instead of LibTorch's "PytorchStreamReader failed locating
// file constants.pkl".
TEST(ScriptModule, LoadScriptModuleNamesWhatTheFileIs) {
  auto load = [](const std::string& path) {
    (void)td::nn::load_script_module(path, {"obs"}, {"action"});
  };
  const std::string expected = "expected a TorchScript archive written by torch.jit.save";
  TD_EXPECT_THROW_MSG(load(kDir + "saved_tensor.pt"), td::ValueError,
                      {kDir + "saved_tensor.pt", "a torch.save file holding a pickled tensor",
                       expected});
  TD_EXPECT_THROW_MSG(load(kDir + "saved_module.pt"), td::ValueError,
                      {kDir + "saved_module.pt",
                       "class torch.nn.modules.container.Sequential (an eager module?)",
                       expected});
  TD_EXPECT_THROW_MSG(load(kDir + "saved_state_dict.pt"), td::ValueError,
                      {kDir + "saved_state_dict.pt", "OrderedDict (a state_dict?)", expected});

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/not_archives";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/empty.pt").close();
  std::ofstream(dir + "/random.pt", std::ios::binary) << std::string("\x13\x37garbage\xff", 10);
  TD_EXPECT_THROW_MSG(load(dir + "/empty.pt"), td::ValueError,
                      {dir + "/empty.pt", "is an empty file", expected});
  TD_EXPECT_THROW_MSG(load(dir + "/random.pt"), td::ValueError,
                      {dir + "/random.pt", "not a zip archive (10 bytes starting with 13 37 67",
                       expected});
  TD_EXPECT_THROW_MSG(load(dir), td::ValueError, {dir, "is a directory", expected});
  TD_EXPECT_THROW_MSG(load(dir + "/missing.pt"), td::ValueError,
                      {dir + "/missing.pt", "No such file or directory", expected});
  // A device is never read (reading /dev/zero would never end): checked in a child process.
  td::test::ChildOutcome o =
      td::test::ErrorInChild<td::ValueError>([&] { load("/dev/zero"); });
  ASSERT_EQ(o.kind, "error") << o;
  EXPECT_NE(o.message.find("/dev/zero is a character device"), std::string::npos) << o;
}

TEST(ScriptModule, ParametersAreTheScriptedModulesAndEagerToModuleReachesIt) {
  torch::jit::script::Module ac = Load("ac_policy.pt");
  auto module = td::nn::script_module(ac, {"obs"}, {"action", "state_value"});
  const auto named = module->named_parameters();
  ASSERT_EQ(named.size(), 4u);
  EXPECT_TRUE(named["module.actor.weight"].is_same(
      ac.attr("actor").toModule().attr("weight").toTensor()));

  // One SGD step through parameters() changes what the scripted module computes.
  TensorDict data({{"obs", Ref("ac_obs")}}, {7});
  torch::optim::SGD sgd(module->parameters(), torch::optim::SGDOptions(0.1));
  module(data);
  data.get("state_value").sum().backward();
  sgd.step();
  TensorDict again({{"obs", Ref("ac_obs")}}, {7});
  module(again);
  EXPECT_FALSE(at::allclose(again.get("state_value"), Ref("ac_state_value")));

  // from_module / to_module on the TensorDictModule (the eager API) reach the scripted slots.
  TensorDict params = td::nn::from_module(*module);
  ASSERT_TRUE(params.contains({"module", "obs_offset"}));
  TensorDict zeros = params.detach().apply([](const at::Tensor& t) { return at::zeros_like(t); });
  {
    auto guard = td::nn::to_module(zeros, *module);
    TensorDict d({{"obs", Ref("ac_obs")}}, {7});
    module(d);
    EXPECT_TRUE(at::equal(d.get("state_value"), at::zeros({7, 1})));
  }
  TensorDict after({{"obs", Ref("ac_obs")}}, {7});
  module(after);
  ExpectClose(after.get("state_value"), again.get("state_value"));
}

}  // namespace
