"""An actor with env.backend=gymnasium_async: its env subprocesses end with it, stopped or killed."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from border_py.actors.local import LocalActors, LocalActorSettings
from border_py.config import build
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components

from ..conftest import make_config


def _actor_with_env_subprocesses(
    tmp_path, *env: str
) -> tuple[LocalActors, psutil.Process, list[int]]:
    """One actor of 2 envs (CartPole, or ``env`` overrides) in subprocesses, sending;
    (actors, actor, env pids)."""
    config = to_plain(
        make_config(
            tmp_path,
            *(env or ["env=cartpole"]),
            "env.backend=gymnasium_async",
            "actor_manager.n_actors=1",
            "actor_manager.n_envs_per_actor=2",
            "actor_manager.n_buffer=50",
            "agent.hidden_sizes=[16]",
        )
    )
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    settings = build("actor_manager", config["actor_manager"])
    assert isinstance(settings, LocalActorSettings)
    actors = settings.runtime()
    actors.start(parts.launch(config, run))
    running = actors._running[0]
    assert running is not None
    actor = psutil.Process(running.process.pid)
    deadline = time.monotonic() + 60
    while actors.records[0].received == 0 and time.monotonic() < deadline:
        actors.poll(0.1, lambda batch: None)
    assert actors.records[0].received > 0, "the actor sent nothing"
    envs = [p.pid for p in actor.children(recursive=True)]
    assert len(envs) >= 2  # the env subprocesses (and spawn's resource tracker)
    return actors, actor, envs


def _gone(pids: list[int], within: float = 10.0) -> list[int]:
    """The pids among ``pids`` still running after ``within`` seconds."""
    deadline = time.monotonic() + within
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [
            p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
        ]
        time.sleep(0.05)
    return alive


def test_a_stopped_actor_leaves_no_env_subprocess(tmp_path):
    actors, _, envs = _actor_with_env_subprocesses(tmp_path)
    actors.stop()
    assert _gone(envs) == []


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_a_killed_actor_leaves_no_env_subprocess_even_one_stuck_in_a_step(tmp_path):
    flag = tmp_path / "hung"
    actors, actor, envs = _actor_with_env_subprocesses(
        tmp_path,
        "env=gym",
        "env.id=tests.hang_env:HangOnce-v0",
        "+env.kwargs.hang_after=100",  # after the first batches: one env's step never returns
        f"+env.kwargs.flag={flag}",
    )
    try:
        deadline = time.monotonic() + 30
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), "no env step hung"
        os.kill(actor.pid, signal.SIGKILL)
        assert _gone(envs) == []
    finally:
        actors.stop(drain_timeout=0)
