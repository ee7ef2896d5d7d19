"""A pixel recipe against its bounds: each stage's own rate on this machine, the bound the recipe's
replay ratio makes of them, and what a real run of the recipe achieves against it.

``--recipe minatar`` is ``experiment=dqn_minatar_breakout``, ``--recipe atari``
``experiment=dqn_pong_async`` (the ``[atari]`` extra; ``env.backend=envpool`` needs ``[envpool]``);
Hydra overrides after it change the layout (``trainer=async actor_manager.n_actors=1
actor_manager.n_envs_per_actor=8``). Each stage runs in this process with one torch thread, on
the recipe's own components (``build_components``), for ``--seconds``:

- bare learner: opt/s of ``agent.update_tensors`` on one batch of the recipe's size, converted
  beforehand: the update alone (float denormals flushed to zero, as in the learner; then once
  more with them kept, to show what flushing them is worth); measured again after the run, since
  this machine's speed drifts: the bound is the mean of the two;
- learner: opt/s of ``learn_step`` on the recipe's replay buffer (prioritized, frames stored once,
  as the recipe says) filled with ``--fill`` transitions (the env's own under random actions;
  synthetic frames for a buffer that stacks them): what the learner does per opt step, sampling
  and priority updates included (not the actors' batches' ingestion: a few transitions per opt
  step);
- raw env: env steps/s of the vector env an actor steps (the recipe's backend and preprocessing,
  ``n_envs_per_actor`` envs), random actions, no policy;
- actor: microseconds per env step of an actor's parts (``async_throughput.actor_breakdown``): the
  policy call on ``n_envs_per_actor`` rows in the layout's ``policy_dtype``, exploration, the vector
  env's step, the n-step windows (not the frame encoding, the actor's priorities or the transport).

Both trainers' gates run ``batch_size / replay_ratio`` env steps per opt step, so the learner
bounds the env rate at its opt/s times that. The actors bound it at the actor cores over an actor's
cost per step: with ``trainer=async`` one core per actor, up to every core but the learner's
(``os.sched_getaffinity``, at least one); with ``trainer=serial`` one process does both, so the
run's bound is 1 / (1 / learner bound + 1 / actor bound). Then ``border train`` runs the recipe for
``--env-steps`` (the warm-up ``--warmup``: the recipe's, 2,000 env steps for Atari), with the
recipe's evaluation cadence, no final evaluation and at least ``--records`` training records, and
``pixel_run`` measures its steady env and opt steps/s and each process's CPU.

    python benchmarks/pixel_bounds.py --recipe minatar [--seconds 5] [--env-steps 30000] [overrides...]
    python benchmarks/pixel_bounds.py --recipe atari env.backend=envpool actor_manager.policy_dtype=bfloat16

Ends with one line ``RESULT {json}``: ``binding`` is the stage with the lower bound (``learner`` or
``actors``); ``criterion`` is the run's fed learner opt/s over the bare opt/s when the learner
binds, the actors' env steps/s over the raw env rate of their cores when they do.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from async_throughput import acting_dtype, actor_breakdown, load_config, random_actions
from cli_args import parse_with_overrides
from learner_pipeline import opts_per_second
from pixel_run import ROLES, RunFigures, run_train, steady_figures
from replay_bench import atari_rows

from border_py.agents.base import TensorUpdate
from border_py.agents.batch import TensorBatch
from border_py.config import build
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.processes.children import worker_cpu
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.trainers.loop import learn_step
from border_py.trainers.serial import SerialSettings
from border_py.transitions import Transitions

RECIPES = {  # --recipe: (experiment, --env-steps default, warm-up of the run: None, the recipe's)
    "minatar": ("dqn_minatar_breakout", 30_000, None),
    "atari": ("dqn_pong_async", 6_000, 2_000),
}


def frame_rows(action_space: Any, first: int, n: int, rng: np.random.Generator) -> Transitions:
    """``n`` synthetic Atari transitions ((4, 84, 84) frames, ids from ``first``) for a buffer
    that stacks frames."""
    rows = atari_rows(first, n, rng)
    rows.action = rows.action % action_space.n
    return rows


def env_rows(factory: GymEnvFactory, n: int, rng: np.random.Generator) -> Transitions:
    """``n`` transitions of the env ``factory`` makes, played with random actions (MinAtar's
    frames are sparse: uniform random ones would give the update other gradients, and other
    numbers to compute with, than a run's)."""
    action_space, n_envs = factory.spaces()[1], 8
    env = factory.make_vector(n_envs, seed=0)
    parts: list[tuple[np.ndarray, ...]] = []
    for _ in range(-(-n // n_envs)):  # ceil(n / n_envs) steps of the n_envs envs
        obs, actions = env.obs.copy(), random_actions(action_space, n_envs, rng)
        step = env.step(actions)
        discount = np.where(step.terminated, 0.0, 0.97).astype(np.float32)
        parts.append((obs, actions, step.reward.astype(np.float32), step.next_obs, discount))
    env.close()
    obs, actions, reward, next_obs, discount = (
        np.concatenate(c)[:n] for c in zip(*parts, strict=True)
    )
    return Transitions(obs, actions, reward, next_obs, discount)


def learner_rates(
    config: dict, seconds: float, fill: int
) -> tuple[float, float, float, Callable[[], float]]:
    """(bare ``update_tensors`` opt/s, the same with float denormals kept, ``learn_step`` opt/s,
    a function that measures the bare rate again) of the recipe's agent and buffer. The learner
    flushes denormals (``learner_cpu``), as this process does (``worker_cpu``); the second figure
    says what that is worth here."""
    parts = build_components(config, RunSettings.of(config), config["trainer"]["warmup_period"])
    agent, buffer, spaces = parts.agent, parts.buffer, parts.env_factory.spaces()
    if not isinstance(agent, TensorUpdate):
        raise SystemExit(f"pixel_bounds.py: {type(agent).__name__} has no update_tensors")
    frames, rng = config["replay_buffer"].get("frame_stack") is not None, np.random.default_rng(0)
    if frames:
        for first in range(0, fill, 1000):
            buffer.push(frame_rows(spaces[1], first, min(1000, fill - first), rng))
    else:
        buffer.push(env_rows(parts.env_factory, fill, rng))
    batch = buffer.sample(agent.batch_size)
    prepared = TensorBatch.of(batch, agent.device, agent.discrete_actions)

    def bare() -> float:
        return opts_per_second(lambda: agent.update_tensors(prepared), seconds, agent.device)

    before = bare()
    torch.set_flush_denormal(False)
    kept = bare()
    torch.set_flush_denormal(True)
    fed = opts_per_second(lambda: learn_step(agent, buffer), seconds, agent.device)
    return before, kept, fed, bare


def raw_env_rate(config: dict, n_envs: int, seconds: float) -> float:
    """Env steps/s of an actor's vector env with random actions, in this process."""
    factory = build_env_factory(config)
    action_space = factory.spaces()[1]
    env = factory.make_vector(n_envs, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        env.step(random_actions(action_space, n_envs, rng))
    steps, start = 0, time.perf_counter()
    while steps == 0 or time.perf_counter() - start < seconds:
        env.step(random_actions(action_space, n_envs, rng))
        steps += n_envs
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def env_steps_per_opt(settings: Any, batch: int) -> float:
    """Env steps per opt step, as the trainer's gate converts ``trainer.replay_ratio`` at this
    ``batch`` size (the serial trainer's ``opt_interval`` if set instead)."""
    if isinstance(settings, SerialSettings):
        return settings.env_steps_per_opt(batch)
    if settings.replay_ratio is None:
        raise SystemExit("pixel_bounds.py: trainer.replay_ratio=null sets no bound; give it one")
    return batch / settings.replay_ratio


def stages(config: dict, args: argparse.Namespace) -> tuple[dict[str, Any], Callable[[], float]]:
    """Every stage's figure and the bounds they make (see the module docstring), and a function
    that measures the bare learner again."""
    layout, settings = config["actor_manager"], build("trainer", config["trainer"])
    n_envs, serial = layout["n_envs_per_actor"], isinstance(settings, SerialSettings)
    cores = len(os.sched_getaffinity(0))
    actor_cores = 1 if serial else min(layout["n_actors"], max(cores - 1, 1))
    bare, kept, fed, bare_again = learner_rates(config, args.seconds, args.fill)
    raw = raw_env_rate(config, n_envs, args.seconds)
    steps = max(100, int(args.seconds * raw / n_envs / 2))  # about --seconds with the policy's
    parts = actor_breakdown(config, n_envs, steps)
    if parts is None:
        raise SystemExit("pixel_bounds.py: the actor's parts are measured for DQN only")
    per_step = sum(parts.values())
    per_opt = env_steps_per_opt(settings, config["agent"]["batch_size"])
    learner_bound, actor_bound = fed * per_opt, actor_cores * 1e6 / per_step
    bound = 1 / (1 / learner_bound + 1 / actor_bound) if serial else min(learner_bound, actor_bound)
    return {
        "trainer": "serial" if serial else "async",
        "n_actors": 1 if serial else layout["n_actors"],
        "n_envs_per_actor": n_envs,
        "policy_dtype": acting_dtype(config),
        "backend": config["env"].get("backend", "gymnasium"),
        "cores": cores,
        "actor_cores": actor_cores,
        "batch_size": config["agent"]["batch_size"],
        "env_steps_per_opt": per_opt,
        "bare_opt_per_sec": bare,
        "bare_denormals_kept_opt_per_sec": kept,
        "learner_opt_per_sec": fed,
        "raw_env_steps_per_sec": raw,
        **{f"actor_{k.replace('-', '')}_us": v for k, v in parts.items()},
        "actor_us_per_step": per_step,
        "learner_bound_env_steps_per_sec": learner_bound,
        "actor_bound_env_steps_per_sec": actor_bound,
        "bound_env_steps_per_sec": bound,
        "binding": "learner" if learner_bound < actor_bound else "actors",
    }, bare_again


def run_overrides(config: dict, args: argparse.Namespace, per_opt: float) -> list[str]:
    """The real run's overrides: the recipe and the benchmark's, then the command line's."""
    experiment, _, run_warmup = RECIPES[args.recipe]
    warmup = args.warmup if args.warmup is not None else run_warmup
    warmup = warmup if warmup is not None else config["trainer"]["warmup_period"]
    opts = max((args.env_steps - warmup) / per_opt, 1)
    interval = max(1, min(config["trainer"]["record_interval"], int(opts // args.records)))
    return [
        f"experiment={experiment}",
        f"trainer.max_env_steps={args.env_steps}",
        "trainer.max_opts=null",
        "trainer.target_return=null",
        "trainer.final_eval_episodes=0",
        "trainer.log_step=opt_steps",
        f"trainer.record_interval={interval}",
        f"trainer.warmup_period={warmup}",
        *args.overrides,
    ]


def compare(bounds: dict[str, Any], run: RunFigures) -> dict[str, Any]:
    """The run's figures against the bounds, and the criterion of the binding stage."""
    cores, actor_cores = bounds["cores"], bounds["actor_cores"]
    env, opt = run.env_steps_per_sec, run.opt_steps_per_sec
    raw_cores = bounds["raw_env_steps_per_sec"] * actor_cores
    learner_binds = bounds["binding"] == "learner"
    figures = {
        "run_seconds": run.seconds,
        "run_env_steps_per_sec": env,
        "run_opt_steps_per_sec": opt,
        "run_evaluations": run.evaluations,
        "fed_vs_bare": opt / bounds["bare_opt_per_sec"],
        "fed_vs_learner": opt / bounds["learner_opt_per_sec"],
        "actors_vs_raw": env / raw_cores,
        "actors_vs_bound": env / bounds["actor_bound_env_steps_per_sec"],
        "run_vs_bound": env / bounds["bound_env_steps_per_sec"],
        **{f"cpu_cores_{role}": used for role, used in run.cpu.items()},
        **{f"processes_{role}": n for role, n in run.processes.items()},
        "evaluator_cpu_share": run.evaluator_seconds / (run.seconds * cores),
        "evaluator_share_of_run_cpu": run.evaluator_seconds / (run.seconds * sum(run.cpu.values())),
        "evaluator_measured": "its process" if run.processes["evaluator"] else "learner stalls",
    }
    figures["criterion"] = "fed_vs_bare" if learner_binds else "actors_vs_raw"
    figures["criterion_value"] = figures[figures["criterion"]]
    return figures


def report(f: dict[str, Any]) -> None:
    """The table: stage, bound, the run's figure, their ratio; then what binds."""
    env, opt = f["run_env_steps_per_sec"], f["run_opt_steps_per_sec"]
    parts = ("policy", "exploration", "env", "nstep")
    actor = " + ".join(f"{k} {f[f'actor_{k}_us']:.1f}" for k in parts)
    rows = [
        ("bare learner: update_tensors, opt/s", f["bare_opt_per_sec"], opt),
        ("learner: learn_step (sample, update, priorities), opt/s", f["learner_opt_per_sec"], opt),
        (
            f"raw env x {f['actor_cores']} actor core(s), env steps/s",
            f["raw_env_steps_per_sec"] * f["actor_cores"],
            env,
        ),
        (
            f"actor bound: {f['actor_cores']} core(s) / {f['actor_us_per_step']:.1f} us per step",
            f["actor_bound_env_steps_per_sec"],
            env,
        ),
        (
            f"learner bound: learner opt/s x {f['env_steps_per_opt']:g} env steps per opt",
            f["learner_bound_env_steps_per_sec"],
            env,
        ),
        ("the run's bound, env steps/s", f["bound_env_steps_per_sec"], env),
    ]
    print(
        f"\n{f['experiment']}: trainer={f['trainer']}, {f['n_actors']} actor(s) of"
        f" {f['n_envs_per_actor']} env(s) ({f['backend']}, {f['policy_dtype']}), {f['cores']} cores"
    )
    print(f"actor's us per env step: {actor}")
    print(
        f"bare learner, opt/s: {f['bare_before_opt_per_sec']:,.1f} before the run,"
        f" {f['bare_after_opt_per_sec']:,.1f} after; with float denormals kept (not the"
        f" learner's setting) {f['bare_denormals_kept_opt_per_sec']:,.1f}"
    )
    print(f"{'stage':<64} {'bound':>10} {'achieved':>10} {'ratio':>6}")
    for name, bound, achieved in rows:
        print(f"{name:<64} {bound:>10,.1f} {achieved:>10,.1f} {achieved / bound:>6.2f}")
    cpu = ", ".join(
        f"{role} {f[f'cpu_cores_{role}']:.2f} ({f[f'processes_{role}']})" for role in ROLES
    )
    print(f"CPU over the {f['run_seconds']:.1f} s steady stretch, cores (processes): {cpu}")
    print(
        f"evaluator: {100 * f['evaluator_cpu_share']:.1f}% of the machine's CPU,"
        f" {100 * f['evaluator_share_of_run_cpu']:.1f}% of the run's (by {f['evaluator_measured']};"
        f" {f['run_evaluations']} evaluation(s) ended in the stretch)"
    )
    what = (
        "the fed learner's opt/s over its bare opt/s"
        if f["binding"] == "learner"
        else "the actors' env steps/s over the raw env rate of their cores"
    )
    print(
        f"binds: {f['binding']} (learner bound {f['learner_bound_env_steps_per_sec']:,.0f},"
        f" actor bound {f['actor_bound_env_steps_per_sec']:,.0f} env steps/s); {what}:"
        f" {f['criterion_value']:.2f}x (issue 41 asks >= 0.85x)"
    )
    if f["trainer"] == "serial":
        print(
            "trainer=serial: its one process acts, learns and evaluates in turn; the run reached"
            f" {f['run_vs_bound']:.2f}x the bound of both in one process"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="minatar")
    parser.add_argument("--seconds", type=float, default=5.0, help="per stage")
    parser.add_argument("--env-steps", type=int, default=None, help="the run's budget")
    parser.add_argument("--warmup", type=int, default=None, help="the run's warmup_period")
    parser.add_argument("--fill", type=int, default=20_000, help="synthetic replay rows")
    parser.add_argument("--records", type=int, default=20, help="training records at least")
    parser.add_argument("overrides", nargs="*")
    args = parse_with_overrides(parser)
    experiment, default_steps, _ = RECIPES[args.recipe]
    args.env_steps = args.env_steps or default_steps
    logging.basicConfig(level=logging.WARNING)
    worker_cpu()
    config = load_config([f"experiment={experiment}", *args.overrides])
    bounds, bare_again = stages(config, args)
    figures = {"experiment": experiment, **bounds}
    with tempfile.TemporaryDirectory() as tmp:
        overrides = run_overrides(config, args, figures["env_steps_per_opt"])
        samples = run_train(overrides, Path(tmp) / "run", Path(tmp) / "train.log")
        before, after = figures["bare_opt_per_sec"], bare_again()  # the speed drifts: both sides
        figures |= {
            "bare_before_opt_per_sec": before,
            "bare_after_opt_per_sec": after,
            "bare_opt_per_sec": (before + after) / 2,
        }
        figures |= compare(figures, steady_figures(Path(tmp) / "run", samples))
    report(figures)
    result = {k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
