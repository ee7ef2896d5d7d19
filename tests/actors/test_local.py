"""Local actors: what the learner takes from an actor that is already gone."""

from __future__ import annotations

import logging
import threading
import time

import psutil

from border_py.actors.local import LocalActors, LocalActorSettings
from border_py.config import build
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components

from ..conftest import make_config


def _one_crashing_actor(
    tmp_path, *env_kwargs: str, env_id: str = "tests.crash_env:CrashAfter-v0"
) -> LocalActors:
    """Local actors: one actor of ``env_id`` (``+env.kwargs.<key>=<value>``
    overrides), started with the run's initial weights."""
    config = to_plain(
        make_config(
            tmp_path,
            "env=gym",
            f"env.id={env_id}",
            *env_kwargs,
            "actor_manager.n_actors=1",
            "actor_manager.n_buffer=100",
            "actor_manager.max_restarts=1",
            "agent.hidden_sizes=[16]",
        )
    )
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    settings = build("actor_manager", config["actor_manager"])
    assert isinstance(settings, LocalActorSettings)
    actors = settings.runtime()
    actors.start(parts.launch(config, run))
    return actors


def test_an_actor_that_dies_before_the_first_poll_is_counted_and_restarted(tmp_path, caplog):
    # 2 batches of 100, then the crash
    actors = _one_crashing_actor(tmp_path, "+env.kwargs.crash_after=250")
    try:
        deadline = time.monotonic() + 60
        while actors.alive() and time.monotonic() < deadline:  # no poll: the pipe keeps it all
            time.sleep(0.05)
        assert actors.alive() == 0, "the actor did not crash"
        with caplog.at_level(logging.ERROR):
            actors.check()  # its batches, its traceback, then the restart
        assert actors.records[0].received >= 200  # both batches (n-step ends may add a few)
        assert actors.restarts() == 1  # it delivered before failing: worth a restart
        assert "RuntimeError: injected crash" in caplog.text
    finally:
        actors.stop()
    assert not [p for p in psutil.Process().children() if "border-actor" in p.name()]


def test_a_dead_actor_whose_child_holds_its_pipe_is_replaced_without_waiting_for_it(tmp_path):
    pid_file = tmp_path / "child.pid"
    actors = _one_crashing_actor(
        tmp_path, "+env.kwargs.crash_after=150", f"+env.kwargs.fork_pid_file={pid_file}"
    )
    try:
        deadline = time.monotonic() + 60
        while actors.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert actors.alive() == 0 and pid_file.is_file(), "the actor did not fork and crash"
        child = psutil.Process(int(pid_file.read_text()))
        assert child.is_running()  # it holds the dead actor's end of the notices pipe
        start = time.monotonic()
        actors.check()  # reads what the actor left, gives up on the EOF, restarts it
        assert time.monotonic() - start < 10
        assert actors.restarts() == 1 and actors.records[0].received >= 100
    finally:
        actors.stop()
        if pid_file.is_file():
            psutil.Process(int(pid_file.read_text())).kill()
    assert not [p for p in psutil.Process().children() if "border-actor" in p.name()]


def test_a_poll_with_a_negative_timeout_returns_at_once(tmp_path):
    """select.poll waits forever on a negative timeout; the local actors' poll must not."""
    actors = _one_crashing_actor(
        tmp_path,
        "+env.kwargs.hang_after=1",  # its first step hangs: its pipe stays open and empty
        f"+env.kwargs.flag={tmp_path / 'hung'}",
        env_id="tests.hang_env:HangOnce-v0",
    )
    try:
        delivered: list[int] = []
        poller = threading.Thread(target=lambda: delivered.append(actors.poll(-0.5, print)))
        poller.start()
        poller.join(10)
        assert not poller.is_alive(), "poll(-0.5) is still waiting"
        assert delivered == [0]
    finally:
        actors.stop(drain_timeout=0)
    assert not [p for p in psutil.Process().children() if "border-actor" in p.name()]
