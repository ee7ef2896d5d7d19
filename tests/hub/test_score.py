"""hub/score.py: the card's evaluation plays reset seeds none of the run's evaluations can use."""

from __future__ import annotations

import pytest

from border_py.envs.factory import GymEnvFactory
from border_py.evaluation.seeds import run_eval_seeds
from border_py.hub.score import card_seeds, eval_max_steps, fresh_score
from border_py.resources import MAX_EVAL_EPISODES
from border_py.seeding import derive_seed


@pytest.mark.parametrize("root", [0, 1, 7, 12345, 2**31 - 1])
def test_fresh_seeds_miss_every_seed_a_run_evaluation_can_use(root):
    used = run_eval_seeds(root)
    assert used.start == derive_seed(root, "eval")  # the trainers' and border eval's base seed
    assert len(used) == MAX_EVAL_EPISODES  # trainer.eval_episodes is at most this
    for n in (1, 100, MAX_EVAL_EPISODES):
        fresh = card_seeds(root, n)
        assert len(fresh) == n
        assert not set(fresh) & set(used)
    assert card_seeds(root, 100) == card_seeds(root, 100)  # a function of the run's seed


def test_eval_max_steps_takes_the_runs_own_positive_int_only():
    assert eval_max_steps({"trainer": {"eval_max_steps": 50}}) == 50
    for bad in (
        {},
        {"trainer": None},
        {"trainer": {"eval_max_steps": "50"}},
        {"trainer": {"eval_max_steps": 0}},
        {"trainer": {"eval_max_steps": True}},
    ):
        assert eval_max_steps(bad) == 10000


class FirstAction:
    """An agent that always pushes the cart left (CartPole's episodes then last ~10 steps)."""

    def act(self, obs, explore):
        return obs[:, 0].astype(int) * 0


def test_fresh_score_plays_the_episodes_asked_on_the_fresh_seeds():
    env = GymEnvFactory("CartPole-v1")
    score = fresh_score(FirstAction(), env, {"seed": 3, "trainer": {"eval_max_steps": 200}}, 5)
    assert score.seeds == card_seeds(3, 5)
    assert len(score.result.episode_returns) == 5
    assert score.max_steps == 200 and score.epsilon == 0.0
    # the same episodes, reset by hand: the returns are those of these seeds
    returns = []
    for seed in score.seeds:
        e = env.make()
        e.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = e.step(0)
            total += reward
            done = terminated or truncated
        returns.append(total)
        e.close()
    assert score.result.episode_returns == returns
    assert score.text() == f"{score.result.return_mean:.2f} +/- {score.result.return_std:.2f}"
