"""Run dirs made by hand for the report's tests: the files ``border report`` reads (``result.json``,
``.hydra/config.yaml``, TensorBoard events of ``eval/return_mean`` and ``eval/env_steps``; when
asked, the final evaluations on fresh episodes), with returns the test chooses, so that every
aggregate can be checked against numbers worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

AGENTS = {"dqn": "border_py.agents.dqn.DQN", "sac": "border_py.agents.sac.SAC"}
GYM = {"_target_": "border_py.envs.factory.GymEnvFactory", "kwargs": {}, "wrappers": []}


def make_run(
    run_dir: Path,
    overrides: list[str],
    env_id: str,
    returns: list[float],
    every: int = 1000,
    agent: str = "dqn",
    env: dict | None = None,
) -> Path:
    """A finished run of ``env_id`` whose evaluations, one every ``every`` env steps (and opt
    steps), returned ``returns``; ``env``: more keys of its config's ``env`` (``_target_``,
    ``max_episode_steps``, ...)."""
    (run_dir / ".hydra").mkdir(parents=True)
    config = {"agent": {"_target_": AGENTS[agent]}, "env": {"id": env_id, **(env or {})}, "seed": 0}
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    writer = EventFileWriter(str(run_dir / "tensorboard"))
    for i, value in enumerate(returns, start=1):
        for tag, scalar in (("eval/return_mean", value), ("eval/env_steps", i * every)):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=scalar)])
            writer.add_event(Event(wall_time=1000.0 + i, step=i * every, summary=summary))
    writer.close()
    summary_ = {
        "best_return": max(returns),
        "final_return": returns[-1],
        "env_steps": len(returns) * every,
        "opt_steps": len(returns) * every,
        "seconds": float(len(returns)),
    }
    record = {"status": "completed", "overrides": overrides, "summary": summary_}
    (run_dir / "result.json").write_text(json.dumps(record))
    return run_dir


def add_fresh(run_dir: Path, final: float, best: float) -> None:
    """Add final evaluations of 100 fresh episodes (``final_eval`` with mean ``final``,
    ``best_eval`` with mean ``best``) to the summary of a run's ``result.json``."""
    path = run_dir / "result.json"
    record = json.loads(path.read_text())
    record["summary"] |= {
        "final_eval": {"return_mean": final, "return_std": 5.0, "episodes": 100, "seeds": [9, 108]},
        "best_eval": {"return_mean": best, "return_std": 1.5, "episodes": 100, "seeds": [9, 108]},
    }
    path.write_text(json.dumps(record))


def make_sweep(root: Path, cells: dict[tuple[str, str], list[list[float]]], key: str) -> Path:
    """A sweep dir of numbered jobs: per (env id, value of ``key``) one run per returns list,
    with overrides ``env.id=<env id> <key>=<value> seed=<k>``."""
    job = 0
    for (env_id, value), runs in cells.items():
        for seed, returns in enumerate(runs):
            overrides = ["env=gym", f"env.id={env_id}", f"{key}={value}", f"seed={seed}"]
            make_run(root / str(job), overrides, env_id, returns)
            job += 1
    return root
