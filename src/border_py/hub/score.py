"""The score a model card reports: a fresh evaluation on reset seeds the run never evaluated on.

The card's evaluation plays seeds of its own stream, ``derive_seed(seed, "hub", "eval")``, moved
past the run's evaluation window when the two would overlap
(:func:`~border_py.evaluation.seeds.fresh_seeds`), so that its score is measured on episodes the
run was never selected on (a best checkpoint is the one that did best on the run's own evaluation
episodes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from border_py.agents.base import Agent
from border_py.config import is_int
from border_py.envs.factory import GymEnvFactory
from border_py.evaluation.evaluator import EvalResult, Evaluator
from border_py.evaluation.seeds import fresh_seeds
from border_py.resources import MAX_EPISODE_STEPS, at_most
from border_py.runs.settings import RunSettings

__all__ = ["Score", "card_seeds", "eval_max_steps", "fresh_score"]

DEFAULT_MAX_STEPS = 10000  # an evaluation episode's step cap when the run's config has none


def card_seeds(root_seed: int, n: int) -> range:
    """The ``n`` reset seeds of a model card's evaluation (the ``hub`` stream of
    :func:`~border_py.evaluation.seeds.fresh_seeds`)."""
    return fresh_seeds(root_seed, n, "hub")


@dataclass(frozen=True)
class Score:
    """A fresh evaluation's outcome and how it was played."""

    result: EvalResult
    seeds: range
    epsilon: float
    max_steps: int

    @property
    def episodes(self) -> int:
        """The episodes played."""
        return len(self.seeds)

    def text(self) -> str:
        """``mean +/- std`` with two decimals, as the Hub's ``mean_reward`` metric reads."""
        return f"{self.result.return_mean:.2f} +/- {self.result.return_std:.2f}"

    def record(self, run_seeds: range) -> dict[str, Any]:
        """The evaluation as plain data for ``results.json`` (``run_seeds``: the run's window)."""
        return {
            "mean_reward": self.result.return_mean,
            "std_reward": self.result.return_std,
            "min_reward": self.result.return_min,
            "max_reward": self.result.return_max,
            "mean_length": self.result.length_mean,
            "n_episodes": self.episodes,
            "episode_returns": self.result.episode_returns,
            "reset_seeds": [self.seeds.start, self.seeds.stop],
            "run_eval_reset_seeds": [run_seeds.start, run_seeds.stop],
            "epsilon": self.epsilon,
            "max_steps": self.max_steps,
        }


def eval_max_steps(config: dict[str, Any], enforce: bool = True) -> int:
    """The run's own step cap of an evaluation episode (``trainer.eval_max_steps``), else
    :data:`DEFAULT_MAX_STEPS`; a saved value that is not a positive int is not used. It is
    bounded by :data:`~border_py.resources.MAX_EPISODE_STEPS`, as a run's own is
    (:func:`~border_py.resources.at_most`; ``enforce``: the command's ``check_resources``).

    Raises:
        ConfigError: the saved value is above the bound, with ``enforce`` (one line).
    """
    trainer = config.get("trainer")
    value = trainer.get("eval_max_steps") if isinstance(trainer, dict) else None
    if not (is_int(value) and value > 0):
        return DEFAULT_MAX_STEPS
    at_most(
        "trainer.eval_max_steps",
        value,
        MAX_EPISODE_STEPS,
        "steps per evaluation episode in the run's config, which the card's evaluation plays",
        enforce,
    )
    return value


def fresh_score(
    agent: Agent, env_factory: GymEnvFactory, config: dict[str, Any], n: int, enforce: bool = True
) -> Score:
    """Play ``n`` greedy episodes (the env's evaluation epsilon, as ``border eval`` does) on
    :func:`card_seeds` of the run whose saved config is ``config`` (its episodes' step cap
    bounded by :func:`eval_max_steps`, ``enforce``: the command's ``check_resources``)."""
    seeds = card_seeds(RunSettings.seed_of(config), n)
    max_steps = eval_max_steps(config, enforce)
    epsilon = env_factory.eval_epsilon
    evaluator = Evaluator(env_factory, n, seeds.start, max_steps, epsilon=epsilon)
    try:
        result = evaluator.evaluate(agent)
    finally:
        evaluator.close()
    return Score(result, seeds, epsilon, max_steps)
