"""Stable-Baselines3's DQN given border-py's MinAtar Breakout recipe: the baseline of
``benchmarks/time_to_solve.py --sb3 --target 5 experiment=dqn_minatar_breakout``.

One seed per process; it reads border's configs, so border-py and its ``[bench,minatar]`` extras
share its Python:

    python benchmarks/sb3_dqn_minatar.py 3 trainer.target_return=5
    python benchmarks/sb3_dqn_minatar.py --prepare recipe.json trainer.target_return=5  # SB3's numbers
    python benchmarks/sb3_dqn_minatar.py 3 --config recipe.json   # as time_to_solve.py runs it

Every number comes from the recipe, composed as ``border train`` composes it
(``experiment=dqn_minatar_breakout`` unless another is named, then the Hydra overrides given), so
that a change of the recipe or an override carries over to SB3:

- the envs: border's own ``env`` factory, one env to train and one to evaluate
  (``MinAtar/Breakout-v1``: uint8 0/1 grids, channels first (C, 10, 10); sticky actions 0.1 and
  difficulty ramping, MinAtar's defaults);
- the Q-network: border's torso for ``agent.network`` (MinAtar's: 16 3x3 filters, stride 1, ReLU,
  flattened) as SB3's features extractor, then ``agent.hidden_sizes`` (128) and a linear output
  per action, layer for layer border's; no input scaling (``normalize_images=False``: border
  scales 0/1 grids by 1);
- Adam with ``agent.lr`` and ``agent.adam_eps``, ``agent.batch_size``, ``agent.gamma``, the Huber
  loss, ``agent.max_grad_norm``, ``agent.n_step`` returns (SB3's ``n_steps``), a replay of
  ``replay_buffer.capacity`` and ``learning_starts = trainer.warmup_period``;
- the update period: border's ``batch_size / trainer.replay_ratio`` env steps per opt step
  (``trainer.opt_interval`` where set) as ``train_freq`` env steps with one gradient step, or, below
  one env step, ``gradient_steps`` per env step; the hard target copy every
  ``agent.target_update_interval`` opt steps as ``target_update_interval`` env steps;
- epsilon ``agent.eps_start`` -> ``agent.eps_final`` linearly over ``agent.eps_decay_steps`` env
  steps (SB3's ``exploration_fraction`` is a share of the run: ``eps_decay_steps /
  trainer.max_env_steps``);
- a greedy evaluation of ``trainer.eval_episodes`` episodes every ``trainer.eval_env_interval`` env
  steps on its own env, the run stopped at the first mean >= ``trainer.target_return``, after
  ``trainer.max_env_steps`` env steps at the most; one torch thread, on ``device``.

What SB3 2.9.2's DQN runs otherwise (``unmatched`` in the settings ``--prepare`` prints): no
double DQN (``agent.double_dqn``: SB3 bootstraps from ``max_a Q_target(s', a)``), and uniform
random actions until ``learning_starts`` (border's warm-up acts epsilon-greedily on the schedule,
epsilon above 0.95 there). What it cannot run at all is refused with one line and exit 2: another agent than
border's DQN, a dueling head, the MSE loss, soft target updates, another replay than the uniform
one, an update period that is no whole number of env steps (nor of opt steps per env step), a
target period that is no whole number of env steps, no env-step budget, evaluation or target.

The last line is ``RESULT {json}``: ``env_steps`` and ``seconds`` (from the start of training,
evaluations included) at the first evaluation >= the target, or nulls.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from cli_args import parse_with_overrides
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import DummyVecEnv

from border_py.agents.networks import torso
from border_py.config import config_dir, require
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.errors import ConfigError, first_line, printable

RECIPE = "experiment=dqn_minatar_breakout"
RUN_KEYS = ("agent", "env", "replay_buffer", "trainer", "device")  # what --config holds
BORDER_DQN = "border_py.agents.dqn.DQN"
UNIFORM_REPLAY = "border_py.replay.uniform.UniformReplayBuffer"


class BorderTorso(BaseFeaturesExtractor):
    """Border's torso for ``network`` (:func:`border_py.agents.networks.torso`) as SB3's features
    extractor: the same layers, the same scaling of the inputs.

    Args:
        observation_space: the env's observation space.
        network: border's ``agent.network`` (``minatar``: MinAtar's CNN).
    """

    def __init__(self, observation_space: gym.Space, network: str) -> None:
        layers, features = torso(observation_space, network)
        super().__init__(observation_space, features)
        self.layers = layers

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.layers(observations)


def recipe(overrides: list[str]) -> dict[str, Any]:
    """The resolved ``train`` config of ``experiment=dqn_minatar_breakout`` (unless ``overrides``
    name another experiment) with ``overrides``.

    Raises:
        ConfigError: an override Hydra refuses, or a value left missing.
    """
    # Hydra only here: a --config run, timed by time_to_solve.py, starts without it (its import
    # and the composition take about a second, SB3's to pay otherwise)
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from border_py.overrides import to_plain

    if not any(word.startswith("experiment=") for word in overrides):
        overrides = [RECIPE, *overrides]
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
            return to_plain(compose("train", overrides=overrides))
    except HydraException as exc:
        raise ConfigError(first_line(exc)) from None


def whole(value: float) -> int | None:
    """``value`` as an int where it is a whole number (to rounding), else None."""
    rounded = round(value)
    return rounded if rounded >= 1 and math.isclose(value, rounded) else None


def env_steps_per_opt(config: dict[str, Any]) -> float:
    """Border's env steps per opt step: ``trainer.opt_interval`` where set (the serial trainer),
    else ``agent.batch_size / trainer.replay_ratio``."""
    trainer = config["trainer"]
    if trainer.get("opt_interval") is not None:
        return float(trainer["opt_interval"])
    ratio = trainer["replay_ratio"]
    require("trainer.replay_ratio", ratio is not None, "set: SB3 updates on a fixed period", ratio)
    return config["agent"]["batch_size"] / ratio


def update_period(per_opt: float) -> tuple[int, int]:
    """SB3's ``(train_freq, gradient_steps)`` for ``per_opt`` env steps per opt step.

    Raises:
        ConfigError: neither ``per_opt`` nor its inverse is a whole number.
    """
    steps, updates = whole(per_opt), whole(1 / per_opt)
    if steps is not None:
        return steps, 1
    if updates is not None:
        return 1, updates
    raise ConfigError(
        f"trainer.replay_ratio: {per_opt:g} env steps per opt step (agent.batch_size /"
        " trainer.replay_ratio, or trainer.opt_interval): SB3 needs a whole number of env steps"
        " per opt step or of opt steps per env step"
    )


def check_recipe(config: dict[str, Any]) -> None:
    """Refuse what SB3's DQN cannot run as border would.

    Raises:
        ConfigError: naming the first such key and what SB3 allows.
    """
    agent, trainer = config["agent"], config["trainer"]
    require("agent._target_", agent["_target_"] == BORDER_DQN, "agent=dqn's", agent["_target_"])
    checks = (
        ("agent.dueling", not agent["dueling"], "false: SB3's DQN has no dueling head"),
        ("agent.loss", agent["loss"] == "huber", "huber: SB3's DQN loss"),
        ("agent.tau", agent["tau"] is None, "null: hard target copies (soft ones not mapped)"),
        (
            "replay_buffer._target_",
            config["replay_buffer"]["_target_"] == UNIFORM_REPLAY,
            "uniform",
        ),
        ("trainer.max_env_steps", trainer["max_env_steps"] is not None, "set: SB3's budget"),
        ("trainer.eval_env_interval", trainer["eval_env_interval"] is not None, "set"),
        ("trainer.target_return", trainer["target_return"] is not None, "set: e.g. 5"),
    )
    for key, ok, expected in checks:
        section, _, name = key.partition(".")
        require(key, ok, expected, config[section][name])


def sb3_settings(config: dict[str, Any]) -> dict[str, Any]:
    """What SB3 is given for the resolved border config ``config``.

    Returns:
        ``dqn`` (``stable_baselines3.DQN``'s keyword arguments, without the policy and env; the
        features extractor's class is added by :func:`build_model`), ``total_timesteps``,
        ``eval_every`` (env steps), ``eval_episodes``, ``target``, and ``unmatched``: what SB3
        runs otherwise than border.

    Raises:
        ConfigError: a setting SB3's DQN cannot take (:func:`check_recipe`, :func:`update_period`).
    """
    check_recipe(config)
    agent, trainer = config["agent"], config["trainer"]
    per_opt = env_steps_per_opt(config)
    train_freq, gradient_steps = update_period(per_opt)
    target_period = whole(agent["target_update_interval"] * per_opt)
    require(
        "agent.target_update_interval",
        target_period is not None,
        f"a whole number of env steps ({per_opt:g} per opt step)",
        agent["target_update_interval"],
    )
    total = int(trainer["max_env_steps"])
    unmatched = ["uniform random actions until learning_starts (border: epsilon-greedy)"]
    if agent["double_dqn"]:
        unmatched.insert(0, "agent.double_dqn=true: SB3 bootstraps from max_a Q_target(s', a)")
    clip = agent["max_grad_norm"]
    return {
        "dqn": {
            "learning_rate": agent["lr"],
            "buffer_size": config["replay_buffer"]["capacity"],
            "learning_starts": trainer["warmup_period"],
            "batch_size": agent["batch_size"],
            "gamma": agent["gamma"],
            "n_steps": agent["n_step"],
            "train_freq": train_freq,
            "gradient_steps": gradient_steps,
            "target_update_interval": target_period,
            "exploration_initial_eps": agent["eps_start"],
            "exploration_final_eps": agent["eps_final"],
            "exploration_fraction": agent["eps_decay_steps"] / total,
            "max_grad_norm": math.inf if clip is None else clip,
            "policy_kwargs": {
                "features_extractor_kwargs": {"network": agent["network"]},
                "net_arch": list(agent["hidden_sizes"]),
                "normalize_images": False,
                "optimizer_kwargs": {"eps": agent["adam_eps"]},
            },
            "device": config["device"],
        },
        "total_timesteps": total,
        "eval_every": trainer["eval_env_interval"],
        "eval_episodes": trainer["eval_episodes"],
        "target": trainer["target_return"],
        "unmatched": unmatched,
    }


def build_model(settings: dict[str, Any], env: gym.Env, seed: int) -> DQN:
    """SB3's DQN of :func:`sb3_settings`'s ``settings`` on ``env``, with :class:`BorderTorso`."""
    kwargs = dict(settings["dqn"])
    kwargs["policy_kwargs"] = {**kwargs["policy_kwargs"], "features_extractor_class": BorderTorso}
    return DQN("MlpPolicy", env, seed=seed, **kwargs)


def run(config: dict[str, Any], settings: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train until the first evaluation reaches the target, or the budget: the RESULT's fields."""
    envs: GymEnvFactory = build_env_factory(config)
    model = build_model(settings, envs.make(training=True), seed)
    evaluation_env = DummyVecEnv([lambda: Monitor(envs.make())])
    evaluation_env.seed(seed + 1)
    evaluation = EvalCallback(
        evaluation_env,
        callback_on_new_best=StopTrainingOnRewardThreshold(settings["target"], verbose=0),
        n_eval_episodes=settings["eval_episodes"],
        eval_freq=settings["eval_every"],
        deterministic=True,
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=settings["total_timesteps"], callback=evaluation)
    solved = evaluation.best_mean_reward >= settings["target"]
    return {
        "seed": seed,
        "env_steps": model.num_timesteps if solved else None,
        "seconds": round(time.perf_counter() - start, 2) if solved else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed", type=int, nargs="?", default=0)
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--prepare", type=Path, help="write the recipe for --config, then stop")
    given.add_argument("--config", type=Path, help="the recipe --prepare wrote (no overrides)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the recipe")
    args = parse_with_overrides(parser)
    if args.config and args.overrides:
        parser.error("--config: the recipe is composed already; give the overrides to --prepare")
    try:
        config = json.loads(args.config.read_text()) if args.config else recipe(args.overrides)
        settings = sb3_settings(config)
    except ConfigError as exc:
        print(f"sb3_dqn_minatar.py: error: {printable(first_line(exc))}", file=sys.stderr)
        sys.exit(2)
    if args.prepare:
        args.prepare.write_text(json.dumps({key: config[key] for key in RUN_KEYS}))
        print("SETTINGS " + json.dumps(settings))
        return
    torch.set_num_threads(1)
    print("RESULT " + json.dumps(run(config, settings, args.seed)))


if __name__ == "__main__":
    main()
