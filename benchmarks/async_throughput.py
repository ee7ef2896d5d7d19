"""Async trainer throughput on this machine, as ratios against baselines measured in the same run.

Prints three tables:
1. sampling: transitions/s reaching the learner (which only drains, never optimizes) for
   n_actors = 1, 2, 4, 8, next to the raw env step rate (random actions, no policy) of the same
   env in 1 and 2 plain processes, once per ``--envs-per-actor`` count (16 and 64): an actor pays
   a policy call and n-step bookkeeping per vector step, which a cheap env such as CartPole
   amortizes only over many envs; and the weight publication latency, from ``publish`` to the
   first actor step with the new version (sampling starts to count once every actor has sent);
2. learner efficiency: opt steps/s of the async learner with actors running, divided by the opt
   steps/s of a bare loop (same agent, batch and buffer, one process);
3. where one actor's time goes, per transition, in one process (no transport): the policy's
   forward pass, epsilon-greedy exploration, the vector env's step and the n-step windows, for
   each ``--envs-per-actor`` count (DQN, the default agent).

    python benchmarks/async_throughput.py [--seconds 5] [--envs-per-actor 16 64] [overrides...]
    python benchmarks/async_throughput.py --actors 1 2 4 --opts 1000 experiment=sac_halfcheetah \
        agent.random_steps=0 trainer.warmup_period=1000   # SAC on HalfCheetah-v5 ([mujoco] extra)

With ``--atari`` it prints the Atari table instead: frames/s (env steps x frame skip) reaching the
learner with 1, 2 and 4 actors of ``experiment=dqn_pong_async`` (Nature-CNN policy, preprocessing,
the recipe's envs per actor and acting precision), next to one process stepping the same
preprocessed env with random actions and no policy:

    python benchmarks/async_throughput.py --atari [--seconds 10] [--atari-envs-per-actor 4] [overrides...]

``--backend envpool`` (or ``ale_vector``, ``gymnasium_async``) steps the actors' envs with that
``env.backend``; the raw process stays gymnasium's. ``--atari-envs-per-actor`` overrides the
recipe's ``actor_manager.n_envs_per_actor``; the actors act in what the recipe's
``actor_manager.policy_dtype`` resolves to on this machine (``auto``: bfloat16 on a CPU with AMX;
an override such as ``actor_manager.policy_dtype=float32`` sets it). The Atari table ends with one
line ``RESULT {json}``: ``ratio_2_actors_vs_raw`` is the frames/s reaching the learner with 2
actors over the raw gymnasium process.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import statistics
import tempfile
import time

import numpy as np
import torch
from cli_args import parse_with_overrides
from hydra import compose, initialize_config_dir

from border_py.actors.clock import LocalClock
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.runtime import Launch
from border_py.agents.dqn import DQN
from border_py.agents.factory import build_agent
from border_py.agents.precision import offered_dtypes, resolve_here
from border_py.config import build, config_dir
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.trainers.serial import SerialSettings
from border_py.transitions import Transitions
from border_py.transport.batch import ReceivedBatch


def load_config(overrides: list[str]) -> dict:
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return to_plain(compose("train", overrides=overrides))


def raw_env_steps(env_id: str, seconds: float, seed: int = 0) -> int:
    """Env steps with random actions in ``seconds`` (one process, no policy)."""
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(seed)
    env.reset(seed=seed)
    steps, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        steps += 100
    return steps


def raw_rate(env_id: str, n_procs: int, seconds: float) -> float:
    ctx = mp.get_context("spawn")
    with ctx.Pool(n_procs) as pool:
        steps = pool.starmap(raw_env_steps, [(env_id, seconds, i) for i in range(n_procs)])
    return sum(steps) / seconds


def sampling_rate(config: dict, n_actors: int, n_envs: int, seconds: float) -> tuple[float, float]:
    """(transitions/s reaching the learner, median publish-to-actor latency in ms)."""
    config = {
        **config,
        "actor_manager": {
            **config["actor_manager"],
            "n_actors": n_actors,
            "n_envs_per_actor": n_envs,
        },
    }
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    actors = parts.actors.runtime()
    policy = parts.agent.policy_state()
    actors.start(
        Launch(
            config,
            parts.env_factory.spaces(),
            parts.agent,
            policy,
            0,
            seed=run.seed,
            check_resources=run.check_resources,
        )
    )
    latencies: list[float] = []
    received = [0]
    senders: set[int] = set()
    version, published_at = 0, None

    def drain(batch: ReceivedBatch) -> None:  # the learner only takes the batches
        nonlocal published_at
        received[0] += 0 if batch.transitions is None else len(batch.transitions)
        senders.add(batch.actor)
        if published_at is not None and batch.policy_opt_steps == version:
            latencies.append(batch.loaded_at - published_at)
            published_at = None

    try:
        deadline = time.monotonic() + 120
        while len(senders) < n_actors and time.monotonic() < deadline:  # every actor started
            actors.poll(0.1, drain)
        settle = time.monotonic() + 0.5  # and sampling at its pace
        while time.monotonic() < settle:
            actors.poll(0.1, drain)
        start, counted = time.perf_counter(), received[0]
        next_publish = start + 0.25
        while (now := time.perf_counter()) < start + seconds:
            if published_at is None and now >= next_publish:
                version += 1
                actors.publish(policy, version)
                published_at, next_publish = time.time(), now + 0.25
            actors.poll(0.01, drain)
        rate = (received[0] - counted) / (time.perf_counter() - start)
    finally:
        actors.stop()
    return rate, 1000 * statistics.median(latencies) if latencies else float("nan")


def acting_dtype(config: dict) -> str:
    """The precision this machine's actors of ``config`` act in: ``actor_manager.policy_dtype``
    resolved for its agent and this CPU (``auto``: bfloat16 with AMX); float32 in the serial
    trainer, whose actor acts with the learner's network."""
    if isinstance(build("trainer", config["trainer"]), SerialSettings):
        return "float32"
    factory = build("env", config["env"])
    agent = build_agent(config, factory.spaces(), "cpu", 0)
    return resolve_here(config["actor_manager"]["policy_dtype"], offered_dtypes(agent))


