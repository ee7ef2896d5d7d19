"""Reference scores for normalising returns across tasks: per known env id, a uniformly random
policy's mean return and a target score, with where each comes from.

A task's normalised score is ``(return - random) / (target - random)``: 0 is the random policy, 1
the target. Random scores were measured with ``python benchmarks/random_scores.py`` (100 episodes
of uniformly random actions, seed 0; gymnasium 1.x), except Pong's, which is the DQN paper's
(Mnih et al. 2015, Nature, Extended Data Table 2). Targets are RL Zoo's published score of a
trained agent for the task (rl-baselines3-zoo's ``benchmark.md``: DQN for discrete actions, SAC
for continuous ones, the same numbers ``benchmarks/zoo_table.py`` compares against); for
LunarLander and HalfCheetah the Zoo ran an older version of the env (v2, v3). An env id not in
the table is normalised by the range of its runs' scores instead (labelled so).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REFERENCES", "Reference"]

RANDOM_SOURCE = "random policy: benchmarks/random_scores.py (100 episodes)"


@dataclass(frozen=True)
class Reference:
    """The scores a task's returns are normalised between, and their sources."""

    random: float
    target: float
    source: str

    def normalize(self, score: float) -> float:
        """``score`` on the scale where ``random`` is 0 and ``target`` is 1."""
        return (score - self.random) / (self.target - self.random)


def _zoo(algo: str, env: str) -> str:
    return f"{RANDOM_SOURCE}; target: RL Zoo {algo} on {env} (benchmark.md)"


REFERENCES: dict[str, Reference] = {
    "CartPole-v1": Reference(23.7, 500.0, _zoo("DQN", "CartPole-v1")),
    "Acrobot-v1": Reference(-497.1, -76.639, _zoo("DQN", "Acrobot-v1")),
    "MountainCar-v0": Reference(-200.0, -100.849, _zoo("DQN", "MountainCar-v0")),
    "LunarLander-v3": Reference(-192.0, 154.382, _zoo("DQN", "LunarLander-v2")),
    "Pendulum-v1": Reference(-1207.6, -156.995, _zoo("SAC", "Pendulum-v1")),
    "MountainCarContinuous-v0": Reference(-33.3, 94.679, _zoo("SAC", "MountainCarContinuous-v0")),
    "LunarLanderContinuous-v3": Reference(-212.7, 260.390, _zoo("SAC", "LunarLanderContinuous-v2")),
    "HalfCheetah-v5": Reference(-282.5, 9535.451, _zoo("SAC", "HalfCheetah-v3")),
    "ALE/Pong-v5": Reference(
        -20.7, 20.602, "random: Mnih et al. 2015; target: RL Zoo DQN on PongNoFrameskip-v4"
    ),
}
