"""Stable-Baselines3's own evaluator drives border's loaded policies: ``evaluate_policy`` over an
SB3 ``DummyVecEnv`` calls ``predict(observations, state=..., episode_start=...,
deterministic=True)``, SB3's contract, and gets ``border eval``'s episodes.

The seeds line up exactly: ``DummyVecEnv.seed(s)`` gives env ``i`` the reset seed ``s + i``, and
``border eval eval.seed=s eval.n_episodes=n`` plays episode ``i`` from reset seed ``s + i``; with
``n`` envs and ``n_eval_episodes=n`` SB3 counts one episode per env (its first), so both play the
same ``n`` episodes (a continuous policy too: SAC on Pendulum). A recurrent policy's state rides in SB3's ``states`` (zeroed where SB3's
``episode_starts`` is True): its returns equal border's only if the state is carried right.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

from border_py import load_policy
from border_py.cli.main import main

EPISODES = 4
SEED = 100


def border_eval(run, out) -> list[float]:
    """``border eval``'s episode returns on :data:`EPISODES` episodes from :data:`SEED`."""
    argv = ["eval", str(run), f"eval.n_episodes={EPISODES}", f"eval.seed={SEED}", f"eval.out={out}"]
    assert main(argv) == 0
    (record,) = out.glob("eval_*.json")
    return json.loads(record.read_text())["episode_returns"]


@pytest.mark.parametrize("name", ["dqn", "r2d2", "r2d2_gru"])
def test_sb3_evaluate_policy_gets_border_evals_episodes(trained, tmp_path, name, capsys):
    policy = load_policy(trained(name))
    if name == "r2d2_gru":  # it takes the previous reward, which SB3's loop cannot give
        with pytest.raises(ValueError, match=r"^state.prev_reward is not set: this policy takes"):
            _sb3_returns(policy)
        return
    returns, lengths = _sb3_returns(policy)
    want = border_eval(trained(name), tmp_path)
    # the same episodes (SB3 lists them as they end, summed in its float32 reward buffer: one
    # action of another choice would move a POPGym return by 2/48, a CartPole one by 1 or more)
    np.testing.assert_allclose(sorted(returns), sorted(want), rtol=0, atol=1e-5)
    assert np.mean(returns) == pytest.approx(np.mean(want), abs=1e-5)
    if name == "r2d2":
        assert set(lengths) == {51}  # whole POPGym episodes, the state carried through each


@pytest.mark.slow  # a SAC run of its own: about 10 s on this machine
def test_sb3s_eval_callback_mean_of_sac_on_pendulum_is_border_evals(trained, tmp_path):
    # a continuous policy: SB3 passes (n, 1) observations' actions to DummyVecEnv's Pendulums;
    # EvalCallback's figure is evaluate_policy's mean over its n_eval_episodes
    policy = load_policy(trained("sac"))
    env = DummyVecEnv([policy.make_env for _ in range(EPISODES)])
    env.seed(SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            mean, std = evaluate_policy(
                policy, env, n_eval_episodes=EPISODES, deterministic=True, warn=False
            )
    finally:
        env.close()
    want = border_eval(trained("sac"), tmp_path)
    assert len(set(want)) == EPISODES  # 5 different Pendulum episodes, not one repeated
    # SB3 adds its float32 rewards over 200 steps of about -1 to -16: agreement to 1e-6 relative
    assert mean == pytest.approx(np.mean(want), rel=1e-6)
    assert std == pytest.approx(np.std(want), rel=1e-4, abs=1e-3)


def _sb3_returns(policy) -> tuple[list[float], list[int]]:
    env = DummyVecEnv([policy.make_env for _ in range(EPISODES)])
    env.seed(SEED)
    try:
        with warnings.catch_warnings():  # SB3 asks for its Monitor wrapper: returns are the same
            warnings.simplefilter("ignore", UserWarning)
            returns, lengths = evaluate_policy(
                policy,
                env,
                n_eval_episodes=EPISODES,
                deterministic=True,
                return_episode_rewards=True,
            )
    finally:
        env.close()
    return [float(r) for r in returns], [int(n) for n in lengths]
