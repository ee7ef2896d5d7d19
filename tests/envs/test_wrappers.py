"""``env.wrappers``: gymnasium wrappers from the config, on actor and evaluation envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from border_py import train
from border_py.config import build
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError

from .. import dict_env  # noqa: F401 (registers DictCartPole-v0)
from ..conftest import FEW_FRESH_EVALS, make_config, scalar_tags

DICT_ENV = ["env=gym", "env.id=tests.dict_env:DictCartPole-v0"]
FLATTEN = "{_target_:gymnasium.wrappers.FlattenObservation}"
HALF_REWARD_IN_TRAINING = (
    "{_target_:gymnasium.wrappers.ClipReward,max_reward:0.5,training_only:true}"
)


def test_spaces_are_those_after_the_wrappers():
    plain = GymEnvFactory("DictCartPole-v0")
    assert isinstance(plain.spaces()[0], gym.spaces.Dict)
    flat = GymEnvFactory(
        "DictCartPole-v0", wrappers=[{"_target_": "gymnasium.wrappers.FlattenObservation"}]
    )
    obs_space, action_space = flat.spaces()
    assert isinstance(obs_space, gym.spaces.Box) and obs_space.shape == (4,)
    assert action_space == gym.spaces.Discrete(2)
    obs, _ = flat.make(training=True).reset(seed=0)
    assert obs.shape == (4,) and obs_space.contains(obs)


def test_a_training_only_wrapper_wraps_actor_envs_and_never_the_evaluation_env():
    factory = GymEnvFactory(
        "CartPole-v1",
        wrappers=[
            {"_target_": "gymnasium.wrappers.ClipReward", "max_reward": 0.5, "training_only": True},
            {
                "_target_": "gymnasium.wrappers.TimeLimit",
                "max_episode_steps": 7,
                "evaluation_only": True,
            },
        ],
    )
    training, evaluation = factory.make(training=True), factory.make()
    assert isinstance(training, gym.wrappers.ClipReward)
    assert not isinstance(training, gym.wrappers.TimeLimit) or training._max_episode_steps != 7
    assert isinstance(evaluation, gym.wrappers.TimeLimit) and evaluation._max_episode_steps == 7
    chain = []
    env = evaluation
    while isinstance(env, gym.Wrapper):
        chain.append(type(env))
        env = env.env
    assert gym.wrappers.ClipReward not in chain
    vector = factory.make_vector(2, seed=0)
    step = vector.step(np.zeros(2, dtype=np.int64))
    assert step.reward.tolist() == [0.5, 0.5]
    vector.close()


@pytest.mark.parametrize(
    ("wrappers", "expected"),
    [
        ("5", "env.wrappers=5: must be a list of wrapper specs"),
        ("[{foo:1}]", "env.wrappers[0]={'foo': 1}: must be a mapping with a '_target_'"),
        (
            "[{_target_:gymnasium.wrappers.NoSuchWrapper}]",
            "env.wrappers[0]._target_=gymnasium.wrappers.NoSuchWrapper: cannot be imported",
        ),
        (f"[{FLATTEN},{{_target_:math.sqrt}}]", "env.wrappers[1]._target_='math.sqrt': must be"),
        (
            "[{_target_:gymnasium.wrappers.ClipReward,max_rewrd:1}]",
            "env.wrappers[0].max_rewrd is not a parameter of gymnasium.wrappers.ClipReward"
            " (did you mean 'max_reward'",
        ),
        (
            "[{_target_:gymnasium.wrappers.TimeLimit}]",
            "env.wrappers[0]: max_episode_steps must be set (gymnasium.wrappers.TimeLimit has no"
            " default for it)",
        ),
        (
            "[{_target_:gymnasium.wrappers.ClipReward,training_only:maybe}]",
            "env.wrappers[0].training_only='maybe': must be true or false",
        ),
        (
            "[{_target_:gymnasium.wrappers.ClipReward,training_only:true,evaluation_only:true}]",
            "env.wrappers[0]: training_only and evaluation_only cannot both be true",
        ),
        (
            "[{_target_:gymnasium.wrappers.FlattenObservation,training_only:true}]",
            "env.wrappers: the actors' envs have spaces",
        ),
    ],
)
def test_bad_wrapper_specs_are_one_line_naming_the_entry(tmp_path, wrappers, expected):
    from border_py.cli.train import check_overrides

    with pytest.raises(ConfigError) as err:
        check_overrides([*DICT_ENV, f"env.wrappers={wrappers}"])
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_the_wrapper_specs_of_the_env_group_build_through_build():
    spec = {"_target_": "border_py.envs.factory.GymEnvFactory", "id": "DictCartPole-v0"}
    factory = build(
        "env", spec | {"wrappers": [{"_target_": "gymnasium.wrappers.FlattenObservation"}]}
    )
    assert factory.spaces()[0].shape == (4,)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_a_dict_observation_env_learns_through_flatten_observation(tmp_path, trainer):
    cfg = make_config(
        tmp_path,
        f"trainer={trainer}",
        *DICT_ENV,
        f"env.wrappers=[{FLATTEN}]",
        "seed=0",
        "trainer.target_return=475",
        "trainer.max_opts=25000",
        "trainer.save_interval=0",
        FEW_FRESH_EVALS,
        "progress=false",
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert (tmp_path / "run" / "checkpoints" / "best" / "policy.pt").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_a_training_only_wrapper_changes_actor_returns_not_evaluation_returns(
    tmp_path, tiny_config, trainer
):
    cfg = tiny_config(
        f"trainer={trainer}",
        *DICT_ENV,
        f"env.wrappers=[{FLATTEN},{HALF_REWARD_IN_TRAINING}]",
        "progress=false",
    )
    summary = train(cfg)
    assert summary["opt_steps"] == 300
    tags = scalar_tags(tmp_path / "run")
    returns, lengths = tags["actor/episode_return"], tags["actor/episode_length"]
    assert returns  # CartPole pays 1 per step: clipped to 0.5 in the actors' envs
    for (step, ret), (_, length) in zip(returns, lengths, strict=True):
        assert ret == pytest.approx(0.5 * length, rel=1e-5), step
    evals, eval_lengths = tags["eval/return_mean"], tags["eval/length_mean"]
    assert len(evals) == 2
    for (_, ret), (_, length) in zip(evals, eval_lengths, strict=True):
        assert ret == pytest.approx(length) and ret >= 8  # unclipped: the evaluator's own env
