"""The returns a task's episodes can reach, for the tasks whose definition bounds them: the
report's figure clips a band to that range and draws its edge.

A bound holds only for the env as registered: the gymnasium factory (or the Atari one, for Pong),
no ``env.wrappers`` that the evaluation applies other than gymnasium's observation and action
wrappers of :data:`REWARD_KEEPING` (any other may rescale rewards; a ``training_only`` one is not
evaluated) and, for a task whose reward is counted per step, no ``env.kwargs`` (CartPole's
``sutton_barto_reward`` changes its reward). Such a task's range scales with its time limit
(``env.max_episode_steps``; null: the registered one). Any other run has no known range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RETURN_RANGES", "REWARD_KEEPING", "ReturnRange", "return_range"]

GYM_FACTORY = "border_py.envs.factory.GymEnvFactory"
ATARI_FACTORY = "border_py.envs.atari.AtariEnvFactory"
REWARD_KEEPING = frozenset(  # gymnasium wrappers that change observations or actions, not rewards
    f"gymnasium.wrappers.{name}"
    for name in (
        "FlattenObservation",
        "RescaleObservation",
        "NormalizeObservation",
        "TransformObservation",
        "DtypeObservation",
        "ReshapeObservation",
        "FrameStackObservation",
        "DiscretizeObservation",
        "ClipAction",
        "RescaleAction",
        "TransformAction",
        "DiscretizeAction",
    )
)


@dataclass(frozen=True)
class ReturnRange:
    """The lowest and highest return of an episode of a task, and why.

    Attributes:
        low: the lowest return (at the registered time limit when ``time_limit`` is set).
        high: the highest return (likewise).
        time_limit: the registered ``max_episode_steps`` when the reward is counted per step
            (the range scales with the steps), None when the game's own score bounds it.
        factory: the env factory (``env._target_``) the range holds for.
        source: what bounds it.
    """

    low: float
    high: float
    time_limit: int | None
    factory: str
    source: str

    def at(self, steps: int | None) -> tuple[float, float]:
        """The range with a time limit of ``steps`` (None: the registered one)."""
        if self.time_limit is None or steps is None:
            return self.low, self.high
        return self.low * steps / self.time_limit, self.high * steps / self.time_limit


RETURN_RANGES: dict[str, ReturnRange] = {
    "CartPole-v1": ReturnRange(0.0, 500.0, 500, GYM_FACTORY, "+1 per step, 500 steps"),
    "CartPole-v0": ReturnRange(0.0, 200.0, 200, GYM_FACTORY, "+1 per step, 200 steps"),
    "Acrobot-v1": ReturnRange(-500.0, 0.0, 500, GYM_FACTORY, "-1 per step, 500 steps"),
    "MountainCar-v0": ReturnRange(-200.0, 0.0, 200, GYM_FACTORY, "-1 per step, 200 steps"),
    "Pendulum-v1": ReturnRange(
        -16.2736044 * 200, 0.0, 200, GYM_FACTORY, "-(pi^2 + 0.1 * 8^2 + 0.001 * 2^2) per step"
    ),
    "ALE/Pong-v5": ReturnRange(-21.0, 21.0, None, ATARI_FACTORY, "a game ends at 21 points"),
}


def return_range(config: dict[str, Any]) -> tuple[float, float] | None:
    """The range of a run's returns from its config (plain data: ``.hydra/config.yaml``); None
    when its task is not in :data:`RETURN_RANGES` or its env is not the one registered."""
    env = config.get("env")
    if not isinstance(env, dict) or not isinstance(env.get("id"), str):
        return None
    known = RETURN_RANGES.get(env["id"])
    if known is None or env.get("_target_") != known.factory or not _keeps_rewards(env):
        return None
    if known.time_limit is not None and env.get("kwargs"):
        return None
    steps = env.get("max_episode_steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps < 1):
        return None
    return known.at(steps)


def _keeps_rewards(env: dict[str, Any]) -> bool:
    """Whether every wrapper the evaluation applies is one of :data:`REWARD_KEEPING`."""
    wrappers = env.get("wrappers") or []
    if not isinstance(wrappers, list):
        return False
    for spec in wrappers:
        if not isinstance(spec, dict):
            return False
        if spec.get("training_only") is not True and spec.get("_target_") not in REWARD_KEEPING:
            return False
    return True
