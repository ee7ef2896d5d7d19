"""The recurrent agent's (R2D2's) throughput on this machine, as ratios against baselines measured
in the same run.

1. Acting: env steps/s of one recurrent actor over one MLP (DQN) actor's, on the same env with the
   same number of envs (``--envs``), for POPGym's RepeatPreviousEasy and CartPole-v1. Each actor is
   the :class:`~border_py.actors.sampler.Sampler` an actor process runs, built as one builds it
   (:func:`~border_py.actors.process.build_sampler`: the shipped ``agent=r2d2`` / ``agent=dqn``
   configs, exploring on the run's schedule), stepped in this process without the transport: DQN's
   draws batches of ``n_buffer`` n-step transitions, R2D2's steps its envs with each env's
   recurrent state and cuts sequences. R2D2 acts in numpy (:mod:`border_py.agents.
   recurrent_inference`); ``r2d2_torch`` is the same actor stepping the torch module (the path
   before it). Beside each rate, the microseconds of one policy call on ``--envs`` observations.
2. Learning: sequences/s of R2D2's learner fed as in a run over a bare loop of the same update on
   one batch converted beforehand, as ``benchmarks/learner_pipeline.py`` measures DQN's (the
   recipe ``experiment=r2d2_popgym_repeatpreviouseasy``: LSTM 64, 32 sequences of 4 + 16 + 1
   steps; prioritized sequence replay, ``--fill`` sequences an R2D2 actor cut from the env):

   - ``bare``: ``update_tensors`` on one :class:`~border_py.agents.sequence_batch.SequenceBatch`
     made beforehand, nothing else;
   - ``fed``: per opt step, the sequences the actors deliver at the recipe's replay ratio
     (``trainer.replay_ratio``: opt steps x batch size per env step; the sequences an actor cut,
     pushed in the batches it emitted them in), then one opt step: ``learn_step`` (sample, convert,
     update, priorities: ``fed_no_prefetch``) or the prefetcher's (``fed_depth_<d>``,
     ``trainer.prefetch=d``).

Phases alternate, each ``--seconds`` long, ``--repeats`` times; each figure is the best of its
repeats, and ``fed_vs_bare_by_repeat`` gives each repeat's ratios (phases side by side, under the
same load: their spread is the figure's) and ``fed_vs_bare_median`` their medians (on a loaded
machine, many short repeats' medians are steadier than the best of a few). Beside each learning rate, the process's CPU
milliseconds per opt step (the least of the repeats): on a shared machine the wall clock also
counts the time other processes held the cores, the CPU time does not, so
``fed_vs_bare_cpu_no_prefetch`` (the bare loop's CPU time per step over the fed one's) is the
ratio a quiet core would give without prefetch. torch and numpy's BLAS run one thread each, as in
actors and the learner.

    python benchmarks/recurrent_throughput.py [--seconds 5] [--repeats 3] [--envs 8] [--depth 1 2]
        [--only acting|learning]

Prints the machine, the date and the load average first; ends with one line ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from learner_pipeline import opts_per_second  # the same clock as DQN's figures (same folder)
from zoo_table import cpu_model

from border_py.actors.clock import LocalClock
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.factory import build_agent
from border_py.agents.r2d2 import R2D2
from border_py.agents.sequence_batch import SequenceBatch
from border_py.config import config_dir
from border_py.overrides import to_plain
from border_py.processes.children import worker_cpu
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.sequences import Sequences
from border_py.trainers.loop import learn_step
from border_py.trainers.prefetch import Prefetcher

POPGYM = ["env=popgym", "env.id=popgym-RepeatPreviousEasy-v0"]
ENVS = {"RepeatPreviousEasy": POPGYM, "CartPole-v1": ["env=cartpole"]}
RECIPE = ["experiment=r2d2_popgym_repeatpreviouseasy", "replay_buffer=sequence_prioritized"]


def load_config(overrides: list[str]) -> dict[str, Any]:
    """The resolved run config of ``overrides`` (as ``border train`` composes it)."""
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return to_plain(compose("train", overrides=overrides))


def sampler(config: dict[str, Any], n_envs: int) -> Sampler:
    """One actor's sampler, as an actor process builds it."""
    n_buffer = config["actor_manager"]["n_buffer"]
    spec = ActorSpec(0, 0, n_envs, n_buffer, None, seed=int(config["seed"]))
    return build_sampler(spec, config, LocalClock())


