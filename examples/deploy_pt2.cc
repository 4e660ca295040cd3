// Deploying a policy exported from Python with AOTInductor: the model arrives as a `.pt2`
// package, the observations live in TensorDicts, and a learner pushes new weights into the
// deployed policy without exporting it again.
//
//   # Python (td/nn/aoti/testdata/export_policies.py; docs/nn.md, "AOTInductor packages")
//   ep = torch.export.export(policy, (), {"obs": obs, "next_hidden": hidden}, dynamic_shapes=...)
//   torch._inductor.aoti_compile_and_package(ep, package_path="policy.pt2", inductor_configs={
//       "aot_inductor.metadata": {"tensordict.signature": ...}, ...})
//
//   // C++, at deployment
//   td::nn::AotiModule policy("policy.pt2");   // in/out keys from the package's signature
//   policy(step);                               // step["action"] filled
//
// The policy (//td/nn/aoti:exported, built by Python when the example is built) reads "obs" and
// ("next", "hidden"), and writes "action". The example runs a rollout of 16 steps over 4
// environments of a toy dynamics written here, stacks the steps into one [16, 4] TensorDict, and
// checks every action against the same policy as TorchScript (policy_script.pt, same weights);
// halfway it perturbs the TorchScript policy's weights as a learner would and pushes them into
// the package with load_constants() (where the loader allows it: not on LibTorch 2.6). It exits non-zero when an action differs by more than 1e-5.
//   bazel run //examples:deploy_pt2
#include <ATen/ATen.h>
#include <torch/script.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "td/core/stack.h"
#include "td/core/tensordict.h"
#include "td/nn/aoti/aoti_module.h"
#include "td/nn/script_module.h"

int main(int argc, char** argv) {
  // Built by Bazel (bazel run and bazel test start in the runfiles tree).
  const std::string dir = argc > 1 ? argv[1] : "td/nn/aoti/exported";
  c10::InferenceMode inference;
  at::manual_seed(0);

  td::nn::AotiModule policy(dir + "/policy.pt2");
  // LibTorch 2.6's loader gives no constants: the rollout then runs without the weight push.
  const bool push = td::nn::AotiModuleImpl::constants_available();
  std::cout << *policy << "\n";
  if (push) std::cout << "its constants (from_module-style):\n" << policy->constants() << "\n";

  // The reference: the same MLP as TorchScript, in the same keys.
  torch::jit::script::Module scripted = torch::jit::load(dir + "/policy_script.pt");
  td::nn::TensorDictModule reference =
      td::nn::script_module(scripted, {"obs", {"next", "hidden"}}, {"action"});

  const int64_t steps = 16, envs = 4;
  at::Tensor obs = at::randn({envs, 6});
  at::Tensor hidden = at::zeros({envs, 10});
  std::vector<td::TensorDict> rollout;
  double worst = 0;
  for (int64_t t = 0; t < steps; ++t) {
    if (push && t == steps / 2) {
      // A learner's update: new weights, pushed into the deployed policy.
      td::TensorDict learner = td::nn::from_module(scripted).apply(
          [](const at::Tensor& p) { return p + 0.05 * at::randn_like(p); });
      auto keep = td::nn::to_module(learner, scripted);  // the reference computes with them too
      keep.release();
      policy->load_constants(learner);
      std::cout << "step " << t << ": pushed new weights into the package\n";
    }
    td::TensorDict step({{"obs", obs}, {{"next", "hidden"}, hidden}}, {envs});
    policy(step);  // writes "action"
    td::TensorDict check = step.select({"obs", {"next", "hidden"}});
    reference(check);
    worst = std::max(worst, (step.get("action") - check.get("action")).abs().max().item<double>());
    // The toy environment: the action drives the next observation and hidden state.
    const at::Tensor action = step.get("action");
    obs = 0.9 * obs + 0.1 * at::cat({action, action}, -1);
    hidden = at::tanh(hidden.roll(1, -1) + action.sum(-1, true));
    rollout.push_back(step);
  }
  const td::TensorDict trajectory = td::stack(rollout, 0);  // batch size [steps, envs]
  std::cout << trajectory << "\n";
  if (trajectory.batch_size() != at::IntArrayRef({steps, envs}) || worst > 1e-5) {
    std::cerr << "deploy_pt2: the package's actions differ from TorchScript's by " << worst
              << "\n";
    return EXIT_FAILURE;
  }
  std::cout << "deploy_pt2: " << steps << " steps x " << envs
            << " environments match the TorchScript policy (max difference " << worst << ")\n";
  return EXIT_SUCCESS;
}
