"""Exploration schedules in the run's env steps, end to end: the serial trainer, one actor process
and two log the epsilon of the schedule at the run's env steps (not at an actor's own, which
with two actors would lag at half the total)."""

from __future__ import annotations

import pytest

from border_py import train
from border_py.agents.exploration import linear_epsilon

from ..conftest import TINY, make_config, scalar_tags

DECAY = 1200
RUN = [
    *TINY,
    "experiment=none",
    "agent.eps_start=1.0",
    "agent.eps_final=0.1",
    f"agent.eps_decay_steps={DECAY}",
    "trainer.max_opts=null",
    "trainer.max_env_steps=1400",
    "trainer.eval_interval=null",
    "trainer.log_step=env_steps",
    "trainer.record_interval=10",
    "actor_manager.n_buffer=20",
    "actor_manager.queue_size=1",
]
# how far a logged epsilon may be from the schedule's at the logged env steps: the record's window
# (10 opt steps, 40 env steps) and the batches in flight (2 actors x 2 batches of 20) are ~120 env
# steps, 0.09 of epsilon; an actor counting only its own steps would be off by 0.3 at 800
TOLERANCE = 0.12


@pytest.mark.slow
@pytest.mark.parametrize(
    "trainer", [["trainer=serial"], ["actor_manager.n_actors=1"], ["actor_manager.n_actors=2"]]
)
def test_epsilon_follows_the_runs_env_steps_whatever_the_actors(tmp_path, trainer):
    train(make_config(tmp_path, *RUN, *trainer))
    logged = scalar_tags(tmp_path / "run")["train/epsilon"]
    checked = [(step, eps) for step, eps in logged if 300 <= step <= 1000]
    assert len(checked) >= 5, logged
    for step, eps in checked:
        assert eps == pytest.approx(linear_epsilon(step, 1.0, 0.1, DECAY), abs=TOLERANCE), step