def actor_rate(
    config: dict[str, Any], n_envs: int, seconds: float, torch_step: bool, calls: int
) -> tuple[float, float]:
    """Env steps/s of one actor's sampler over about ``seconds`` (after 100 vector steps off the
    clock), and the microseconds of one exploring policy call on its ``n_envs`` observations
    after that (the best mean of 5 runs of ``calls`` calls); ``torch_step``: a recurrent agent
    steps its torch module instead of numpy."""
    actor = sampler(config, n_envs)
    agent = actor.agent
    if torch_step:
        assert isinstance(agent, R2D2)
        agent.fast_step = None
    n_buffer = config["actor_manager"]["n_buffer"]
    stats = SampleStats()

    def block() -> None:  # what an actor does between two sends
        if actor.stream is not None:
            for _ in range(max(1, n_buffer // n_envs)):
                actor.step(stats)
        else:
            actor.sample(n_buffer, stats)

    try:
        while stats.env_steps < 100 * n_envs:
            block()
        counted, start = stats.env_steps, time.perf_counter()
        while time.perf_counter() - start < seconds:
            block()
        rate = (stats.env_steps - counted) / (time.perf_counter() - start)
        return rate, policy_microseconds(actor, calls)
    finally:
        actor.close()


def policy_microseconds(actor: Sampler, calls: int) -> float:
    """Microseconds of one exploring policy call of ``actor``'s agent on its envs' observations
    (the best mean of 5 runs of ``calls`` calls)."""
    agent, obs = actor.agent, actor.env.obs
    call: Callable[[], object]
    if isinstance(agent, R2D2):
        n = len(obs)
        state, action, reward = agent.initial_state(n), np.zeros(n, np.int64), np.zeros(n)
        call = lambda: agent.act_recurrent(obs, state, action, reward, True)  # noqa: E731
    else:
        call = lambda: agent.act(obs, True)  # noqa: E731
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - start) / calls)
    return 1e6 * best


def acting(args: argparse.Namespace) -> dict[str, Any]:
    """Table 1: each env's actors, their env steps/s and policy calls, and the ratios."""
    out: dict[str, Any] = {}
    for env, env_keys in ENVS.items():
        keys = [*env_keys, f"actor_manager.n_envs_per_actor={args.envs}"]
        actors = {
            "dqn": (load_config(["agent=dqn", *keys]), False),
            "r2d2": (load_config(["agent=r2d2", "replay_buffer=sequence", *keys]), False),
            "r2d2_torch": (load_config(["agent=r2d2", "replay_buffer=sequence", *keys]), True),
        }
        best: dict[str, float] = {}
        calls: dict[str, float] = {}
        for repeat in range(args.repeats):
            for name, (config, torch_step) in actors.items():
                rate, us = actor_rate(config, args.envs, args.seconds, torch_step, args.calls)
                best[name] = max(best.get(name, 0.0), rate)
                calls[name] = min(calls.get(name, float("inf")), us)
                print(
                    f"repeat {repeat}: {env:>20} {name:>10} {rate:9.0f} env steps/s,"
                    f" policy call {us:7.1f} us",
                    flush=True,
                )
        figures: dict[str, Any] = {f"{k}_steps_per_sec": round(v) for k, v in best.items()}
        figures |= {f"{k}_policy_us": round(v, 1) for k, v in calls.items()}
        figures["r2d2_vs_dqn"] = round(best["r2d2"] / best["dqn"], 3)
        figures["r2d2_torch_vs_dqn"] = round(best["r2d2_torch"] / best["dqn"], 3)
        figures["numpy_vs_torch_policy"] = round(calls["r2d2_torch"] / calls["r2d2"], 2)
        print(
            f"{env:>20}: recurrent actor {figures['r2d2_vs_dqn']:.3f}x the MLP actor's env steps/s"
            f" (torch step: {figures['r2d2_torch_vs_dqn']:.3f}x); policy calls"
            f" {calls['r2d2']:.0f} us numpy, {calls['r2d2_torch']:.0f} us torch,"
            f" {calls['dqn']:.0f} us DQN's"
        )
        out[env] = figures
    return out


