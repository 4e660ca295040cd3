// Deploying a policy trained in Python: the model arrives as a TorchScript file, the observations
// live in TensorDicts, and no glue code sits between the two.
//
//   # Python, at the end of training
//   torch.jit.script(policy).save("policy.pt")
//
//   // C++, at deployment
//   auto policy = td::nn::load_script_module("policy.pt", {"observation", "hidden"},
//                                            {"action", "state_value", {"next", "hidden"}});
//   policy(step);   // step["action"], step["state_value"], step["next", "hidden"] filled
//
// The policy (examples/testdata/make_deploy_policy.py, built by Python when the example is
// built) is a recurrent actor-critic whose forward returns a Dict[str, Tensor]; its outputs fill
// the out keys by name (the nested key {"next", "hidden"} reads the entry "next.hidden"). The
// example runs a rollout of 8 steps over 3 environments, feeding each step's next hidden state
// into the next step, stacks the steps into one [8, 3] TensorDict and checks it against what
// Python's policy returned, to 1e-6; it exits non-zero otherwise.
//   bazel run //examples:deploy_policy [-- policy.pt rollout.pt]
#include <ATen/ATen.h>
#include <torch/script.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/nn/script_module.h"

namespace {

bool Close(const at::Tensor& a, const at::Tensor& b, const char* what) {
  const bool ok = a.sizes() == b.sizes() && at::allclose(a, b, /*rtol=*/0, /*atol=*/1e-6);
  if (!ok) std::cerr << "deploy_policy: " << what << " differs from Python's\n";
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Built next to this example by Bazel (bazel run and bazel test start in the runfiles tree).
  const std::string policy_file = argc > 1 ? argv[1] : "examples/scripted/policy.pt";
  const std::string rollout_file = argc > 2 ? argv[2] : "examples/scripted/rollout.pt";
  torch::NoGradGuard no_grad;

  torch::jit::script::Module scripted = torch::jit::load(policy_file);
  // The module is shared, not copied (td::nn::load_script_module(policy_file, ...) does both).
  td::nn::TensorDictModule policy = td::nn::script_module(
      scripted, {"observation", "hidden"}, {"action", "state_value", {"next", "hidden"}});
  // Its parameters and buffers, named as Python's TensorDict.from_module(policy) names them.
  std::cout << "policy parameters and buffers:\n" << td::nn::from_module(scripted) << "\n";

  // What Python recorded: observations [8, 3, 4] and its policy's outputs at every step.
  torch::jit::script::Module python = torch::jit::load(rollout_file);
  const at::Tensor observations = python.attr("observation").toTensor();
  const int64_t steps = observations.size(0), envs = observations.size(1);

  // The rollout: one TensorDict per step with batch size [envs].
  std::vector<td::TensorDict> rollout;
  at::Tensor hidden = at::zeros({envs, 16});
  for (int64_t t = 0; t < steps; ++t) {
    td::TensorDict step({{"observation", observations[t]}, {"hidden", hidden}}, {envs});
    policy(step);  // writes "action", "state_value" and ("next", "hidden")
    hidden = step.get({"next", "hidden"});
    rollout.push_back(step);
  }
  const td::TensorDict trajectory = td::stack(rollout, 0);  // batch size [steps, envs]
  std::cout << trajectory << "\n";

  const bool ok =
      trajectory.batch_size() == at::IntArrayRef({steps, envs}) &&
      Close(trajectory.get("action"), python.attr("action").toTensor(), "action") &&
      Close(trajectory.get("state_value"), python.attr("state_value").toTensor(),
            "state_value") &&
      Close(trajectory.get({"next", "hidden"}), python.attr("next_hidden").toTensor(),
            "next hidden state");
  if (!ok) return EXIT_FAILURE;
  std::cout << "deploy_policy: " << steps << " steps x " << envs
            << " environments match Python's policy to 1e-6\n";
  return EXIT_SUCCESS;
}