def actor_breakdown(config: dict, n_envs: int, steps: int = 3000) -> dict[str, float] | None:
    """Microseconds per transition of each part of an actor's vector step, as the sampler runs
    them one after the other (a part's cost includes the cache misses the others leave it): the
    n-step part adds every step and takes once per ``n_buffer`` transitions, as an actor does;
    None for an agent other than DQN (whose parts these are). The policy acts in the run's
    ``actor_manager.policy_dtype`` as its actors would (``auto`` resolved on this CPU; the serial
    trainer's actor: float32)."""
    n_buffer = config["actor_manager"]["n_buffer"]
    serial = isinstance(build("trainer", config["trainer"]), SerialSettings)
    dtype = "float32" if serial else config["actor_manager"]["policy_dtype"]
    spec = ActorSpec(0, 0, n_envs, n_buffer, None, dtype, seed=RunSettings.of(config).seed)
    sampler = build_sampler(spec, config, LocalClock())
    agent, env, processor = sampler.agent, sampler.env, sampler.processor
    if not isinstance(agent, DQN):
        sampler.close()
        return None
    block = -(-n_buffer // n_envs)  # steps per batch sent
    times = dict.fromkeys(("policy", "exploration", "env", "n-step"), 0.0)
    for i in range(steps + 200):  # the first 200 warm up
        obs = env.obs
        t0 = time.perf_counter()
        greedy = agent.q_values(obs).argmax(axis=1)
        t1 = time.perf_counter()
        action = agent.explore(greedy)
        t2 = time.perf_counter()
        step = env.step(action)
        t3 = time.perf_counter()
        processor.add(obs, action, step)
        if (i + 1) % block == 0:
            processor.take()
        t4 = time.perf_counter()
        if i >= 200:
            for key, seconds in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                times[key] += seconds
    sampler.close()
    return {key: 1e6 * seconds / (steps * n_envs) for key, seconds in times.items()}


def random_actions(space, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` uniformly random actions of a Discrete or (bounded) Box space."""
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), n)
    return rng.uniform(space.low, space.high, (n, *space.shape)).astype(np.float32)


def bare_opt_rate(config: dict, n_opts: int) -> float:
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    n = 10_000
    obs_space, action_space = parts.env_factory.spaces()
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, *obs_space.shape)).astype(np.float32)
    actions = random_actions(action_space, n, rng)
    parts.buffer.push(
        Transitions(obs, actions, np.ones(n, np.float32), obs, np.full(n, 0.99, np.float32))
    )
    for _ in range(50):
        parts.agent.update(parts.buffer.sample(parts.agent.batch_size))
    start = time.perf_counter()
    for _ in range(n_opts):
        parts.agent.update(parts.buffer.sample(parts.agent.batch_size))
    return n_opts / (time.perf_counter() - start)


def async_opt_rate(overrides: list[str], n_opts: int, n_actors: int) -> float:
    from border_py import train

    with (
        tempfile.TemporaryDirectory() as tmp,
        initialize_config_dir(version_base="1.3", config_dir=str(config_dir())),
    ):
        cfg = compose(
            "train",
            overrides=[
                *overrides,
                f"run_dir={tmp}",
                "trainer=async",
                f"trainer.max_opts={n_opts}",
                f"trainer.eval_interval={n_opts}",
                "trainer.replay_ratio=null",  # the learner takes what comes and never waits
                "experiment=none",
                f"actor_manager.n_actors={n_actors}",
            ],
        )
        summary = train(cfg)
    return summary["opt_steps_per_sec"]


def raw_atari_frames(config: dict, seconds: float) -> float:
    """Frames/s of one process stepping the preprocessed training env with random actions."""
    factory = build("env", config["env"])
    env = factory.make(training=True)
    env.action_space.seed(0)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() < start + seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    env.close()
    return steps * factory.frame_skip / (time.perf_counter() - start)


def atari_section(args: argparse.Namespace) -> None:
    """Atari sampling throughput in frames/s (env steps x frame skip) with 1, 2, 4 actors."""
    backend = [f"env.backend={args.backend}"] if args.backend else []
    config = load_config(["experiment=dqn_pong_async", *backend, *args.overrides])
    n_envs = args.atari_envs_per_actor or config["actor_manager"]["n_envs_per_actor"]
    skip = config["env"]["frame_skip"]
    setting = config["actor_manager"]["policy_dtype"]
    dtype = acting_dtype(config)
    raw = raw_atari_frames(config, args.seconds)
    print(
        f"\nAtari sampling, {config['env']['id']}, {n_envs} envs per actor, env.backend="
        f"{config['env'].get('backend', 'gymnasium')}, actors act in {dtype}"
        f" (actor_manager.policy_dtype={setting}; learner only drains)"
    )
    print(f"   raw frames/s, random actions, 1 process, no policy: {raw:,.0f}")
    print(f"   {'n_actors':>8} {'frames/s':>10} {'x raw 1-proc':>13} {'publish->actor ms':>18}")
    result: dict[str, object] = {
        "backend": config["env"].get("backend", "gymnasium"),
        "envs_per_actor": n_envs,
        "policy_dtype": dtype,
        "raw_frames_per_sec": round(raw),
    }
    for n in args.atari_actors:
        rate, latency = sampling_rate(config, n, n_envs, args.seconds)
        frames = rate * skip  # one transition per env step in steady state
        print(f"   {n:>8} {frames:>10,.0f} {frames / raw:>13.2f} {latency:>18.1f}")
        result[f"frames_per_sec_{n}_actors"] = round(frames)
        result[f"ratio_{n}_actors_vs_raw"] = round(frames / raw, 3)
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--envs-per-actor", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--opts", type=int, default=3000)
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--atari", action="store_true", help="the Atari table (needs [atari])")
    parser.add_argument(
        "--atari-envs-per-actor",
        type=int,
        help="envs per actor (default: the recipe's actor_manager.n_envs_per_actor)",
    )
    parser.add_argument("--atari-actors", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--backend",
        choices=["gymnasium", "gymnasium_async", "envpool", "ale_vector"],
        help="env.backend of the actors' envs (the Atari table)",
    )
    parser.add_argument("overrides", nargs="*")
    args = parse_with_overrides(parser)
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    if args.atari:
        atari_section(args)
        return
    config = load_config(args.overrides)
    env_id = config["env"]["id"]

    raw1 = raw_rate(env_id, 1, args.seconds)
    raw2 = raw_rate(env_id, 2, args.seconds)
    for n_envs in args.envs_per_actor:
        print(f"\n1. sampling, {env_id}, {n_envs} envs per actor (learner only drains)")
        print(f"   raw env steps/s, random actions: 1 process {raw1:,.0f}, 2 processes {raw2:,.0f}")
        print(
            f"   {'n_actors':>8} {'transitions/s':>14} {'x raw 2-proc':>13} {'x 2 actors':>11}"
            f" {'publish->actor ms':>18}"
        )
        rates = {}
        for n in args.actors:
            rate, latency = sampling_rate(config, n, n_envs, args.seconds)
            rates[n] = rate
            vs2 = rate / rates[2] if 2 in rates else float("nan")
            print(f"   {n:>8} {rate:>14,.0f} {rate / raw2:>13.2f} {vs2:>11.2f} {latency:>18.1f}")

    bare = bare_opt_rate(config, args.opts)
    print(
        f"\n2. learner efficiency ({args.opts} opt steps; async learner with actors vs a bare loop)"
    )
    print(f"   bare loop: {bare:,.0f} opt steps/s")
    for n in sorted({2, max(args.actors)}):
        rate = async_opt_rate(args.overrides, args.opts, n)
        print(f"   {n} actors: {rate:,.0f} opt steps/s = {rate / bare:.2f} x bare")

    print(
        "\n3. one actor's time per transition in one process (us; the env's own step is in 'env')"
    )
    print(f"   {'envs':>5} {'policy':>7} {'explore':>8} {'env':>6} {'n-step':>7} {'total':>6}")
    for n_envs in args.envs_per_actor:
        parts = actor_breakdown(config, n_envs)
        if parts is None:
            print("   (DQN only)")
            break
        cells = " ".join(f"{parts[k]:>{w}.1f}" for k, w in zip(parts, (7, 8, 6, 7), strict=True))
        print(f"   {n_envs:>5} {cells} {sum(parts.values()):>6.1f}")


if __name__ == "__main__":
    main()
