#!/usr/bin/env python3
"""The AOTInductor packages td/nn/aoti's tests, example and benchmark load, and their eager outputs.

Follows upstream tensordict's export tutorial (tutorials/sphinx_tuto/export.py, tensordict 0.14.0,
torch 2.14): a TensorDict module is exported with torch.export.export(model, args=(),
kwargs=...) whose keyword names are its in_keys with nested keys joined by "_" (as
tensordict.nn.dispatch does, tensordict/nn/common.py `dispatch`), its outputs in out_keys order,
then compiled with torch._inductor.aoti_compile_and_package. Plain torch here (no tensordict
import): each module's forward takes the keywords the exported TensorDict module would.

On top of the tutorial, the recipe of docs/nn.md ("AOTInductor packages"): the package's
metadata (inductor_configs={"aot_inductor.metadata": {...}}) records under "tensordict.signature"
a JSON object with the in keys, the argument each fills, their dtypes and shapes (null for the
dynamic batch dimension) and the out keys; td::nn::AotiModule checks inputs against it before
a run, which the compiled model itself does not do (unless AOTI_RUNTIME_CHECK_INPUTS is set).

  python3 export_policies.py OUT_DIR

writes to OUT_DIR:
  policy.pt2          MLP policy: obs [B, 6], ("next", "hidden") [B, 10] -> action [B, 3],
                      with the signature metadata; dynamic batch B
  policy_plain.pt2    the same model without the metadata (what a plain export gives)
  two_outputs.pt2     obs [B, 6] -> (loc [B, 3], scale [B, 3]), with the signature metadata
  policy_script.pt    the same policy as TorchScript (forward(obs, next_hidden)), for the
                      benchmark's and the example's comparison
  reference.pt        a TorchScript module holding fixed inputs and the eager outputs as buffers
                      (obs, next_hidden, action, loc, scale, action_new) and, as submodule
                      `policy_new`, a policy with other weights; action_new is its output
Needs g++ on PATH and a writable TORCHINDUCTOR_CACHE_DIR (each compile takes ~25 s).
"""

import json
import os
import sys

import torch
from torch import nn

OBS, HIDDEN, ACT = 6, 10, 3
BATCH = 5


class Policy(nn.Module):
    """A TensorDictModule(in_keys=["obs", ("next", "hidden")], out_keys=["action"])."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(OBS + HIDDEN, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
            nn.Linear(32, ACT))

    def forward(self, obs: torch.Tensor, next_hidden: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, next_hidden], -1))


class TwoOutputs(nn.Module):
    """A TensorDictModule(in_keys=["obs"], out_keys=["loc", "scale"])."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(OBS, 2 * ACT)

    def forward(self, obs: torch.Tensor):
        loc, scale = self.head(obs).chunk(2, -1)
        return loc, nn.functional.softplus(scale) + 1e-3


class Holder(nn.Module):
    """Tensors as buffers (and a policy as a submodule) of a TorchScript archive C++ can read."""

    def __init__(self, tensors, policy_new):
        super().__init__()
        for name, t in tensors.items():
            self.register_buffer(name, t)
        self.policy_new = policy_new

    def forward(self) -> torch.Tensor:
        return self.action


def signature(inputs, out_keys):
    """The "tensordict.signature" metadata: inputs (key, arg, dtype, shape), out keys."""
    return json.dumps({
        "version": 1,
        "inputs": [{"key": list(key), "arg": "_".join(key),
                    "dtype": str(t.dtype).replace("torch.", ""),
                    "shape": [None] + list(t.shape[1:])} for key, t in inputs],
        "out_keys": [list(k) for k in out_keys],
    })


def export(model, inputs, out_keys, path, with_signature=True):
    batch = torch.export.Dim("batch", min=1, max=1 << 16)
    kwargs = {"_".join(key): t for key, t in inputs}
    exported = torch.export.export(model, args=(), kwargs=kwargs,
                                   dynamic_shapes={k: {0: batch} for k in kwargs})
    # Constants inductor folds at compile time are not the module's parameters any more and
    # cannot be replaced (the last Linear's bias, here); folded at load time instead, they stay
    # replaceable (td::nn::AotiModuleImpl::load_constants folds again after an update).
    configs = {"aot_inductor.use_runtime_constant_folding": True}
    if with_signature:
        configs["aot_inductor.metadata"] = {"tensordict.signature": signature(inputs, out_keys)}
    torch._inductor.aoti_compile_and_package(exported, package_path=path,
                                             inductor_configs=configs)


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    policy, two, policy_new = Policy().eval(), TwoOutputs().eval(), Policy().eval()
    obs, hidden = torch.randn(BATCH, OBS), torch.randn(BATCH, HIDDEN)
    inputs = [(("obs",), obs), (("next", "hidden"), hidden)]
    with torch.no_grad():
        export(policy, inputs, [("action",)], os.path.join(out, "policy.pt2"))
        export(policy, inputs, [("action",)], os.path.join(out, "policy_plain.pt2"),
               with_signature=False)
        export(two, inputs[:1], [("loc",), ("scale",)], os.path.join(out, "two_outputs.pt2"))
        loc, scale = two(obs)
        tensors = {"obs": obs, "next_hidden": hidden, "action": policy(obs, hidden),
                   "loc": loc, "scale": scale, "action_new": policy_new(obs, hidden)}
    torch.jit.script(policy).save(os.path.join(out, "policy_script.pt"))
    torch.jit.script(Holder(tensors, policy_new)).save(os.path.join(out, "reference.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
