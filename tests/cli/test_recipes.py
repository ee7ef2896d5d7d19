"""The shipped recipes (conf/experiment/*.yaml) and their lookup by task, RL Zoo's rule."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest
import yaml

from border_py import train
from border_py.cli.recipes import lookup, recipes
from border_py.cli.train import check_overrides

from ..conftest import FEW_FRESH_EVALS, make_config, run_border, run_borders

HAS_BOX2D = importlib.util.find_spec("Box2D") is not None
NEEDS_BOX2D = pytest.mark.skipif(
    not HAS_BOX2D, reason="LunarLander needs Box2D: pip install 'border-py[box2d]'"
)

# recipe -> (the agent and env options, the env id, RL Zoo's env-step budget)
CLASSIC = {
    "dqn_cartpole": (["agent=dqn", "env=cartpole"], "CartPole-v1", 50_000),
    "dqn_acrobot": (["agent=dqn", "env=gym"], "Acrobot-v1", 100_000),
    "dqn_mountaincar": (["agent=dqn", "env=gym"], "MountainCar-v0", 120_000),
    "dqn_lunarlander": (["agent=dqn", "env=gym"], "LunarLander-v3", 100_000),
    "sac_pendulum": (["agent=sac", "env=pendulum"], "Pendulum-v1", 20_000),
    "sac_mountaincarcontinuous": (["agent=sac", "env=gym"], "MountainCarContinuous-v0", 50_000),
    "sac_lunarlandercontinuous": (["agent=sac", "env=gym"], "LunarLanderContinuous-v3", 500_000),
}
BOX2D = {"dqn_lunarlander", "sac_lunarlandercontinuous"}
# R2D2's POPGym recipes: recipe -> the env id it trains (looked up by agent=r2d2 env=popgym env.id=)
POPGYM = {
    "r2d2_popgym_repeatpreviouseasy": "popgym-RepeatPreviousEasy-v0",
    "r2d2_popgym_repeatfirsteasy": "popgym-RepeatFirstEasy-v0",
    "r2d2_popgym_positiononlycartpoleeasy": "popgym-PositionOnlyCartPoleEasy-v0",
}


def _cfg_job(out: str) -> dict:
    """The config ``border train --cfg job`` printed."""
    return yaml.safe_load(out)


# -- the lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_each_classic_task_finds_its_recipe_from_agent_and_env_id(name):
    options, env_id, _ = CLASSIC[name]
    agent = options[0]
    assert lookup([agent, "env=gym", f"env.id={env_id}"]) == name
    assert lookup([*options, f"env.id={env_id}"]) == name
    assert recipes()[(agent.split("=")[1], env_id)] == name


def test_the_lookup_rule_defaults_sweeps_and_opt_outs():
    assert lookup([]) == "dqn_cartpole"  # plain `border train`: DQN on CartPole-v1
    assert lookup(["seed=3", "trainer=serial"]) == "dqn_cartpole"
    assert lookup(["env=pendulum"]) is None  # DQN on Pendulum: no recipe
    assert lookup(["agent=iqn"]) == "iqn_cartpole"
    assert lookup(["env.id=Acrobot-v1"]) == "dqn_acrobot"  # env=cartpole's id replaced
    assert lookup(["env=gym", "env.id=Taxi-v3"]) is None
    assert lookup(["experiment=dqn_cartpole", "env.id=Acrobot-v1"]) is None
    assert lookup(["env=gym", "env.id=Acrobot-v1,MountainCar-v0"]) is None  # a sweep over tasks


def test_border_train_applies_the_recipe_under_the_command_lines_keys(tmp_path):
    out = run_border(["train", "--cfg", "job", "env=gym", "env.id=Acrobot-v1"], tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = _cfg_job(out.stdout)
    assert cfg["env"]["id"] == "Acrobot-v1"
    assert cfg["agent"]["lr"] == 6.3e-4 and cfg["agent"]["hidden_sizes"] == [256, 256]
    assert cfg["trainer"]["max_env_steps"] == 100_000 and cfg["trainer"]["max_opts"] is None
    assert cfg["replay_buffer"]["capacity"] == 50_000

    mine = ["agent.lr=0.01", "trainer.max_env_steps=30000", "replay_buffer.capacity=1000"]
    out = run_border(["train", "--cfg", "job", "env=gym", "env.id=Acrobot-v1", *mine], tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = _cfg_job(out.stdout)
    assert cfg["agent"]["lr"] == 0.01  # the user's values win ...
    assert cfg["trainer"]["max_env_steps"] == 30_000 and cfg["replay_buffer"]["capacity"] == 1000
    assert cfg["agent"]["target_update_interval"] == 100  # ... over the recipe's, the rest stays


def test_plain_border_train_gets_the_cartpole_recipe_and_an_explicit_experiment_no_lookup(
    tmp_path,
):
    out = run_border(["train", "seed=5", "--cfg", "job"], tmp_path)  # overrides before --cfg too
    assert out.returncode == 0, out.stderr
    cfg = _cfg_job(out.stdout)
    assert cfg["seed"] == 5 and cfg["env"]["id"] == "CartPole-v1"
    assert cfg["trainer"]["target_return"] == 475 and cfg["agent"]["target_update_interval"] == 50
    assert cfg["trainer"]["max_env_steps"] == 50_000

    # experiment= given: that recipe alone, even for another task's env id
    args = ["train", "--cfg", "job", "experiment=dqn_cartpole", "env=gym", "env.id=Acrobot-v1"]
    out = run_border(args, tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = _cfg_job(out.stdout)
    assert cfg["env"]["id"] == "Acrobot-v1"
    assert cfg["agent"]["lr"] == 4e-3 and cfg["trainer"]["target_return"] == 475  # CartPole's


@pytest.mark.slow
def test_the_runs_log_names_the_recipe_it_looked_up_and_experiment_none_opts_out(tmp_path):
    short = ["trainer=serial", "trainer.max_env_steps=300", "trainer.warmup_period=200"]
    short += [FEW_FRESH_EVALS]  # an untrained Acrobot policy plays all 500 steps of an episode
    looked_up, plain = tmp_path / "looked_up", tmp_path / "plain"
    args = ["train", "env=gym", "env.id=Acrobot-v1", "progress=false", *short]
    calls = [[*args, f"run_dir={looked_up}"], [*args, "experiment=none", f"run_dir={plain}"]]
    for out in run_borders(calls, tmp_path):
        assert out.returncode == 0, out.stderr
    assert "recipe experiment=dqn_acrobot, looked up" in (looked_up / "train.log").read_text()
    assert "recipe experiment=" not in (plain / "train.log").read_text()
    # the recipe's network in the one, the agent's default in the other
    hidden = [
        _cfg_job((run / ".hydra" / "config.yaml").read_text())["agent"]["hidden_sizes"]
        for run in (looked_up, plain)
    ]
    assert hidden[0] == [256, 256] and hidden[1] != [256, 256]


# -- recipes on the user's config path --------------------------------------------------------

# A user's config dir: a recipe for a task no shipped recipe trains (DQN on Taxi-v3), one for a
# task a shipped recipe trains (DQN on Acrobot-v1, through an env option of the user's), and a
# file named like a shipped recipe (Hydra loads the shipped file for that name: it is not read).
USER_RECIPES = {
    "experiment/dqn_taxi.yaml": """
        # @package _global_
        defaults:
          - override /agent: dqn
          - override /env: gym
        env:
          id: Taxi-v3
        agent:
          lr: 7.0e-3
    """,
    "env/my_acrobot.yaml": """
        _target_: border_py.envs.factory.GymEnvFactory
        id: Acrobot-v1
        kwargs: {}
        max_episode_steps: null
        wrappers: []
    """,
    "experiment/my_acrobot.yaml": """
        # @package _global_
        defaults:
          - override /agent: dqn
          - override /env: my_acrobot
        agent:
          lr: 2.0e-3
    """,
    "experiment/dqn_cartpole.yaml": """
        # @package _global_
        defaults:
          - override /agent: dqn
          - override /env: gym
        env:
          id: MountainCar-v0
    """,
}


def _user_recipes(tmp_path: Path) -> Path:
    conf = tmp_path / "my_conf"
    for name, text in USER_RECIPES.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(textwrap.dedent(text))
    return conf


def test_recipes_on_the_users_config_path_are_looked_up_like_shipped_ones(tmp_path):
    conf = _user_recipes(tmp_path)
    taxi = ["env=gym", "env.id=Taxi-v3"]
    assert lookup(taxi) is None  # not on the config path: no recipe
    assert lookup(taxi, str(conf)) == "dqn_taxi"  # --config-dir
    assert lookup([*taxi, f"hydra.searchpath=[file://{conf}]"]) == "dqn_taxi"
    assert lookup([*taxi, "agent=sac"], str(conf)) is None  # another agent: not that recipe
    assert lookup([*taxi, "experiment=none"], str(conf)) is None
    # the user's recipe for a task a shipped one trains wins, found by env id or by env option
    assert lookup(["env=gym", "env.id=Acrobot-v1"]) == "dqn_acrobot"
    assert lookup(["env=gym", "env.id=Acrobot-v1"], str(conf)) == "my_acrobot"
    assert lookup(["env=my_acrobot"], str(conf)) == "my_acrobot"
    # a user file named like a shipped recipe is not read: the shipped lookups stand
    assert lookup(["env=gym", "env.id=MountainCar-v0"], str(conf)) == "dqn_mountaincar"
    assert lookup([], str(conf)) == "dqn_cartpole"
    assert recipes() == recipes(())  # the shipped recipes alone, as before
    assert ("dqn", "Taxi-v3") not in recipes()


def test_a_recipe_in_a_config_package_is_looked_up(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2] / "examples"))
    chosen = ["agent=tiny_q", "env=corridor"]
    assert lookup([*chosen, "hydra.searchpath=[pkg://tiny_rl.conf]"]) == "tiny_q_corridor"
    assert lookup(chosen) is None


def test_border_train_applies_a_recipe_from_the_users_config_dir(tmp_path):
    conf = _user_recipes(tmp_path)
    args = ["train", "--cfg", "job", "--config-dir", str(conf), "env=gym", "env.id=Taxi-v3"]
    out = run_border([*args, "agent.hidden_sizes=[8]"], tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = _cfg_job(out.stdout)
    assert cfg["env"]["id"] == "Taxi-v3" and cfg["agent"]["lr"] == 7e-3  # the user's recipe
    assert cfg["agent"]["hidden_sizes"] == [8]  # under the command line's keys
    applied = "border: recipe dqn_taxi applied (looked up by agent=dqn, env.id=Taxi-v3)"
    assert applied in out.stderr  # --cfg says which recipe, the user's one too


# -- the recipes ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_each_recipe_states_its_budget_replay_ratio_and_intervals_in_env_steps(tmp_path, name):
    _, env_id, budget = CLASSIC[name]
    for trainer in ("async", "serial"):
        cfg = make_config(tmp_path, f"experiment={name}", f"trainer={trainer}")
        assert cfg.env.id == env_id
        assert cfg.trainer.max_env_steps == budget and cfg.trainer.max_opts is None
        assert cfg.trainer.replay_ratio > 0  # one ratio, both trainers
        assert cfg.trainer.eval_env_interval > 0 and cfg.trainer.eval_interval is None
        assert cfg.trainer.target_return is not None
    if name in BOX2D and not HAS_BOX2D:
        pytest.skip("LunarLander needs Box2D: pip install 'border-py[box2d]'")
    check_overrides([f"experiment={name}"])  # builds the env, agent, buffer and trainer
    check_overrides([f"experiment={name}", "trainer=serial"])


@pytest.mark.parametrize("name", sorted(POPGYM))
def test_each_popgym_recipe_is_looked_up_for_r2d2_and_states_an_hour_budget(tmp_path, name):
    env_id = POPGYM[name]
    assert lookup(["agent=r2d2", "env=popgym", f"env.id={env_id}"]) == name
    assert recipes()[("r2d2", env_id)] == name
    assert lookup(["agent=dqn", "env=popgym", f"env.id={env_id}"]) is None  # the baseline: none
    cfg = make_config(tmp_path, f"experiment={name}")
    assert cfg.env.id == env_id and cfg.trainer._target_.endswith("SerialSettings")
    assert cfg.replay_buffer._target_.endswith("SequenceReplayBuffer")
    assert 0 < cfg.trainer.max_env_steps <= 300_000 and cfg.trainer.max_opts is None
    assert cfg.trainer.final_eval_episodes == 100  # the 100 fresh episodes
    assert cfg.agent.adam_eps == 1e-8  # the paper's 1e-3 stalls on POPGym's small rewards
    check_overrides([f"experiment={name}"])  # builds the env, agent, buffer and trainer


@NEEDS_BOX2D
def test_the_box2d_extra_makes_lunarlander_available():
    import gymnasium as gym

    env = gym.make("LunarLanderContinuous-v3")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8,) and env.action_space.shape == (2,)
    env.close()


# -- learning -------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_acrobot_recipe_learns_to_swing_up_on_a_small_budget(tmp_path):
    """The recipe (async, 2 actors, one opt step per env step) passes Acrobot-v1's threshold of -100
    (random play: -500) within 30k env steps; its own budget is RL Zoo's 100k."""
    cfg = make_config(
        tmp_path,
        "experiment=dqn_acrobot",
        "seed=0",
        "trainer.max_env_steps=30000",
        "trainer.target_return=-100",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["solved_at"] is not None, summary
    assert summary["best_return"] >= -100 and summary["solved_at"]["env_steps"] <= 30_000


@pytest.mark.parametrize(
    "name", ["dqn_acrobot", "dqn_mountaincar", "dqn_lunarlander", "sac_mountaincarcontinuous"]
)
def test_each_recipe_has_a_search_space_around_it(name):
    from border_py.tuning.space import load_space

    space = load_space(name, [])
    assert space.study_name == name and f"experiment={name}" in space.overrides
    assert space.params and all(key.startswith(("agent.", "trainer.")) for key in space.params)
