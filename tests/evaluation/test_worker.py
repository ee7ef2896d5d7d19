"""The evaluator process's handle: what the learner takes from an evaluator that is already gone."""

from __future__ import annotations

import psutil

from border_py.evaluation.worker import EvalSettings, EvalWorker
from border_py.overrides import to_plain
from border_py.processes import forkserver_context
from border_py.trainers.components import build_components

from ..conftest import make_config


def test_a_result_sent_just_before_the_evaluator_died_is_delivered_after_its_restart(tmp_path):
    config = to_plain(make_config(tmp_path, "agent.hidden_sizes=[16]"))
    agent = build_components(config, 0).agent
    worker = EvalWorker(
        forkserver_context(),
        config,
        EvalSettings(episodes=2, seed=0, max_steps=50),
        agent.policy_state(),
        max_restarts=1,
        heartbeat_timeout=60,
    )
    try:
        assert worker.request(7, 700, agent.policy_state(), lambda: ({}, {"opt": 7}))
        assert worker.results.poll(60), "no result from the evaluator"
        worker.process.kill()  # dies with its result unread in the pipe
        worker.process.join(10)
        worker.check()  # reads what it left (the result), then restarts it
        assert worker.restarts() == 1
        assert worker.busy  # not collected yet: the end of a run still waits for it
        (outcome,) = worker.poll()
        assert (outcome.opt_steps, outcome.env_steps) == (7, 700)
        assert len(outcome.result.episode_returns) == 2
        assert not worker.busy
        assert worker.poll(0.5) == []  # taken once, and never evaluated again
    finally:
        worker.close()
    assert not [p for p in psutil.Process().children() if "border-evaluator" in p.name()]