class Feed:
    """Pushes, per opt step, the sequences an actor cut over the env steps the gate allows per
    opt step (``batch_size / replay_ratio``), in the batches it emitted them in (a pool cut
    beforehand, cycled)."""

    def __init__(
        self,
        buffer: PrioritizedSequenceReplayBuffer,
        pool: list[tuple[int, Sequences]],
        per_opt: float,
    ) -> None:
        self.buffer, self.pool, self.per_opt = buffer, pool, per_opt
        self.next, self.owed = 0, 0.0

    def __call__(self, lock: Any) -> None:
        self.owed += self.per_opt
        while self.owed >= self.pool[self.next][0]:
            steps, sequences = self.pool[self.next]
            with lock:
                self.buffer.push(sequences)
            self.owed -= steps
            self.next = (self.next + 1) % len(self.pool)


def cut(config: dict[str, Any], n_envs: int, rows: int) -> list[tuple[int, Sequences]]:
    """At least ``rows`` sequences an R2D2 actor cut from the env: each batch it emitted with the
    env steps it took since the one before."""
    actor, stats = sampler(config, n_envs), SampleStats()
    pool: list[tuple[int, Sequences]] = []
    made, since = 0, 0
    try:
        while made < rows:
            before = stats.env_steps
            out = actor.step(stats)
            since += stats.env_steps - before
            if out is not None:
                pool.append((since, out))
                made, since = made + len(out), 0
    finally:
        actor.close()
    return pool


def learner_phase(
    name: str,
    args: argparse.Namespace,
    config: dict[str, Any],
    buffer: PrioritizedSequenceReplayBuffer,
    pool: list[tuple[int, Sequences]],
    spaces: Any,
    depth: int = 0,
) -> tuple[float, float]:
    """Opt steps/s of one phase (a fresh agent each time, as DQN's figures are made) and the
    process's CPU milliseconds per opt step over the same steps (all its threads)."""
    agent = build_agent(config, spaces, args.device, int(config["seed"]))
    assert isinstance(agent, R2D2)
    device = agent.device
    if name == "bare":
        prepared = SequenceBatch.of(buffer.sample(agent.batch_size), device)
        return timed(lambda: agent.update_tensors(prepared), args.seconds, device)
    per_opt = agent.batch_size / float(config["trainer"]["replay_ratio"])  # env steps per opt
    feed = Feed(buffer, pool, per_opt)
    if depth == 0:
        nolock = _NoLock()
        step = lambda: (feed(nolock), learn_step(agent, buffer))  # noqa: E731
        return timed(step, args.seconds, device)
    prefetcher = Prefetcher(agent, buffer, depth)  # type: ignore[arg-type]  # sequences' update
    try:
        step = lambda: (feed(prefetcher.lock), prefetcher.learn())  # noqa: E731
        return timed(step, args.seconds, device)
    finally:
        prefetcher.close(flush=True)


def timed(step: Callable[[], Any], seconds: float, device: torch.device) -> tuple[float, float]:
    """:func:`opts_per_second` of ``step`` (3 steps off the clock) and the process's CPU
    milliseconds per step over the timed steps (on a loaded machine the wall clock also counts
    the time other processes held the cores; the CPU time does not)."""
    counted = _Counted(step)
    rate = opts_per_second(counted, seconds, device, 3)
    return rate, 1e3 * counted.cpu / max(1, counted.calls - 3)


