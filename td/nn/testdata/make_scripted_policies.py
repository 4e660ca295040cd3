#!/usr/bin/python3
"""Builds the TorchScript policies and reference outputs that script_module_test.cc checks.

Run at test time by the genrule in td/nn/BUILD.bazel with Debian's python3-torch:
  /usr/bin/python3 make_scripted_policies.py OUT_DIR
writes into OUT_DIR:
  mlp_policy.pt   torch.jit.script(nn.Sequential(Linear(4, 32), Tanh(), Linear(32, 2)))
  gru_policy.pt   GRU(4, 8, batch_first) + Linear(8, 2) head: forward(obs, h) -> (action, h')
  ac_policy.pt    actor-critic with an observation-offset buffer: forward(obs) -> Dict[str, Tensor]
  refs.pt         a scripted container whose buffers are the inputs and the outputs Python computed
  saved_tensor.pt, saved_module.pt, saved_state_dict.pt
                  torch.save (not torch.jit.save) of a tensor, of the eager MLP and of its
                  state_dict: files load_script_module must refuse, naming what they are.
  mlp_ckpt/, gru_ckpt/
                  TensorDict.from_module(trained_model).memmap(dir) of a second ("trained") copy of
                  each model, written with plain torch in Python tensordict's memmap layout.

The checkpoint layout follows upstream tensordict (pytorch/tensordict, tensordict/_td.py
`TensorDict._from_module`: a level per submodule holding `module._parameters` then
`module._buffers`, submodules without tensors left out; `_memmap_` / `_save_metadata`: one
directory per level with meta.json, one raw C-order `<key>.memmap` file per tensor).
"""

import json
import os
import sys
from typing import Dict, Tuple

import torch
from torch import nn

TD_TYPE = "<class 'tensordict._td.TensorDict'>"


class GRUPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 8, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, obs: torch.Tensor, hidden: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        out, next_hidden = self.gru(obs, hidden)
        return torch.tanh(self.head(out)), next_hidden


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("obs_offset", torch.linspace(-1.0, 1.0, 4))
        self.actor = nn.Linear(4, 2)
        self.critic = nn.Linear(4, 1)

    def forward(self, obs: torch.Tensor) -> Dict[str, torch.Tensor]:
        x = obs - self.obs_offset
        return {"action": torch.tanh(self.actor(x)), "state_value": self.critic(x)}


def mlp():
    return nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))


def from_module(module):
    """Upstream's TensorDict._from_module (use_state_dict=False, filter_empty=True) as dicts."""
    out = {}
    for name, p in module._parameters.items():
        if p is not None:
            out[name] = p.detach()
    for name, b in module._buffers.items():
        if b is not None:
            out[name] = b.detach()
    for name, sub in module._modules.items():
        if sub is not None:
            subtd = from_module(sub)
            if subtd:
                out[name] = subtd
    return out


def memmap(tree, path):
    """Upstream's TensorDict.memmap(path) for a batch-size-[] TensorDict of CPU tensors."""
    os.makedirs(path, exist_ok=True)
    meta = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            meta[key] = {"type": "TensorDict"}
            memmap(value, os.path.join(path, key))
        else:
            t = value.contiguous()
            meta[key] = {"device": "cpu", "shape": list(t.shape),
                         "dtype": str(t.dtype), "is_nested": False}
            with open(os.path.join(path, key + ".memmap"), "wb") as f:
                f.write(t.numpy().tobytes())
    meta["shape"] = []
    meta["device"] = "cpu"
    meta["_type"] = TD_TYPE
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f)


class Refs(nn.Module):
    def __init__(self, tensors):
        super().__init__()
        for k, v in tensors.items():
            self.register_buffer(k, v.detach().clone())

    def forward(self) -> int:
        return 0


def main(out):
    os.makedirs(out, exist_ok=True)
    refs = {}

    torch.manual_seed(0)
    policy = mlp().eval()
    trained = mlp().eval()
    obs = torch.randn(5, 4)
    with torch.no_grad():
        refs["mlp_obs"] = obs
        refs["mlp_action"] = policy(obs)
        refs["mlp_action_trained"] = trained(obs)
    torch.jit.script(policy).save(os.path.join(out, "mlp_policy.pt"))
    torch.save(torch.arange(3.0), os.path.join(out, "saved_tensor.pt"))
    torch.save(policy, os.path.join(out, "saved_module.pt"))
    torch.save(policy.state_dict(), os.path.join(out, "saved_state_dict.pt"))
    memmap(from_module(trained), os.path.join(out, "mlp_ckpt"))

    torch.manual_seed(1)
    gru = GRUPolicy().eval()
    gru_trained = GRUPolicy().eval()
    obs = torch.randn(3, 6, 4)
    hidden = torch.randn(1, 3, 8)
    with torch.no_grad():
        refs["gru_obs"] = obs
        refs["gru_hidden"] = hidden
        refs["gru_action"], refs["gru_next_hidden"] = gru(obs, hidden)
        refs["gru_action_trained"], refs["gru_next_hidden_trained"] = gru_trained(obs, hidden)
    torch.jit.script(gru).save(os.path.join(out, "gru_policy.pt"))
    memmap(from_module(gru_trained), os.path.join(out, "gru_ckpt"))

    torch.manual_seed(2)
    ac = ActorCritic().eval()
    obs = torch.randn(7, 4)
    with torch.no_grad():
        result = ac(obs)
        refs["ac_obs"] = obs
        refs["ac_action"] = result["action"]
        refs["ac_state_value"] = result["state_value"]
    torch.jit.script(ac).save(os.path.join(out, "ac_policy.pt"))

    torch.jit.script(Refs(refs)).save(os.path.join(out, "refs.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
