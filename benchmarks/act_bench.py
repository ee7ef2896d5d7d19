"""Actor inference latency: ways of evaluating a small MLP policy on a numpy batch, as ratios
against calling the torch module (the path actors used before ``agents/inference.py``).

For DQN's Q-network (CartPole-v1 shapes, the shipped 128x128) and SAC's policy (HalfCheetah-v5
shapes, 256x256), and batch sizes ``--batch-sizes`` (1 16 64), each option turns a float32 numpy
batch of observations into the network's numpy outputs:

- ``module``: ``torch.no_grad()`` and the ``nn.Sequential`` call (the baseline, ratio 1);
- ``functional``: torch's functional ops (``F.linear``, ``torch.relu``) on detached views of the
  weights, no grad-mode context (the path actors used before numpy);
- ``preallocated``: ``torch.inference_mode`` and ``torch.addmm(..., out=...)`` into buffers kept
  per batch size;
- ``MLPInference``: the shipped path, numpy matmuls on views of the weights
  (:mod:`border_py.agents.inference`).

A column says whether each option's outputs are bit-identical to the module's; numpy's are not
(another BLAS sums in another order) and another column counts the rows of 4096 observations
whose greedy action differs. A second table times the DQN options on 16 rows the way an actor
calls them: each call between steps of 16 CartPole envs, which evict the policy's code from the
CPU's caches. torch and numpy's BLAS run one thread each, as in actor processes
(:func:`border_py.processes.children.worker_cpu`). Each latency is the best mean over ``--repeats``
runs of ``--calls`` calls.

    python benchmarks/act_bench.py [--calls 2000] [--repeats 5] [--batch-sizes 1 16 64]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.dqn import DQN
from border_py.agents.inference import MLPInference
from border_py.agents.sac import SAC
from border_py.envs.vector import VectorEnv
from border_py.processes.children import worker_cpu

Forward = Callable[[np.ndarray], np.ndarray]


def module_call(net: nn.Module) -> Forward:
    def forward(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return net(torch.as_tensor(obs, dtype=torch.float32)).cpu().numpy()

    return forward


def linears(net: nn.Sequential) -> list[nn.Linear]:
    return [m for m in net if isinstance(m, nn.Linear)]


def preallocated(net: nn.Sequential) -> Forward:
    layers = [(layer.weight.detach().t(), layer.bias.detach()) for layer in linears(net)]
    buffers: dict[int, list[torch.Tensor]] = {}

    def forward(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            outs = buffers.get(len(obs))
            if outs is None:
                outs = buffers[len(obs)] = [torch.empty(len(obs), w.shape[1]) for w, _ in layers]
            x = torch.from_numpy(obs)
            for i, ((w, b), out) in enumerate(zip(layers, outs, strict=True)):
                torch.addmm(b, x, w, out=out)
                if i < len(layers) - 1:
                    out.relu_()
                x = out
            return x.numpy().copy()  # the buffer is reused by the next call

    return forward


def functional(net: nn.Sequential) -> Forward:
    layers = [(layer.weight.detach(), layer.bias.detach()) for layer in linears(net)]

    def forward(obs: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(obs)
        for i, (w, b) in enumerate(layers):
            x = F.linear(x, w, b)
            if i < len(layers) - 1:
                x = torch.relu(x)
        return x.numpy()

    return forward


def latency(forward: Forward, obs: np.ndarray, calls: int, repeats: int) -> float:
    """Best mean seconds per call over ``repeats`` runs of ``calls`` calls."""
    forward(obs)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            forward(obs)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def latency_between_env_steps(forward: Forward, steps: int, repeats: int) -> float:
    """Best mean seconds per call of ``forward`` on the observations of 16 CartPole envs, each
    call followed by a step of the envs with its greedy actions (only the calls are timed)."""
    env = VectorEnv([gym.make("CartPole-v1") for _ in range(16)], seed=0)
    best = float("inf")
    for _ in range(repeats):
        spent = 0.0
        for _ in range(steps):
            start = time.perf_counter()
            q = forward(env.obs)
            spent += time.perf_counter() - start
            env.step(q.argmax(axis=1))
        best = min(best, spent / steps)
    env.close()
    return best


def networks() -> dict[str, tuple[nn.Sequential, int]]:
    """name -> (plain MLP, observation width)."""
    cartpole = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    dqn = DQN(cartpole, gym.spaces.Discrete(2), hidden_sizes=[128, 128])
    cheetah = gym.spaces.Box(-np.inf, np.inf, (17,), np.float64)
    sac = SAC(cheetah, gym.spaces.Box(-1.0, 1.0, (6,), np.float32), hidden_sizes=[256, 256])
    return {
        "DQN Q-network 4-128-128-2": (dqn.q, 4),
        "SAC policy 17-256-256-12": (sac.policy.body, 17),
    }


def slug(name: str) -> str:
    """A network's name as a RESULT key part: ``DQN Q-network 4-128-128-2`` -> ``dqn_q_network_4_128_128_2``."""
    return re.sub(r"\W+", "_", name).strip("_").lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args()
    worker_cpu()
    rng = np.random.default_rng(0)
    result: dict[str, float] = {}  # ratio to module, per network, option and batch
    for name, (net, width) in networks().items():
        fast = MLPInference.of(net)
        assert fast is not None
        options: dict[str, Forward] = {
            "module": module_call(net),
            "functional": functional(net),
            "preallocated": preallocated(net),
            "MLPInference": fast,
        }
        batches = {b: rng.uniform(-1, 1, (b, width)).astype(np.float32) for b in args.batch_sizes}
        many = rng.uniform(-1, 1, (4096, width)).astype(np.float32)
        greedy = options["module"](many).argmax(axis=1)
        base = {
            b: latency(options["module"], obs, args.calls, args.repeats)
            for b, obs in batches.items()
        }
        print(f"\n{name}: per-call latency in microseconds (ratio to module)")
        print(
            f"{'option':<14}"
            + "".join(f"{f'batch {b}':>22}" for b in batches)
            + "  bit-identical  other actions"
        )
        for option, forward in options.items():
            cells, identical = [], True
            for batch, obs in batches.items():
                identical &= bool(np.array_equal(forward(obs), options["module"](obs)))
                seconds = (
                    base[batch]
                    if option == "module"
                    else latency(forward, obs, args.calls, args.repeats)
                )
                cells.append(f"{seconds * 1e6:9.1f} us ({seconds / base[batch]:4.2f}x)")
                if option != "module":
                    key = f"{slug(name)}_{option}_batch_{batch}_vs_module"
                    result[key] = round(seconds / base[batch], 3)
            differ = int(np.count_nonzero(forward(many).argmax(axis=1) != greedy))
            print(
                f"{option:<14}"
                + "".join(f"{c:>22}" for c in cells)
                + f"  {'yes' if identical else 'no':>13}  {differ:>8} / {len(many)}"
            )
        if width == 4:  # CartPole's Q-network: also as an actor calls it
            print("\n  16 rows, each call between steps of 16 CartPole envs (as in an actor):")
            between = {o: latency_between_env_steps(f, args.calls, 3) for o, f in options.items()}
            for option, seconds in between.items():
                ratio = seconds / between["module"]
                print(f"  {option:<14}{seconds * 1e6:9.1f} us ({ratio:4.2f}x)")
                if option != "module":
                    result[f"{slug(name)}_{option}_between_env_steps_vs_module"] = round(ratio, 3)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