class _Counted:
    """``step`` counting its calls and, after the first three, its process CPU time."""

    def __init__(self, step: Callable[[], Any]) -> None:
        self.step, self.calls, self.cpu = step, 0, 0.0

    def __call__(self) -> None:
        start = time.process_time()
        self.step()
        self.calls += 1
        if self.calls > 3:
            self.cpu += time.process_time() - start


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def learning(args: argparse.Namespace) -> dict[str, Any]:
    """Table 2: the fed learner's sequences/s over the bare loop's, and CPU time per opt step."""
    config = load_config([*RECIPE, f"actor_manager.n_envs_per_actor={args.envs}"])
    actor = sampler(config, 1)
    spaces = (actor.env.observation_space, actor.env.action_space)
    actor.close()
    pool = cut(config, args.envs, args.fill + args.pool)
    buffer = PrioritizedSequenceReplayBuffer(args.capacity, seed=0)
    filled = 0
    while filled < args.fill:
        buffer.push(pool[0][1])
        filled += len(pool.pop(0)[1])
    batch_size = int(config["agent"]["batch_size"])
    phases = [("bare", 0), ("fed_no_prefetch", 0)] + [(f"fed_depth_{d}", d) for d in args.depth]
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    by_repeat: dict[str, list[float]] = {name: [] for name, _ in phases[1:]}
    for repeat in range(args.repeats):
        rates = {}
        for name, depth in phases:
            rate, ms = learner_phase(name, args, config, buffer, pool, spaces, depth)
            rates[name] = rate
            best[name] = max(best.get(name, 0.0), rate)
            cpu[name] = min(cpu.get(name, float("inf")), ms)
            print(
                f"repeat {repeat}: {name:>16} {rate * batch_size:8.1f} sequences/s,"
                f" {ms:6.2f} CPU ms per opt step",
                flush=True,
            )
        for name in by_repeat:  # phases run side by side: the same load
            by_repeat[name].append(round(rates[name] / rates["bare"], 3))
    bare = best["bare"]
    out: dict[str, Any] = {f"{k}_seq_per_sec": round(v * batch_size, 1) for k, v in best.items()}
    out |= {f"{k}_cpu_ms_per_opt": round(v, 3) for k, v in cpu.items()}
    out["batch_size"] = batch_size
    out["fed_vs_bare_no_prefetch"] = round(best["fed_no_prefetch"] / bare, 3)
    for d in args.depth:
        out[f"fed_vs_bare_depth_{d}"] = round(best[f"fed_depth_{d}"] / bare, 3)
    out["fed_vs_bare"] = max(out[f"fed_vs_bare_depth_{d}"] for d in args.depth)
    out["fed_best"] = max(by_repeat, key=lambda name: best[name])
    out["fed_vs_bare_best"] = round(best[out["fed_best"]] / bare, 3)
    out["fed_vs_bare_by_repeat"] = by_repeat
    out["fed_vs_bare_median"] = {k: round(float(np.median(v)), 3) for k, v in by_repeat.items()}
    out["fed_vs_bare_cpu_no_prefetch"] = round(cpu["bare"] / cpu["fed_no_prefetch"], 3)
    print(
        f"{'':>26}vs bare: no prefetch {out['fed_vs_bare_no_prefetch']:.3f}x,"
        f" prefetch {out['fed_vs_bare']:.3f}x; CPU time per opt step, no prefetch:"
        f" {out['fed_vs_bare_cpu_no_prefetch']:.3f}x the bare loop's rate"
    )
    return out


def machine() -> dict[str, Any]:
    """Where and when: the CPU, its cores, the OS, torch's and numpy's versions, the UTC time,
    the load averages (1, 5, 15 minutes) at the start."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "os": platform.system(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per phase and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--envs", type=int, default=8, help="envs per actor")
    parser.add_argument("--depth", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--capacity", type=int, default=10_000, help="sequences in replay")
    parser.add_argument("--fill", type=int, default=2_000, help="sequences in replay at the start")
    parser.add_argument("--pool", type=int, default=1_000, help="sequences the feed cycles through")
    parser.add_argument("--calls", type=int, default=300, help="policy calls per timing run")
    parser.add_argument("--device", default="cpu", help="the learner's: cpu or cuda")
    parser.add_argument("--only", choices=["acting", "learning"], help="one table (default: both)")
    parser.add_argument("--tiny", action="store_true", help="a few seconds in all (the test's)")
    args = parser.parse_args()
    if args.tiny:
        args.seconds, args.repeats, args.calls, args.depth = 0.2, 1, 20, [1]
        args.fill, args.pool = 64, 32
    worker_cpu()
    where = machine()
    print(
        f"Measured {where['date']} on {where['cpu']} ({where['cores']} cores, {where['os']}),"
        f" torch {where['torch']}, numpy {where['numpy']}; load average {where['load']}",
        flush=True,
    )
    result: dict[str, Any] = {"machine": where}
    for table, run in (("acting", acting), ("learning", learning)):
        if args.only in (None, table):
            result[table] = run(args)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
