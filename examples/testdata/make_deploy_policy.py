#!/usr/bin/python3
"""Builds the TorchScript policy that examples/deploy_policy.cc deploys, as a Python user would.

Run at build time by the genrule in examples/BUILD.bazel with Debian's python3-torch:
  /usr/bin/python3 make_deploy_policy.py OUT_DIR
writes into OUT_DIR:
  policy.pt   torch.jit.script(RecurrentActorCritic()).save(...): forward(observation, hidden)
              returns {"action", "state_value", "next.hidden"} (a Dict[str, Tensor])
  rollout.pt  a scripted container whose buffers are the observations of a rollout of 8 steps
              of 3 environments and what Python's policy returned at every step, to compare with.
"""

import os
import sys
from typing import Dict

import torch
from torch import nn

STEPS, ENVS, OBS, HIDDEN = 8, 3, 4, 16


class RecurrentActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        # Observation normalisation learnt during training, deployed as buffers.
        self.register_buffer("obs_loc", torch.linspace(-0.5, 0.5, OBS))
        self.register_buffer("obs_scale", torch.linspace(1.0, 2.0, OBS))
        self.core = nn.GRUCell(OBS, HIDDEN)
        self.actor = nn.Linear(HIDDEN, 2)
        self.critic = nn.Linear(HIDDEN, 1)

    def forward(self, observation: torch.Tensor, hidden: torch.Tensor) -> Dict[str, torch.Tensor]:
        h = self.core((observation - self.obs_loc) / self.obs_scale, hidden)
        return {"action": torch.tanh(self.actor(h)), "state_value": self.critic(h),
                "next.hidden": h}


class Buffers(nn.Module):
    def __init__(self, tensors):
        super().__init__()
        for k, v in tensors.items():
            self.register_buffer(k, v.detach().clone())

    def forward(self) -> int:
        return 0


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    policy = RecurrentActorCritic().eval()
    observations = torch.randn(STEPS, ENVS, OBS)
    actions, values, hiddens = [], [], []
    h = torch.zeros(ENVS, HIDDEN)
    with torch.no_grad():
        for t in range(STEPS):
            result = policy(observations[t], h)
            h = result["next.hidden"]
            actions.append(result["action"])
            values.append(result["state_value"])
            hiddens.append(h)
    torch.jit.script(policy).save(os.path.join(out, "policy.pt"))
    refs = {"observation": observations, "action": torch.stack(actions),
            "state_value": torch.stack(values), "next_hidden": torch.stack(hiddens)}
    torch.jit.script(Buffers(refs)).save(os.path.join(out, "rollout.pt"))


if __name__ == "__main__":
    main(sys.argv[1])
