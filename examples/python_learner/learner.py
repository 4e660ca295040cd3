"""The Python learner of examples/python_learner: rank 0 of a Gloo group whose other ranks are
C++ actors (actors.cc). Each round it sends its policy's parameters to every actor, receives one
rollout from each with Python tensordict's protocol (td/distributed/python_peer.py's PlainTD,
leaf by leaf, pseudo-random tags), and takes one SGD step of behaviour cloning on a tiny
torch.nn.Linear policy. Exits 1 unless the loss fell.

Usage: learner.py <python_peer.py> <store file> <world size> <rounds> <steps> <obs> <act>
"""

import os
import sys

import torch


def main(argv):
    peer_path, store, world, rounds, steps, obs_dim, act_dim = (
        argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6]), int(argv[7]))
    sys.path.insert(0, os.path.dirname(os.path.abspath(peer_path)))
    from python_peer import PlainTD, connect  # noqa: E402

    torch.manual_seed(0)
    pg = connect(store, 0, world, timeout_s=60.0)
    policy = torch.nn.Linear(obs_dim, act_dim)
    opt = torch.optim.SGD(policy.parameters(), lr=0.1)
    losses = []
    for r in range(rounds):
        params = PlainTD()
        params.set(("weight",), policy.weight.detach().clone())
        params.set(("bias",), policy.bias.detach().clone())
        rollouts = []
        for actor in range(1, world):
            params.send(pg, actor, init_tag=0)
            # The receiving structure, as the actors build theirs (keys, shapes, dtypes).
            rollout = PlainTD()
            rollout.set(("observation",), torch.zeros(steps, obs_dim))
            rollout.set(("action",), torch.zeros(steps, act_dim))
            rollout.set(("expert_action",), torch.zeros(steps, act_dim))
            rollout.set(("next", "reward"), torch.zeros(steps, 1))
            rollout.set(("next", "done"), torch.zeros(steps, 1, dtype=torch.bool))
            rollout.set(("step",), torch.zeros(steps, dtype=torch.int64))
            rollout.recv(pg, actor, init_tag=1000, pseudo_rand=True)
            if not bool((rollout.get(("step",)) == r).all()):
                print(f"learner: actor {actor} sent step {rollout.get(('step',))}, "
                      f"expected {r}", file=sys.stderr)
                return 1
            rollouts.append(rollout)
        obs = torch.cat([ro.get(("observation",)) for ro in rollouts])
        target = torch.cat([ro.get(("expert_action",)) for ro in rollouts])
        done = torch.cat([ro.get(("next", "done")) for ro in rollouts])
        loss = torch.nn.functional.mse_loss(policy(obs), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"round {r}: {len(rollouts)} rollouts of {steps} steps, "
              f"{int(done.sum())} done, loss {loss.item():.4f}")
    pg.barrier().wait()
    if not losses[-1] < 0.5 * losses[0]:
        print(f"learner: the loss did not fall: {losses}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
