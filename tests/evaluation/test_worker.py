"""The evaluator process's handle: what the learner takes from an evaluator that is already gone;
how it ends one that is evaluating."""

from __future__ import annotations

import time

import psutil
import pytest

from border_py.config import build
from border_py.errors import ConfigError, RunError
from border_py.evaluation.process import EvalSettings
from border_py.evaluation.worker import EvalWorker
from border_py.overrides import to_plain
from border_py.processes.children import forkserver_context
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components

from ..conftest import make_config


def _evaluator(config: dict, episodes: int, max_restarts: int) -> tuple:
    """The run's agent, and an evaluator process for it (episodes of at most 50 steps)."""
    agent = build_components(config, RunSettings.of(config), 0).agent
    worker = EvalWorker(
        forkserver_context(),
        config,
        EvalSettings(episodes=episodes, seed=0, max_steps=50, agent_seed=0),
        agent.policy_state(),
        max_restarts=max_restarts,
        heartbeat_timeout=60,
    )
    return agent, worker


def test_a_result_sent_just_before_the_evaluator_died_is_delivered_after_its_restart(tmp_path):
    config = to_plain(make_config(tmp_path, "agent.hidden_sizes=[16]"))
    agent, worker = _evaluator(config, episodes=2, max_restarts=1)
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


def test_an_os_error_of_the_evaluators_env_is_a_failure_with_its_traceback(tmp_path):
    config = to_plain(
        make_config(
            tmp_path,
            "agent.hidden_sizes=[16]",
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0",
            "+env.kwargs.crash_after=5",
            "+env.kwargs.os_error=true",
        )
    )
    agent, worker = _evaluator(config, episodes=1, max_restarts=2)
    try:
        assert worker.request(1, 100, agent.policy_state(), lambda: ({}, {"opt": 1}))
        deadline = time.monotonic() + 60
        with pytest.raises(RunError) as failed:  # not mistaken for the learner's pipe closing
            while time.monotonic() < deadline:
                worker.check()
                time.sleep(0.05)
        assert "failed (exit code 1) before delivering anything: OSError: injected crash" in str(
            failed.value
        )
        assert worker.restarts() == 0
    finally:
        worker.close()
    assert not [p for p in psutil.Process().children() if "border-evaluator" in p.name()]


def test_close_ends_an_evaluation_in_progress_and_the_evaluator_exits_by_itself(tmp_path):
    """The learner's shutdown (a Ctrl-C during a long final evaluation) is seen within a step: the
    evaluator leaves its episodes and exits 0, not killed after close()'s timeout."""
    flag = tmp_path / "playing"
    slow = f"{{_target_:tests.slow_episodes.SlowOnSeeds,first:0,last:99,flag:'{flag}'}}"
    config = to_plain(make_config(tmp_path, "agent.hidden_sizes=[16]", f"env.wrappers=[{slow}]"))
    agent, worker = _evaluator(config, episodes=1, max_restarts=0)
    try:  # 100 episodes of 0.2 s steps: minutes
        assert worker.request(3, 300, agent.policy_state(), lambda: ({}, {}), range(100))
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert flag.exists(), "the evaluation never began"
    finally:
        worker.close()
    assert worker.process.exitcode == 0  # a kill: -9


def test_the_evaluator_runs_at_its_niceness_and_a_restart_keeps_it(tmp_path):
    config = to_plain(make_config(tmp_path, "agent.hidden_sizes=[16]"))
    agent = build_components(config, RunSettings.of(config), 0).agent
    worker = EvalWorker(
        forkserver_context(),
        config,
        EvalSettings(episodes=1, seed=0, max_steps=50, agent_seed=0),
        agent.policy_state(),
        max_restarts=1,
        heartbeat_timeout=60,
        nice=7,
    )
    nice = max(7, psutil.Process().nice())  # a process may not raise its priority back
    try:
        assert psutil.Process(worker.process.pid).nice() == nice
        worker.process.kill()
        worker.process.join(10)
        worker.check()  # the next incarnation
        assert worker.restarts() == 1
        assert psutil.Process(worker.process.pid).nice() == nice
    finally:
        worker.close()


def test_a_bad_evaluator_niceness_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.eval_nice=20: must be an int in \[0, 19\]"):
        build("trainer", to_plain(make_config(tmp_path, "trainer.eval_nice=20"))["trainer"])
