"""What flushing float denormals to zero is worth to a learner: the MinAtar recipe's DQN update and
its Adam step, with ``torch.set_flush_denormal`` on (what every process of a run does) and off,
alternately in this one process, after the agent has trained as a run's learner would.

The agent of ``experiment=dqn_minatar_breakout`` (plus any Hydra overrides) first learns as in a
run, with denormals kept (torch's default): it plays the recipe's ``n_envs_per_actor`` envs
epsilon-greedily and makes one update per ``batch_size / replay_ratio`` env steps after the
warm-up, ``--train`` updates in all (1-step transitions: the recipe's actors send 3-step ones).
Parameters whose gradient stays zero for a while (the weights of a feature that is off for every
sampled grid, a unit that does not fire) see Adam's first moment decay by 0.9 a step into
float32's denormal range (below 1.2e-38), where x86 arithmetic takes a slow path and from which
rounding never brings it to zero. Then it counts the denormal moments and times the Adam step
alone (on the last update's gradients) and whole ``update_tensors`` calls (one sampled batch),
each way ``--repeats`` times ``--calls`` calls, alternately, and keeps the best mean of each. One
torch thread, as in the learner.

    python benchmarks/denormals_bench.py [--train 3000] [--calls 300] [--repeats 5] [overrides...]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import torch
from async_throughput import load_config
from cli_args import parse_with_overrides

from border_py.agents.batch import TensorBatch
from border_py.processes.children import worker_cpu
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.transitions import Transitions

SMALLEST_NORMAL = float(torch.finfo(torch.float32).tiny)


def best_mean_us(fn: Callable[[], object], calls: int, repeats: int, flush: bool) -> float:
    """The best mean microseconds per call of ``fn`` over ``repeats`` runs of ``calls``."""
    torch.set_flush_denormal(flush)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def denormal_share(tensors: list[torch.Tensor]) -> float:
    """The share of the elements of ``tensors`` that are denormal (non-zero, below the smallest
    normal float32)."""
    values = torch.cat([t.detach().flatten().abs() for t in tensors])
    return float(((values > 0) & (values < SMALLEST_NORMAL)).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=3000, help="updates before the timing")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("overrides", nargs="*")
    args = parse_with_overrides(parser)
    worker_cpu()
    torch.set_flush_denormal(False)  # train as torch does by default
    config = load_config(["experiment=dqn_minatar_breakout", *args.overrides])
    parts = build_components(config, RunSettings.of(config), 0)
    agent, buffer = parts.agent, parts.buffer

    def batch() -> TensorBatch:
        return TensorBatch.of(buffer.sample(agent.batch_size), agent.device, True)

    env = parts.env_factory.make_vector(config["actor_manager"]["n_envs_per_actor"], seed=0)
    per_opt = agent.batch_size / config["trainer"]["replay_ratio"]
    warmup, gamma = config["trainer"]["warmup_period"], config["agent"]["gamma"]
    env_steps, updates, owed = 0, 0, 0.0
    while updates < args.train:
        obs = env.obs.copy()
        actions = agent.act(obs, explore=True)
        step = env.step(actions)
        discount = np.where(step.terminated, 0.0, gamma).astype(np.float32)
        reward = step.reward.astype(np.float32)
        buffer.push(Transitions(obs, actions, reward, step.next_obs, discount))
        env_steps += len(actions)
        owed += len(actions) / per_opt if env_steps > warmup else 0.0
        while owed >= 1 and updates < args.train:
            agent.update_tensors(batch())
            updates, owed = updates + 1, owed - 1
    env.close()
    optimizer = agent.optimizers["q"]
    first = denormal_share([s["exp_avg"] for s in optimizer.state.values()])
    second = denormal_share([s["exp_avg_sq"] for s in optimizer.state.values()])
    fixed = batch()
    figures: dict[str, float] = {
        "env_steps": env_steps,
        "denormal_share_first_moments": first,
        "denormal_share_second_moments": second,
    }
    for flush in (False, True, False, True):  # alternately: the machine's speed drifts
        way = "flushed" if flush else "kept"
        step = best_mean_us(optimizer.step, args.calls, args.repeats, flush)
        update = best_mean_us(lambda: agent.update_tensors(fixed), args.calls, args.repeats, flush)
        figures[f"adam_step_{way}_us"] = min(figures.get(f"adam_step_{way}_us", step), step)
        figures[f"update_{way}_us"] = min(figures.get(f"update_{way}_us", update), update)
    torch.set_flush_denormal(True)
    figures["adam_step_kept_vs_flushed"] = (
        figures["adam_step_kept_us"] / figures["adam_step_flushed_us"]
    )
    figures["update_kept_vs_flushed"] = figures["update_kept_us"] / figures["update_flushed_us"]
    print(
        f"after {args.train} updates ({env_steps:,} env steps) with denormals kept:"
        f" {100 * first:.1f}% of Adam's first moments and {100 * second:.1f}% of its second"
        " moments are denormal"
    )
    for what in ("adam_step", "update"):
        kept, flushed = figures[f"{what}_kept_us"], figures[f"{what}_flushed_us"]
        print(f"{what}: kept {kept:.0f} us, flushed {flushed:.0f} us ({kept / flushed:.2f}x)")
    print("RESULT " + json.dumps({k: round(v, 4) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
