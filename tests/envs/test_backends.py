"""env.backend: each backend's steps against today's gymnasium path, autoreset, one-line errors."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN
from border_py.config import build
from border_py.envs.factory import GymEnvFactory
from border_py.envs.vector import VectorStep
from border_py.errors import ConfigError

pytest.importorskip("ale_py")

from border_py.envs.atari import AtariEnvFactory

PONG = {"repeat_action_probability": 0.0, "noop_max": 1, "max_episode_steps": 12}


def rollout(env, actions: np.ndarray) -> tuple[np.ndarray, list[VectorStep]]:
    """The first observations and every step of ``env`` under ``actions``; closes it."""
    first = env.obs.copy()
    try:
        return first, [env.step(a) for a in actions]
    finally:
        env.close()


def pong(backend: str, n: int = 2, **kw) -> tuple[np.ndarray, list[VectorStep]]:
    actions = np.random.default_rng(0).integers(0, 6, size=(30, n))
    env = AtariEnvFactory("ALE/Pong-v5", backend=backend, **(PONG | kw)).make_vector(n, 3)
    return rollout(env, actions)


def assert_autoreset_right(first: np.ndarray, steps: list[VectorStep]) -> None:
    """Built from the episode ends: a ``next_obs`` continues the stack acted on (never a reset
    stack), an episode's first stack is its first frame repeated, and the next step continues it."""
    obs, ends = first, 0
    for step in steps:
        assert np.array_equal(step.next_obs[:, :-1], obs[:, 1:])
        done = step.terminated | step.truncated
        for i in np.flatnonzero(done):
            assert (step.obs[i] == step.obs[i, -1]).all()  # reset padding
            assert not np.array_equal(step.obs[i], step.next_obs[i])
        assert np.array_equal(step.obs[~done], step.next_obs[~done])
        ends += int(done.sum())
        obs = step.obs
    assert ends >= 2  # the rollout crosses episode ends


def test_envpool_steps_are_the_gymnasium_paths_bitwise():
    pytest.importorskip("envpool")
    first_g, gym_steps = pong("gymnasium")
    first_e, pool_steps = pong("envpool")
    assert first_e.dtype == np.uint8 and first_e.shape == (2, 4, 84, 84)
    assert np.array_equal(first_g, first_e)
    for g, e in zip(gym_steps, pool_steps, strict=True):
        for key in ("next_obs", "obs", "reward", "terminated", "truncated"):
            assert np.array_equal(getattr(g, key), getattr(e, key)), key
        assert (g.episode_returns, g.episode_lengths) == (e.episode_returns, e.episode_lengths)
    assert_autoreset_right(first_e, pool_steps)


def test_ale_vector_steps_differ_from_the_gymnasium_paths_only_in_pixels():
    """The documented difference: ale-py's frames differ from gymnasium's by a few pixels (and,
    with FIRE on reset, by one agent step: ale-py presses it within its reset)."""
    first_g, gym_steps = pong("gymnasium", fire_reset=False)
    first_a, ale_steps = pong("ale_vector", fire_reset=False)
    assert first_a.dtype == np.uint8 and first_a.shape == first_g.shape
    for g, a in zip(gym_steps, ale_steps, strict=True):
        for key in ("reward", "terminated", "truncated"):
            assert np.array_equal(getattr(g, key), getattr(a, key)), key
        assert (g.episode_returns, g.episode_lengths) == (a.episode_returns, a.episode_lengths)
        assert (g.next_obs != a.next_obs).mean() < 0.02  # the paddles and ball, off by a pixel
    assert_autoreset_right(first_a, ale_steps)
    assert_autoreset_right(*pong("ale_vector"))  # with ale-py's FIRE


def test_gymnasium_async_steps_are_the_gymnasium_paths_bitwise():
    factory = GymEnvFactory("CartPole-v1", max_episode_steps=20)
    actions = np.random.default_rng(0).integers(0, 2, size=(45, 3))
    first_s, serial = rollout(factory.make_vector(3, 5), actions)
    env = GymEnvFactory("CartPole-v1", max_episode_steps=20, backend="gymnasium_async")
    first_a, subprocs = rollout(env.make_vector(3, 5), actions)
    assert np.array_equal(first_s, first_a)
    ends = 0
    for s, a in zip(serial, subprocs, strict=True):
        for key in ("next_obs", "obs", "reward", "terminated", "truncated"):
            assert np.array_equal(getattr(s, key), getattr(a, key)), key
        assert (s.episode_returns, s.episode_lengths) == (a.episode_returns, a.episode_lengths)
        ends += len(s.episode_lengths)
    assert ends >= 6


@pytest.mark.parametrize(
    ("env", "backend", "message"),
    [
        ("cartpole", "nope", "env.backend='nope': must be one of gymnasium, gymnasium_async"),
        ("cartpole", "envpool", "env.backend=envpool: Atari only (env=atari)"),
        ("cartpole", "ale_vector", "env.backend=ale_vector: Atari only (env=atari)"),
        ("atari", "nope", "env.backend='nope': must be one of"),
    ],
)
def test_a_backend_the_env_cannot_use_is_one_line(env, backend, message):
    spec = {"_target_": "border_py.envs.factory.GymEnvFactory", "id": "CartPole-v1"}
    if env == "atari":
        spec = {"_target_": "border_py.envs.atari.AtariEnvFactory", "id": "ALE/Pong-v5"}
    with pytest.raises(ConfigError) as err:
        build("env", spec | {"backend": backend})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_missing_backend_package_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool raises ImportError
    spec = {"_target_": "border_py.envs.atari.AtariEnvFactory", "id": "ALE/Pong-v5"}
    with pytest.raises(ConfigError) as err:
        build("env", spec | {"backend": "envpool"})
    assert str(err.value).startswith("env.backend=envpool: needs the envpool package")
    assert "pip install 'border-py[envpool]'" in str(err.value)


def test_the_cpp_backends_refuse_what_they_cannot_do():
    pytest.importorskip("envpool")
    with pytest.raises(ConfigError, match="terminal_on_life_loss=true needs backend=gymnasium"):
        AtariEnvFactory("ALE/Pong-v5", backend="envpool", terminal_on_life_loss=True)
    with pytest.raises(ConfigError, match="needs noop_max >= 1"):
        AtariEnvFactory("ALE/Pong-v5", backend="envpool", noop_max=0)


def test_a_resume_with_a_cpp_backend_starts_fresh_episodes_and_says_so(caplog):
    pytest.importorskip("envpool")
    factory = AtariEnvFactory("ALE/Pong-v5", backend="envpool", **PONG)
    agent = DQN(factory.spaces()[0], factory.spaces()[1], hidden_sizes=[8], n_step=3)
    sampler = Sampler(factory, agent, 2, 0, replayable=True, frame_stack=4)
    stats = SampleStats()
    for _ in range(5):
        sampler.step(stats)
    state = sampler.state()
    assert state["env"] == {"backend": "envpool"}
    resumed = Sampler(factory, agent, 2, 0, replayable=True, frame_stack=4)
    with caplog.at_level(logging.WARNING):
        resumed.restore(state)
    assert caplog.text.count("starts fresh episodes") == 1
    assert resumed.frames is not None and resumed.frames.next_id == state["frames"]["next_id"] + 2
    out = resumed.sample(8, SampleStats())  # fresh windows: transitions from the new episodes
    assert len(out) >= 8
    sampler.close()
    resumed.close()
