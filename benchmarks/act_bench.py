"""Actor inference latency: ways of evaluating a small MLP policy on a numpy batch, as ratios
against calling the torch module (the path actors used before ``agents/inference.py``).

For DQN's Q-network (CartPole-v1 shapes, the shipped 128x128) and SAC's policy (HalfCheetah-v5
shapes, 256x256), and batch sizes ``--batch-sizes`` (1 16 64), each option turns a float32 numpy
batch of observations into the network's numpy outputs:

- ``module``: ``torch.no_grad()`` and the ``nn.Sequential`` call (the baseline, ratio 1);
- ``MLPInference``: the shipped path, functional ops on detached views of the weights, no grad
  mode context (:mod:`border_py.agents.inference`);
- ``preallocated``: ``torch.inference_mode`` and ``torch.addmm(..., out=...)`` into buffers kept
  per batch size;
- ``numpy``: ``x @ W.T + b`` with numpy on views of the weights.

A column says whether each option's outputs are bit-identical to the module's (equal actions).
One torch thread, as in actor processes. Each latency is the best mean over ``--repeats`` runs of
``--calls`` calls. numpy's BLAS starts its own threads, which contend with other processes on a
busy machine; run with ``OPENBLAS_NUM_THREADS=1`` to measure it as an actor would have to use it.

    OPENBLAS_NUM_THREADS=1 python benchmarks/act_bench.py [--calls 2000] [--repeats 5] [--batch-sizes 1 16 64]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from border_py.agents.dqn import DQN
from border_py.agents.inference import MLPInference
from border_py.agents.sac import SAC

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


def numpy_matmuls(net: nn.Sequential) -> Forward:
    layers = [
        (layer.weight.detach().numpy().T, layer.bias.detach().numpy()) for layer in linears(net)
    ]

    def forward(obs: np.ndarray) -> np.ndarray:
        x = obs
        for i, (w, b) in enumerate(layers):
            x = x @ w + b
            if i < len(layers) - 1:
                np.maximum(x, 0, out=x)
        return x

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    for name, (net, width) in networks().items():
        fast = MLPInference.of(net)
        assert fast is not None
        options: dict[str, Forward] = {
            "module": module_call(net),
            "MLPInference": fast,
            "preallocated": preallocated(net),
            "numpy": numpy_matmuls(net),
        }
        batches = {b: rng.uniform(-1, 1, (b, width)).astype(np.float32) for b in args.batch_sizes}
        base = {
            b: latency(options["module"], obs, args.calls, args.repeats)
            for b, obs in batches.items()
        }
        print(f"\n{name}: per-call latency in microseconds (ratio to module)")
        print(
            f"{'option':<14}" + "".join(f"{f'batch {b}':>22}" for b in batches) + "  bit-identical"
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
            print(
                f"{option:<14}"
                + "".join(f"{c:>22}" for c in cells)
                + f"  {'yes' if identical else 'no'}"
            )


if __name__ == "__main__":
    main()
