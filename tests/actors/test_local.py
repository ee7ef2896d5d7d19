"""The local actor manager: what the learner takes from an actor that is already gone."""

from __future__ import annotations

import logging
import time

import psutil

from border_py.actors.backend import Launch
from border_py.actors.local import ActorManager
from border_py.config import build
from border_py.overrides import to_plain
from border_py.trainers.components import build_components

from ..conftest import make_config


def test_an_actor_that_dies_before_the_first_poll_is_counted_and_restarted(tmp_path, caplog):
    config = to_plain(
        make_config(
            tmp_path,
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0",
            "+env.kwargs.crash_after=250",  # 2 batches of 100, then the crash
            "actor_manager.n_actors=1",
            "actor_manager.n_buffer=100",
            "actor_manager.max_restarts=1",
            "agent.hidden_sizes=[16]",
        )
    )
    parts = build_components(config, 0)
    manager = build("actor_manager", config["actor_manager"])
    assert isinstance(manager, ActorManager)
    agent = parts.agent
    manager.start(Launch(config, parts.env_factory.spaces(), agent, agent.policy_state(), 0))
    try:
        deadline = time.monotonic() + 60
        while manager.alive() and time.monotonic() < deadline:  # no poll: the pipe keeps it all
            time.sleep(0.05)
        assert manager.alive() == 0, "the actor did not crash"
        with caplog.at_level(logging.ERROR):
            manager.check()  # its batches, its traceback, then the restart
        assert manager.records[0].received >= 200  # both batches (n-step ends may add a few)
        assert manager.restarts() == 1  # it delivered before failing: worth a restart
        assert "RuntimeError: injected crash" in caplog.text
    finally:
        manager.stop()
    assert not [p for p in psutil.Process().children() if "border-actor" in p.name()]
