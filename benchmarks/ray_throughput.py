"""actor_manager=ray against the local actor processes on the same machine, as ratios, and the
per-batch costs that bound one learner fed by N Ray actors (extrapolated to N = 8 ... 512).

Prints three tables, all from one invocation:
1. sampling: transitions/s reaching a learner that only drains (it pushes every batch into its
   replay buffer), the learner's main-thread CPU time per batch (its ingest cost: polling,
   deserializing, pushing), and the publish->use latency (from ``publish`` to the actor loading
   those weights), for local actors and for Ray actors (a local Ray started by the actors);
2. learner efficiency: opt steps/s of ``train`` with each kind of actors (the learner never waits for
   data: ``trainer.replay_ratio=null``), next to a bare loop of the same agent, buffer and batch;
3. scale on paper: measured per batch or per publication here (Ray's object-store put/get of a
   batch and of Nature-CNN-sized weights, one node), then an extrapolation to N actors: the
   learner's ingest load, the bytes per second into the learner's node, and the publication
   fan-out out of it, under the assumptions printed with the table.

    python benchmarks/ray_throughput.py [--seconds 10] [--actors 2] [--envs-per-actor 16] \
        [--opts 3000] [overrides...]
    python benchmarks/ray_throughput.py --seconds 1 --opts 200 --actors 1 --envs-per-actor 2  # smoke
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from hydra import compose, initialize_config_dir

from border_py.agents.factory import build_agent
from border_py.config import build, config_dir
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.transitions import Transitions

NO_WAIT = [
    "trainer.replay_ratio=null",
    "trainer.min_samples_per_opt=0",
    "trainer.max_samples_per_opt=null",
]
NODE_ACTORS = 32  # actors per node assumed by the extrapolation
LINK_BYTES = 1.25e9  # one 10 Gb/s link per node, in bytes/s (assumed)


def load_config(overrides: list[str]) -> dict[str, Any]:
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return to_plain(compose("train", overrides=overrides))


def drain(config: dict[str, Any], seconds: float) -> dict[str, float]:
    """Run the config's actors while the learner only drains; publish new weights every
    0.25 s. Returns transitions/s, batches/s, main-thread CPU ms per batch, median publish->use ms,
    bytes per batch."""
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    backend = build("actor_manager", config["actor_manager"]).runtime()
    agent = parts.agent
    arrived: list[Any] = []  # batches with transitions, in arrival order

    def deliver(batch: Any) -> None:
        if batch.transitions is not None:
            parts.buffer.push(batch.transitions)
            arrived.append(batch)

    latencies: list[float] = []
    try:
        backend.start(parts.launch(config, run))
        deadline = time.monotonic() + 300
        while not all(r.received for r in backend.records) and time.monotonic() < deadline:
            backend.poll(0.1, deliver)  # start-up: every actor delivered once
            backend.check()
        arrived.clear()
        version, published_at, next_publish = 0, None, time.perf_counter() + 0.25
        cpu, seen = 0.0, 0
        start = time.perf_counter()
        while (now := time.perf_counter()) < start + seconds:
            if published_at is None and now >= next_publish:
                version += 1
                backend.publish(agent.policy_state(), version)
                published_at = time.time()
            before = time.thread_time()
            backend.poll(0.01, deliver)
            cpu += time.thread_time() - before
            for b in arrived[seen:]:
                if published_at is not None and b.policy_opt_steps == version:
                    latencies.append(b.loaded_at - published_at)
                    published_at, next_publish = None, now + 0.25
            seen = len(arrived)
            backend.check()
        elapsed = time.perf_counter() - start
        sizes = [sum(a.nbytes for a in b.transitions.arrays().values()) for b in arrived]
    finally:
        backend.stop()
    return {
        "transitions_per_sec": sum(len(b.transitions) for b in arrived) / elapsed,
        "batches_per_sec": len(arrived) / elapsed,
        "cpu_ms_per_batch": 1000 * cpu / max(len(arrived), 1),
        "publish_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "batch_bytes": statistics.mean(sizes) if sizes else float("nan"),
    }


def bare_opt_rate(config: dict[str, Any], n_opts: int) -> float:
    """Opt steps/s of the agent alone on random transitions (one process, no actors)."""
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    obs_space, action_space = parts.env_factory.spaces()
    n, rng = 10_000, np.random.default_rng(0)
    obs = rng.normal(size=(n, *obs_space.shape)).astype(np.float32)
    action_space.seed(0)
    actions = np.stack([action_space.sample() for _ in range(n)])
    parts.buffer.push(
        Transitions(obs, actions, np.ones(n, np.float32), obs, np.full(n, 0.99, np.float32))
    )
    for _ in range(50):
        parts.agent.update(parts.buffer.sample(parts.agent.batch_size))
    start = time.perf_counter()
    for _ in range(n_opts):
        parts.agent.update(parts.buffer.sample(parts.agent.batch_size))
    return n_opts / (time.perf_counter() - start)


def train_opt_rate(overrides: list[str], n_opts: int) -> float:
    from border_py import train

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            [
                *overrides,
                *NO_WAIT,
                f"run_dir={tmp}/run",
                f"trainer.max_opts={n_opts}",
                f"trainer.eval_interval={n_opts}",
                "trainer.eval_episodes=2",
                "progress=false",
            ]
        )
        return train(cfg)["opt_steps_per_sec"]


def atari_weights() -> dict[str, torch.Tensor]:
    """The acting weights of ``experiment=dqn_pong_async`` (dueling Nature CNN, 6 actions)."""
    config = load_config(["experiment=dqn_pong_async"])
    spaces = (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
    return build_agent(config, spaces, "cpu", seed=0).policy_state()


def object_store_costs(atari_batch_bytes: int) -> dict[str, float]:
    """Costs on one Ray node (a local Ray of 1 CPU): putting the Atari recipe's weights, an actor
    fetching and loading them, and the learner getting an Atari batch returned as a task result."""
    import ray

    from border_py.transport.weights import PolicyWeights

    @ray.remote(num_cpus=1)
    class Loader:
        def load(self, weights: PolicyWeights) -> float:
            start = time.perf_counter()
            weights.state()  # as SamplerActor does
            return time.perf_counter() - start

        def batch(self, n_bytes: int) -> np.ndarray:
            return np.ones(n_bytes, np.uint8)

    arrays = {k: v.numpy() for k, v in atari_weights().items()}
    ray.init(num_cpus=1, include_dashboard=False, object_store_memory=200 * 2**20)
    try:
        loader = Loader.remote()  # type: ignore[attr-defined]
        ray.get(loader.batch.remote(1), timeout=120)  # started
        puts, loads, gets = [], [], []
        for _ in range(20):
            start = time.perf_counter()
            ref = ray.put(PolicyWeights(0, arrays))
            puts.append(time.perf_counter() - start)
            loads.append(ray.get(loader.load.remote(ref), timeout=60))
        for _ in range(20):
            ref = loader.batch.remote(atari_batch_bytes)
            ray.wait([ref], timeout=60, fetch_local=False)
            start = time.perf_counter()
            ray.get(ref, timeout=60)
            gets.append(time.perf_counter() - start)
    finally:
        ray.shutdown()
    return {
        "weight_bytes": sum(a.nbytes for a in arrays.values()),
        "put_ms": 1000 * statistics.median(puts),
        "load_ms": 1000 * statistics.median(loads),
        "get_ms": 1000 * statistics.median(gets),
    }


def extrapolate(
    title: str,
    per_actor: float,
    ingest_s: float,
    batch_bytes: float,
    weight_bytes: float,
    publications: float,
) -> None:
    """One table of N actors: batches/s, the learner's ingest load, bytes/s into the learner's node,
    weight bytes/s out of it (one copy per node per publication, at most one per actor call)."""
    print(f"   {title}")
    print(
        f"   {'N':>5} {'batches/s':>10} {'ingest load':>12} {'in MB/s':>9} {'weights out MB/s':>17}"
    )
    for n in (8, 16, 32, 64, 128, 256, 512):
        rate = n * per_actor
        nodes = -(-n // NODE_ACTORS)
        fetches = min(publications, rate / nodes) * nodes  # weight copies per second
        print(
            f"   {n:>5} {rate:>10,.0f} {rate * ingest_s:>11.0%} {rate * batch_bytes / 1e6:>9,.1f}"
            f" {fetches * weight_bytes / 1e6:>17,.1f}"
        )
    print(
        f"   the learner does nothing but take batches from N = {1 / (per_actor * ingest_s):,.0f}"
    )


def scale_on_paper(
    args: argparse.Namespace, cartpole: dict[str, float], opt_rate: float, config: dict[str, Any]
) -> None:
    atari = load_config(["experiment=dqn_pong_async"])
    atari_rows = atari["actor_manager"]["n_buffer"]
    atari_batch = atari_rows * 84 * 84  # each new frame once (replay_buffer.frame_stack)
    costs = object_store_costs(atari_batch)
    mlp_bytes = sum(
        v.numel() * v.element_size()
        for v in build_components(config, RunSettings.of(config), 0).agent.policy_state().values()
    )
    per_actor = cartpole["batches_per_sec"] / args.actors
    fixed = cartpole["cpu_ms_per_batch"] / 1000  # the learner's poll, get and push of one batch
    atari_per_actor = args.atari_frames_per_actor / atari["env"]["frame_skip"] / atari_rows
    sync, atari_sync = config["trainer"]["sync_interval"], atari["trainer"]["sync_interval"]
    print("\n3. scale on paper: one learner fed by N Ray actors")
    print("   measured here (one node, Ray actors):")
    print(
        f"     CartPole: {per_actor:,.1f} batches/s per actor ({args.envs_per_actor} envs, {config['actor_manager']['n_buffer']} rows, {cartpole['batch_bytes'] / 1e3:,.1f} kB); learner main-thread CPU {1000 * fixed:.3f} ms per batch (wait, get, replay push)"
    )
    print(
        f"     CartPole: learner {opt_rate:,.0f} opt steps/s with Ray actors -> {opt_rate / sync:,.1f} publications/s (sync_interval={sync}) of {mlp_bytes / 1e3:,.1f} kB"
    )
    print(
        f"     Atari (dqn_pong_async): a batch of {atari_rows} new 84x84 frames ({atari_batch / 1e6:.2f} MB): the learner's get {costs['get_ms']:.3f} ms"
    )
    print(
        f"     Atari weights {costs['weight_bytes'] / 1e6:.1f} MB: ray.put {costs['put_ms']:.2f} ms once per publication; an actor's fetch + load {costs['load_ms']:.2f} ms"
    )
    print(
        f"   assumed: each actor keeps its rate on its own core; {NODE_ACTORS} actors per node; a node's link"
        f" carries {LINK_BYTES / 1e6:,.0f} MB/s; each node fetches each publication once, from the learner's node;"
        f" Atari: {args.atari_frames_per_actor:,.0f} frames/s per actor, a learner of {args.atari_opts_per_sec:,.0f} opt steps/s"
        f" (sync_interval={atari_sync}), ingest = CartPole's per-batch CPU + the measured get"
    )
    extrapolate(
        "CartPole (rates measured here):",
        per_actor,
        fixed,
        cartpole["batch_bytes"],
        mlp_bytes,
        opt_rate / sync,
    )
    extrapolate(
        "Atari (rates assumed as above):",
        atari_per_actor,
        fixed + costs["get_ms"] / 1000,
        atari_batch,
        costs["weight_bytes"],
        args.atari_opts_per_sec / atari_sync,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--envs-per-actor", type=int, default=16)
    parser.add_argument("--opts", type=int, default=3000)
    parser.add_argument(
        "--atari-frames-per-actor",
        type=float,
        default=1800.0,
        help="assumed (README: 1 actor, 4 envs)",
    )
    parser.add_argument(
        "--atari-opts-per-sec", type=float, default=500.0, help="assumed learner rate (a GPU)"
    )
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    actors = [
        f"actor_manager.n_actors={args.actors}",
        f"actor_manager.n_envs_per_actor={args.envs_per_actor}",
    ]
    backends = {"local": ["actor_manager=default"], "ray": ["actor_manager=ray"]}

    print(
        f"\n1. sampling ({args.actors} actors x {args.envs_per_actor} envs, learner only drains, {args.seconds:g} s)"
    )
    print(
        f"   {'backend':>8} {'transitions/s':>14} {'batches/s':>10} {'CPU ms/batch':>13} {'publish->use ms':>16}"
    )
    drains = {}
    for name, choice in backends.items():
        config = load_config([*choice, *actors, *args.overrides])
        drains[name] = drain(config, args.seconds) | {"n_actors": args.actors}
        d = drains[name]
        print(
            f"   {name:>8} {d['transitions_per_sec']:>14,.0f} {d['batches_per_sec']:>10,.1f} {d['cpu_ms_per_batch']:>13.3f} {d['publish_ms']:>16.1f}"
        )
    ratio = drains["ray"]["transitions_per_sec"] / drains["local"]["transitions_per_sec"]
    print(f"   ray / local: {ratio:.2f}x transitions/s")

    config = load_config([*actors, *args.overrides])
    bare = bare_opt_rate(config, args.opts)
    print(f"\n2. learner efficiency ({args.opts} opt steps, the learner never waits for data)")
    print(f"   bare loop: {bare:,.0f} opt steps/s")
    rates = {}
    for name, choice in backends.items():
        rates[name] = train_opt_rate([*choice, *actors, *args.overrides], args.opts)
        print(f"   {name:>8}: {rates[name]:,.0f} opt steps/s = {rates[name] / bare:.2f} x bare")
    print(f"   ray / local: {rates['ray'] / rates['local']:.2f}x opt steps/s")

    scale_on_paper(args, drains["ray"], rates["ray"], config)
    result = {
        "ray_vs_local_transitions_per_sec": round(ratio, 3),
        "ray_vs_local_opt_per_sec": round(rates["ray"] / rates["local"], 3),
        "local_vs_bare_opt_per_sec": round(rates["local"] / bare, 3),
        "ray_vs_bare_opt_per_sec": round(rates["ray"] / bare, 3),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
