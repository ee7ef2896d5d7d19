"""The recipes' keys in RL Zoo's units: each key the Zoo states in env steps (epsilon decay,
random steps, warm-up, target copies) converted into border's, as each recipe's comment says.

border counts ``eps_decay_steps``, ``random_steps`` and ``warmup_period`` in env steps of the run
(all actors together), as the Zoo does; ``target_update_interval`` in opt steps, where the Zoo
(SB3) counts env steps: the Zoo's interval times its opt steps per env step
(``gradient_steps / train_freq``, -1 meaning one per env step collected).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from border_py.envs.factory import build_env_factory

from ..conftest import make_config

# RL Zoo's hyperparams/dqn.yml and sac.yml (SB3's defaults where an entry does not say)
ZOO = {
    "dqn_cartpole": {
        "n_timesteps": 50_000,
        "exploration_fraction": 0.16,
        "learning_starts": 1000,
        "target_update_interval": 10,
        "opt_per_env_step": 128 / 256,
    },
    "dqn_acrobot": {
        "n_timesteps": 100_000,
        "exploration_fraction": 0.12,
        "learning_starts": 0,
        "target_update_interval": 250,
        "opt_per_env_step": 1.0,
    },
    "dqn_lunarlander": {
        "n_timesteps": 100_000,
        "exploration_fraction": 0.12,
        "learning_starts": 0,
        "target_update_interval": 250,
        "opt_per_env_step": 1.0,
    },
    "dqn_mountaincar": {
        "n_timesteps": 120_000,
        "exploration_fraction": 0.2,
        "learning_starts": 1000,
        "target_update_interval": 600,
        "opt_per_env_step": 8 / 16,
    },
    "sac_pendulum": {"n_timesteps": 20_000, "learning_starts": 100},
    "sac_halfcheetah": {"n_timesteps": 1_000_000, "learning_starts": 10_000},
    "sac_lunarlandercontinuous": {"n_timesteps": 500_000, "learning_starts": 10_000},
    "sac_mountaincarcontinuous": {"n_timesteps": 50_000, "learning_starts": 0},
}

# the recipes' documented departures from the Zoo (docs/02-guide/recipes.md), key -> ours
DEPARTURES = {
    "dqn_cartpole": {"eps_decay_steps": 10_000, "target_update_interval": 50},  # measured
    "dqn_acrobot": {"target_update_interval": 100, "warmup_period": 1000},  # tuned
    "dqn_lunarlander": {"warmup_period": 1000},
    "sac_mountaincarcontinuous": {"warmup_period": 1000},
}


def _zoo_values(name: str) -> dict[str, int]:
    """What the Zoo's entry comes to in border's keys and units."""
    zoo = ZOO[name]
    values = {"warmup_period": zoo["learning_starts"]}
    if name.startswith("dqn"):
        values["eps_decay_steps"] = round(zoo["exploration_fraction"] * zoo["n_timesteps"])
        values["target_update_interval"] = round(
            zoo["target_update_interval"] * zoo["opt_per_env_step"]
        )
    else:  # SB3's SAC acts uniformly at random before learning_starts
        values["random_steps"] = zoo["learning_starts"]
    return values


@pytest.mark.parametrize("name", sorted(ZOO))
def test_each_recipe_key_is_the_zoos_value_in_borders_units(tmp_path, name):
    cfg = make_config(tmp_path, f"experiment={name}")
    composed = {
        "warmup_period": cfg.trainer.warmup_period,
        **{
            k: cfg.agent[k]
            for k in ("eps_decay_steps", "target_update_interval", "random_steps")
            if k in cfg.agent
        },
    }
    expected = _zoo_values(name) | DEPARTURES.get(name, {})
    assert {k: composed[k] for k in expected} == expected


def test_the_zoos_conversions_by_hand():
    # the example: MountainCar's 600 env steps at 8 opt steps per 16 env steps
    assert _zoo_values("dqn_mountaincar")["target_update_interval"] == 300
    assert _zoo_values("dqn_mountaincar")["eps_decay_steps"] == 24_000  # 20% of 120k
    assert _zoo_values("sac_pendulum") == {"warmup_period": 100, "random_steps": 100}
    assert _zoo_values("sac_halfcheetah")["random_steps"] == 10_000  # in total, however many actors


def test_dqn_mountaincar_feeds_the_network_observations_rescaled_to_unit_bounds(tmp_path):
    # the recipe's first departure from the Zoo: position (1.8 wide) and velocity (0.14 wide)
    # both reach the network on [-1, 1], from the env's Box bounds
    cfg = make_config(tmp_path, "experiment=dqn_mountaincar")
    env = build_env_factory(OmegaConf.to_container(cfg, resolve=True)).make()
    raw = gym.make("MountainCar-v0")
    try:
        assert env.observation_space.low.tolist() == [-1.0, -1.0]
        assert env.observation_space.high.tolist() == [1.0, 1.0]
        obs, _ = env.reset(seed=3)
        raw_obs, _ = raw.reset(seed=3)
        low, high = raw.observation_space.low, raw.observation_space.high
        np.testing.assert_allclose(obs, 2 * (raw_obs - low) / (high - low) - 1, rtol=1e-6)
        speeds, raw_speeds = [], []
        for _ in range(50):
            obs, *_ = env.step(2)
            raw_obs, *_ = raw.step(2)
            speeds.append(abs(obs[1]))
            raw_speeds.append(abs(raw_obs[1]))
        np.testing.assert_allclose(obs, 2 * (raw_obs - low) / (high - low) - 1, rtol=1e-5)
        assert max(raw_speeds) < 0.02 < 0.2 < max(speeds)  # the same motion, 14x larger
    finally:
        env.close()
        raw.close()
