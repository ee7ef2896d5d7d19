"""Flickering observations (``env.flicker``): DRQN's flickering screens on MinAtar, and the
flickering Breakout recipes (R2D2, DQN on single frames, DQN on 4-frame stacks)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from border_py import train
from border_py.agents.networks import MinAtarCNN
from border_py.agents.r2d2 import R2D2
from border_py.cli.recipes import lookup, recipes
from border_py.config import build
from border_py.envs.flicker import Flicker
from border_py.envs.minatar import MinAtarEnvFactory, register_minatar
from border_py.errors import ConfigError

from ..conftest import scalar_tags

BREAKOUT = "MinAtar/Breakout-v1"
register_minatar()  # at collection: minatar imports seaborn and scipy (seconds), no test's time
FLICKERING = (
    "r2d2_minatar_flickering_breakout",
    "dqn_minatar_flickering_breakout",
    "dqn_minatar_flickering_breakout_stacked",
)


def _episode(factory: MinAtarEnvFactory, seed: int, steps: int = 60) -> list[np.ndarray]:
    """The observations of ``steps`` steps (fixed actions) from ``reset(seed=seed)``; a new
    episode by a reset without a seed where one ends."""
    env = factory.make()
    obs, _ = env.reset(seed=seed)
    seen = [obs]
    for t in range(steps):
        obs, _, terminated, truncated, _ = env.step(t % 3)
        if terminated or truncated:
            obs, _ = env.reset()
        seen.append(obs)
    return seen


def test_flicker_blanks_whole_screens_at_rate_p_and_otherwise_shows_the_same_game():
    plain = _episode(MinAtarEnvFactory(BREAKOUT), seed=5, steps=200)
    flickering = _episode(MinAtarEnvFactory(BREAKOUT, flicker=0.5), seed=5, steps=200)
    blank = [not obs.any() for obs in flickering]
    assert all(not obs.any() for obs, b in zip(flickering, blank, strict=True) if b)
    assert 0.35 < np.mean(blank) < 0.65  # 201 draws at p = 0.5: 4 standard deviations
    for shown, game, b in zip(flickering, plain, blank, strict=True):
        if not b:  # the game under the blanks is the unflickered one: its RNG is untouched
            np.testing.assert_array_equal(shown, game)
    assert any(obs.any() for obs in plain)


def test_a_seeded_reset_reproduces_the_blanks_and_other_seeds_differ():
    factory = MinAtarEnvFactory(BREAKOUT, flicker=0.5)
    first, again = _episode(factory, seed=7), _episode(factory, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = _episode(factory, seed=8)
    assert [o.any() for o in first] != [o.any() for o in other]


def test_flicker_zero_and_one_are_the_plain_game_and_a_blank_screen():
    assert not isinstance(MinAtarEnvFactory(BREAKOUT).make(), Flicker)
    dark = _episode(MinAtarEnvFactory(BREAKOUT, flicker=1.0), seed=1, steps=10)
    assert not any(obs.any() for obs in dark)


def test_a_frame_stack_concatenates_the_last_screens_channels_oldest_first():
    factory = MinAtarEnvFactory(BREAKOUT, flicker=0.5, frame_stack=3)
    assert factory.spaces()[0] == gym.spaces.Box(0, 1, (12, 10, 10), np.uint8)
    screens = _episode(MinAtarEnvFactory(BREAKOUT, flicker=0.5), seed=4, steps=5)
    stacks = _episode(factory, seed=4, steps=5)  # seed 4's first episode ends at step 6
    assert not all(s.any() for s in screens)  # a blank among them
    np.testing.assert_array_equal(stacks[0], np.concatenate([screens[0]] * 3))  # reset padding
    for t in range(2, 6):
        np.testing.assert_array_equal(stacks[t], np.concatenate(screens[t - 2 : t + 1]))


@pytest.mark.parametrize("p", [-0.1, 1.5, "half"])
def test_a_bad_flicker_is_one_line(p):
    with pytest.raises(ConfigError) as info:
        MinAtarEnvFactory(BREAKOUT, flicker=p)
    assert f"flicker={p!r}: must be in [0, 1]" in str(info.value) and "\n" not in str(info.value)


def test_flicker_refuses_a_space_without_a_blank():
    with pytest.raises(ConfigError, match="flicker: needs a Box observation space holding zeros"):
        Flicker(gym.make("FrozenLake-v1"), 0.5)


def test_the_flickering_recipes_are_chosen_by_name_never_looked_up():
    assert not set(FLICKERING) & set(recipes().values())
    assert lookup(["env=minatar"]) == "dqn_minatar_breakout"  # unchanged by the variants
    assert lookup(["agent=r2d2", "env=minatar"]) is None


@pytest.mark.parametrize("name", FLICKERING)
def test_each_flickering_recipe_builds_its_env_and_agent(tiny_config, name):
    cfg = OmegaConf.to_container(tiny_config(f"experiment={name}"), resolve=True)
    assert isinstance(cfg, dict) and cfg["env"]["flicker"] == 0.5
    assert cfg["trainer"]["max_env_steps"] == 200_000
    factory = build("env", cfg["env"])
    obs_space, _ = factory.spaces()
    stacked = name.endswith("_stacked")
    assert obs_space.shape == ((16, 10, 10) if stacked else (4, 10, 10))
    assert isinstance(factory.make().unwrapped, gym.Env)


def test_the_r2d2_recipe_trains_on_the_minatar_torso(tiny_config, tmp_path):
    cfg = tiny_config(
        "experiment=r2d2_minatar_flickering_breakout",
        "trainer.max_opts=10",
        "trainer.warmup_period=100",
        "trainer.eval_interval=10",
        "trainer.record_interval=5",
    )
    summary = train(cfg)
    assert summary["opt_steps"] == 10
    assert "train/loss" in scalar_tags(tmp_path / "run")
    spaces = build("env", OmegaConf.to_container(cfg.env, resolve=True)).spaces()
    agent = R2D2(*spaces, network="minatar", hidden_sizes=[16], core_size=8)
    assert isinstance(agent.q.torso[0], MinAtarCNN)
