"""A run resumed with more actors keeps its exploration where it stood (the CLI): DQN's epsilon
goes on from the checkpoint's env steps instead of restarting at ``eps_start`` in the added actor,
and SAC's random phase, over before the stop, is not done again."""

from __future__ import annotations

import json

import pytest

from ..conftest import TINY, run_border, scalar_tags

FIRST = [
    *TINY,
    "experiment=none",
    "actor_manager.n_actors=1",
    "actor_manager.n_buffer=20",
    "actor_manager.queue_size=1",
    "trainer.max_opts=null",
    "trainer.eval_interval=null",
    "trainer.log_step=env_steps",
    "trainer.record_interval=10",
]


def _train(args: list[str], tmp_path) -> None:
    out = run_border(["train", *args], tmp_path)
    assert out.returncode == 0, out.stderr


def _env_steps(run_dir) -> int:
    return int(json.loads((run_dir / "result.json").read_text())["summary"]["env_steps"])


@pytest.mark.slow
def test_a_resume_with_an_added_actor_continues_epsilon(tmp_path):
    run_dir = tmp_path / "run"
    dqn = ["agent.eps_start=1.0", "agent.eps_final=0.1", "agent.eps_decay_steps=2000"]
    _train([*FIRST, *dqn, "trainer.max_env_steps=800", f"run_dir={run_dir}"], tmp_path)
    stopped_at = _env_steps(run_dir)
    _train(
        [f"resume={run_dir}", "actor_manager.n_actors=2", "trainer.max_env_steps=1400"], tmp_path
    )
    eps = scalar_tags(run_dir)["train/epsilon"]
    before = [v for s, v in eps if s <= stopped_at]
    after = [v for s, v in eps if s > stopped_at]
    assert before and after
    # the schedule at 800 of 2000 env steps is 0.64; the added actor starting afresh would log
    # the two actors' mean near (1.0 + 0.64) / 2 = 0.82 at first
    assert max(after) <= min(before) + 0.02, (before, after)
    assert max(after) < 0.7


@pytest.mark.slow
def test_a_resume_with_an_added_actor_does_not_redo_sacs_random_phase(tmp_path):
    run_dir = tmp_path / "run"
    sac = ["agent=sac", "env=pendulum", "agent.random_steps=300", "agent.batch_size=32"]
    _train([*FIRST, *sac, "trainer.max_env_steps=600", f"run_dir={run_dir}"], tmp_path)
    stopped_at = _env_steps(run_dir)
    # 600 env steps after the stop: the resume collects warmup_period (200) anew before its first
    # opt step (no saved buffer), and the opt steps after it must leave records under any load
    _train(
        [f"resume={run_dir}", "actor_manager.n_actors=2", "trainer.max_env_steps=1200"], tmp_path
    )
    phase = scalar_tags(run_dir)["train/random_phase"]
    assert max(v for s, v in phase if s < 300) == 1.0, phase  # uniform actions, the first 300
    after = [v for s, v in phase if s > stopped_at]
    assert after and set(after) == {0.0}, phase  # the added actor acts with the policy at once
