"""R2D2 learns a task only memory solves, and its burn-in carries that memory.

The task: a cue ``c`` in {0, 1} shown at step 0, a blank step, then a query at step 2 where
action ``c`` earns 1 and the other 0; the episode then terminates. A memoryless policy answers
right half the time. Each episode of uniformly random actions gives three windows (burn-in 2,
3 learning steps, 1 bootstrap step) starting at steps 0, 1 and 2 (period 1): the first has the
cue and the query among its learning steps (what teaches the core to keep the cue, the burn-in
having no gradient); the other two have the cue only in their burn-in, so their query's values
are right only if the burn-in runs the cue into the state their learning steps start from.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.r2d2 import R2D2
from border_py.agents.sequence_batch import SequenceBatch
from border_py.sequences import Sequences

SPACE = gym.spaces.Box(0.0, 1.0, (4,), np.float32)
GAMMA = 0.9
BURN_IN, LENGTH = 2, 3
UPDATES = 400


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def _observations(cue: int) -> np.ndarray:
    """The episode's 4 observations: cue, blank, query, final."""
    obs = np.zeros((4, 4), np.float32)
    obs[0, cue] = 1.0
    obs[1, 2] = 1.0
    obs[2, 3] = 1.0
    return obs


def _windows(
    rng: np.random.Generator, episodes: int, starts: tuple[int, ...] = (0, 1, 2)
) -> tuple[Sequences, np.ndarray]:
    """The windows starting at ``starts`` of ``episodes`` episodes (see the module docstring),
    and each window's cue: index ``i`` of a window starting at step ``s`` holds step
    ``s - B + i``."""
    cols: dict[str, list] = {k: [] for k in ("obs", "action", "reward", "present", "burn")}
    cols |= {k: [] for k in ("ret", "discount", "mask", "cue")}
    for _ in range(episodes):
        cue = int(rng.integers(2))
        obs, actions = _observations(cue), rng.integers(2, size=3)
        rewards = np.array([0.0, 0.0, float(actions[2] == cue)], np.float32)
        for start in starts:
            steps = start - BURN_IN + np.arange(BURN_IN + LENGTH + 1)
            present, acted = (steps >= 0) & (steps <= 3), (steps >= 0) & (steps < 3)
            at = steps.clip(0, 3)
            cols["obs"].append(np.where(present[:, None], obs[at], 0.0))
            cols["action"].append(np.where(acted, actions[at.clip(max=2)], 0))
            cols["reward"].append(np.where(acted, rewards[at.clip(max=2)], 0.0))
            cols["present"].append(present)
            cols["burn"].append(min(BURN_IN, start))
            learning = start + np.arange(LENGTH)  # the learning steps' episode steps
            cols["mask"].append(learning < 3)
            cols["ret"].append(np.where(learning < 3, rewards[learning.clip(max=2)], 0.0))
            cols["discount"].append(np.where(learning < 2, GAMMA, 0.0))  # the query terminates
            cols["cue"].append(cue)
    n = len(cols["burn"])
    windows = Sequences(
        obs=np.asarray(cols["obs"], np.float32),
        action=np.asarray(cols["action"], np.int64),
        reward=np.asarray(cols["reward"], np.float32),
        present=np.asarray(cols["present"], bool),
        state=np.zeros((n, 2, 32), np.float32),  # every window's first present index is step 0
        burn=np.asarray(cols["burn"], np.int64),
        first_prev_action=np.full(n, -1),
        first_prev_reward=np.zeros(n, np.float32),
        ret=np.asarray(cols["ret"], np.float32),
        discount=np.asarray(cols["discount"], np.float32),
        offset=np.ones((n, LENGTH), np.int64),
        mask=np.asarray(cols["mask"], bool),
        burn_in=BURN_IN,
    )
    return windows, np.asarray(cols["cue"])


def _success(agent: R2D2, rng: np.random.Generator, episodes: int = 400) -> float:
    """The greedy policy's rate of right answers, acting from a zero state."""
    cues = rng.integers(2, size=episodes)
    state = agent.initial_state(episodes)
    prev_action, prev_reward = np.full(episodes, -1), np.zeros(episodes, np.float32)
    for step in range(3):
        obs = np.stack([_observations(int(c))[step] for c in cues])
        actions, state = agent.act_recurrent(obs, state, prev_action, prev_reward, explore=False)
        prev_action, prev_reward = actions, np.zeros(episodes, np.float32)
    return float(np.mean(actions == cues))


def test_r2d2_learns_to_recall_a_cue_and_its_burn_in_carries_it():
    rng = np.random.default_rng(0)
    agent = R2D2(
        SPACE,
        gym.spaces.Discrete(2),
        seed=0,
        hidden_sizes=[16],
        core_size=32,
        burn_in=BURN_IN,
        length=LENGTH,
        n_step=1,
        gamma=GAMMA,
        lr=3e-3,
        target_update_interval=20,
    )
    for _ in range(UPDATES):
        agent.update(_windows(rng, 12)[0])
    assert _success(agent, np.random.default_rng(1)) > 0.95
    # the query's values in windows whose cue is only in the burn-in (starting at step 2: the
    # query is learning step 0; at step 1: learning step 1)
    for start, query in ((2, 0), (1, 1)):
        seq, cues = _windows(np.random.default_rng(2), 200, starts=(start,))
        with torch.no_grad():
            q = agent.q.unroll(SequenceBatch.of(seq, torch.device("cpu")))[:, query]
        right = q.gather(1, torch.as_tensor(cues)[:, None]).squeeze(1)
        wrong = q.gather(1, 1 - torch.as_tensor(cues)[:, None]).squeeze(1)
        assert float((right > wrong).float().mean()) > 0.95
        assert float((right - wrong).mean()) > 0.2  # h(1) - h(0) = 0.415 when learned
