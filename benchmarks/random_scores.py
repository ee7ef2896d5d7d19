"""The mean return of a uniformly random policy on the tasks of ``border report``'s reference table.

``border report`` normalises each task's returns between a random policy's score and a target
(:mod:`border_py.reports.references`); this script measures the random scores that table holds:
for each env id, ``--episodes`` episodes with actions drawn from the action space (seeded), the
mean undiscounted return and its standard error. Env ids whose package is not installed are
listed as skipped (Pong's random score comes from the DQN paper instead).

    python benchmarks/random_scores.py [--episodes 100] [--seed 0]

It ends with one ``RESULT {json}`` line: env id -> mean return.
"""

from __future__ import annotations

import argparse
import json
import math

import gymnasium as gym

ENV_IDS = (
    "CartPole-v1",
    "Acrobot-v1",
    "MountainCar-v0",
    "LunarLander-v3",
    "Pendulum-v1",
    "MountainCarContinuous-v0",
    "LunarLanderContinuous-v3",
    "HalfCheetah-v5",
)


def random_returns(env_id: str, episodes: int, seed: int) -> list[float]:
    """Undiscounted returns of ``episodes`` episodes of uniformly random actions."""
    env = gym.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return returns


def main() -> None:
    """Measure and print each task's random score."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    result = {}
    print("| env id | random return (mean ± s.e.) |")
    print("|---|---:|")
    for env_id in ENV_IDS:
        try:
            returns = random_returns(env_id, args.episodes, args.seed)
        except (gym.error.Error, ImportError) as exc:  # its extra is not installed
            print(f"| {env_id} | skipped: {exc} |")
            continue
        mean = sum(returns) / len(returns)
        spread = math.sqrt(sum((r - mean) ** 2 for r in returns) / (len(returns) - 1))
        print(f"| {env_id} | {mean:.1f} ± {spread / math.sqrt(len(returns)):.1f} |")
        result[env_id] = round(mean, 1)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
