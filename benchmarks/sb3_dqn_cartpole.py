"""Stable-Baselines3's DQN with RL Zoo's tuned CartPole-v1 hyper-parameters: the time-to-solve anchor.

Run by ``benchmarks/time_to_solve.py --sb3``, one seed per process (``pip install -e ".[bench]"``):

    python benchmarks/sb3_dqn_cartpole.py 0

Hyper-parameters: rl-baselines3-zoo's ``hyperparams/dqn.yml`` for CartPole-v1 (lr 2.3e-3, batch 64,
100k buffer, 1k learning starts, target update every 10 env steps, 128 gradient steps every 256 env
steps, epsilon to 0.04 over 16% of the run, 256x256). SB3's ``EvalCallback`` runs 10 greedy
episodes every 2,000 env steps and stops the run at the first mean >= 475 (training for at most
100k env steps, twice the Zoo's budget). The last line is JSON: ``env_steps`` and ``seconds``
(from the start of training, evaluations included) at the first evaluation >= 475, or nulls.
"""

from __future__ import annotations

import json
import sys
import time

import gymnasium as gym
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold

TARGET = 475.0
EVAL_EVERY = 2_000


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    torch.set_num_threads(1)
    model = DQN(
        "MlpPolicy",
        gym.make("CartPole-v1"),
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1_000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        policy_kwargs={"net_arch": [256, 256]},
        seed=seed,
        device="cpu",
    )
    stop = StopTrainingOnRewardThreshold(reward_threshold=TARGET, verbose=0)
    evaluation = EvalCallback(
        gym.make("CartPole-v1"),
        callback_on_new_best=stop,
        n_eval_episodes=10,
        eval_freq=EVAL_EVERY,
        deterministic=True,
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=100_000, callback=evaluation)
    solved = evaluation.best_mean_reward >= TARGET
    print(
        "RESULT "
        + json.dumps(
            {
                "seed": seed,
                "env_steps": model.num_timesteps if solved else None,
                "seconds": round(time.perf_counter() - start, 2) if solved else None,
            }
        )
    )


if __name__ == "__main__":
    main()
