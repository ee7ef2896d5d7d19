"""The learner's update on CPU: border-py's :class:`~border_py.agents.optim.Adam` against
``torch.optim.Adam(fused=True)`` with ``torch.nn.utils.clip_grad_norm_`` (what agents used
before), as ratios measured in this one process.

Two figures, for DQN's shipped network (CartPole-v1 shapes, 128x128) and batch ``--batch-size``:

- the optimizer step alone (zero the gradients, then clip to norm 10 and step) on gradients of
  the network's size;
- a whole ``DQN.update`` from a fixed batch, with each optimizer (the torch one swapped into the
  agent through a thin adapter).

Both ways run alternately, ``--repeats`` times ``--calls`` calls each; each figure is the best
mean per call. One torch thread, as in the learner.

    python benchmarks/update_bench.py [--calls 2000] [--repeats 5] [--batch-size 128]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.dqn import DQN
from border_py.agents.optim import Adam
from border_py.transitions import Transitions

MAX_NORM = 10.0


class TorchAdam:
    """``torch.optim.Adam(fused=True)`` behind this package's optimizer interface (the baseline)."""

    def __init__(self, params: list[torch.Tensor], lr: float) -> None:
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=lr, fused=True)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.params, MAX_NORM)
        self.optimizer.step()


def best_mean(fn: Callable[[], object], calls: int) -> float:
    """Mean seconds per call of ``fn`` over ``calls`` calls (after 50 unmeasured ones)."""
    for _ in range(50):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compare(ways: dict[str, Callable[[], object]], calls: int, repeats: int) -> dict[str, float]:
    """Best mean per call of each way, the ways alternating within each repeat."""
    best = dict.fromkeys(ways, float("inf"))
    for _ in range(repeats):
        for name, fn in ways.items():
            best[name] = min(best[name], best_mean(fn, calls))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(1)

    def agent() -> DQN:
        return DQN(
            gym.spaces.Box(-1, 1, (4,)),
            gym.spaces.Discrete(2),
            hidden_sizes=[128, 128],  # conf/agent/dqn.yaml's
            batch_size=args.batch_size,
            max_grad_norm=MAX_NORM,
        )

    ours, theirs = agent(), agent()
    theirs.optimizers["q"] = TorchAdam(list(theirs.q.parameters()), 2.3e-3)  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    n = args.batch_size
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    batch = Transitions(
        obs,
        rng.integers(0, 2, n),
        rng.normal(size=n).astype(np.float32),
        rng.normal(size=(n, 4)).astype(np.float32),
        np.full(n, 0.97, np.float32),
    )
    for a in (ours, theirs):  # gradients of the network's size for the step-alone figure
        a.update(batch)
        a.q(torch.as_tensor(obs)).sum().backward()

    def step_of(optimizer: object) -> Callable[[], None]:
        grads = [p.grad.clone() for p in optimizer.params]  # type: ignore[attr-defined]

        def step() -> None:
            optimizer.zero_grad()  # type: ignore[attr-defined]
            for p, g in zip(optimizer.params, grads, strict=True):  # type: ignore[attr-defined]
                p.grad = g.clone()
            optimizer.step()  # type: ignore[attr-defined]

        return step

    assert isinstance(ours.optimizers["q"], Adam)
    step = compare(
        {"torch": step_of(theirs.optimizers["q"]), "border": step_of(ours.optimizers["q"])},
        args.calls,
        args.repeats,
    )
    update = compare(
        {"torch": lambda: theirs.update(batch), "border": lambda: ours.update(batch)},
        args.calls,
        args.repeats,
    )
    print(f"DQN 128x128, batch {n}, one torch thread; best mean of {args.repeats} x {args.calls}")
    print_figures(step, update)


def print_figures(step: dict[str, float], update: dict[str, float]) -> None:
    """The table of both figures (µs per call and border's ratio to torch) and the RESULT line."""
    print(f"{'':34s} {'torch (µs)':>11s} {'border (µs)':>12s} {'ratio':>6s}")
    result = {}
    for key, name, figures in (
        ("optimizer_step", "zero_grad + clip + Adam step", step),
        ("dqn_update", "whole DQN.update", update),
    ):
        t, b = figures["torch"] * 1e6, figures["border"] * 1e6
        result[f"{key}_ratio_border_vs_torch"] = round(b / t, 3)
        print(f"{name:34s} {t:11.1f} {b:12.1f} {b / t:6.2f}")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
