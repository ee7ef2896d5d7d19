"""The returns a run's task can reach, read from its config: known for the env as registered,
scaled with its time limit, unknown as soon as something may change its rewards."""

from __future__ import annotations

import gymnasium as gym
import pytest

from border_py.reports.aggregate import group_runs
from border_py.reports.bounds import ATARI_FACTORY, GYM_FACTORY, RETURN_RANGES, return_range
from border_py.reports.collect import collect

from .synthetic import GYM, make_run


def _env(env_id: str = "CartPole-v1", **keys) -> dict:
    return {"env": {"id": env_id, **GYM, "max_episode_steps": None, **keys}}


def test_the_registered_envs_range_scales_with_its_time_limit():
    assert return_range(_env()) == (0.0, 500.0)
    assert return_range(_env(max_episode_steps=1000)) == (0.0, 1000.0)
    assert return_range(_env("Acrobot-v1", max_episode_steps=100)) == (-100.0, 0.0)
    assert return_range(_env("Pendulum-v1")) == pytest.approx((-3254.72088, 0.0))
    pong = {"env": {"id": "ALE/Pong-v5", "_target_": ATARI_FACTORY, "max_episode_steps": 50}}
    assert return_range(pong) == (-21.0, 21.0)  # the game's score, whatever the time limit


@pytest.mark.parametrize(
    "keys",
    [
        {"kwargs": {"sutton_barto_reward": True}},  # CartPole's reward of 0 per step, -1 at the end
        {"wrappers": [{"_target_": "gymnasium.wrappers.ClipReward", "max_reward": 0.5}]},
        {"wrappers": [{"_target_": "my_pkg.Scale"}]},
        {"wrappers": {"_target_": "gymnasium.wrappers.FlattenObservation"}},  # not a list
        {"_target_": "my_pkg.MyFactory"},
        {"max_episode_steps": "${oops}"},
        {"max_episode_steps": True},
    ],
)
def test_anything_that_may_change_the_rewards_makes_the_range_unknown(keys):
    assert return_range(_env(**keys)) is None


def test_observation_wrappers_and_training_only_ones_keep_the_range():
    wrappers = [
        {"_target_": "gymnasium.wrappers.RescaleObservation", "min_obs": -1, "max_obs": 1},
        {"_target_": "gymnasium.wrappers.ClipReward", "max_reward": 0.5, "training_only": True},
    ]
    assert return_range(_env(wrappers=wrappers)) == (0.0, 500.0)


def test_unknown_or_missing_tasks_have_no_range():
    assert return_range(_env("LunarLander-v3")) is None
    assert return_range({}) is None and return_range({"env": "CartPole-v1"}) is None


@pytest.mark.parametrize("env_id", [e for e, r in RETURN_RANGES.items() if r.time_limit])
def test_the_registered_time_limits_are_gymnasiums(env_id):
    assert RETURN_RANGES[env_id].factory == GYM_FACTORY
    assert gym.spec(env_id).max_episode_steps == RETURN_RANGES[env_id].time_limit


def test_a_group_knows_the_widest_range_of_its_runs_or_none(tmp_path):
    make_run(tmp_path / "0", ["seed=0"], "CartPole-v1", [1.0], env=GYM)
    make_run(tmp_path / "1", ["seed=1"], "CartPole-v1", [1.0], env=GYM | {"max_episode_steps": 800})
    _, rows = collect(tmp_path)
    assert [row.return_range for row in rows] == [(0.0, 500.0), (0.0, 800.0)]
    (group,), _ = group_runs(rows)
    assert group.return_range == (0.0, 800.0)
    make_run(tmp_path / "2", ["seed=2"], "CartPole-v1", [1.0])  # no factory: unknown
    (group,), _ = group_runs(collect(tmp_path)[1])
    assert group.return_range is None
