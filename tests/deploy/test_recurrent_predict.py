"""``load_policy(...).predict`` with SB3's signature, ``predict(observation, state=None,
episode_start=None, deterministic=False) -> (action, state)``: a recurrent policy (R2D2) carries
its state as sb3-contrib's ``RecurrentPPO`` does (returned, None at the first call = zeros,
zeroed where ``episode_start`` is True); a feed-forward one passes the state through."""

from __future__ import annotations

import numpy as np
import pytest

from border_py import load_policy
from border_py.evaluation.evaluator import Evaluator

SEEDS = range(20, 23)


def play(policy, seed: int, feed_reward: bool) -> tuple[list[int], float]:
    """One episode from reset ``seed``, acting with ``predict``: its actions and return."""
    env = policy.make_env()
    obs, _ = env.reset(seed=seed)
    state, start, actions, total = None, np.ones(1, bool), [], 0.0
    try:
        while True:
            action, state = policy.predict(obs, state, start, deterministic=True)
            assert np.shape(action) == () and state.prev_action.tolist() == [action]
            actions.append(int(action))
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            if feed_reward:
                state = state._replace(prev_reward=np.array([reward], np.float32))
            start = np.array([terminated or truncated])
            if start[0]:
                return actions, total
    finally:
        env.close()


@pytest.mark.parametrize("name", ["r2d2", "r2d2_gru"])
def test_predict_plays_border_evals_episodes(trained, name):
    policy = load_policy(trained(name))  # main refused a recurrent agent here
    gru = name == "r2d2_gru"
    returns = [play(policy, seed, feed_reward=gru)[1] for seed in SEEDS]
    evaluator = Evaluator(policy.env_factory, len(SEEDS), SEEDS.start, 1000)
    try:
        want = evaluator.evaluate(policy.agent).episode_returns
    finally:
        evaluator.close()
    assert returns == want
    _, state = policy.predict(policy.make_env().reset(seed=0)[0], deterministic=True)
    assert state.h.shape == (1, 1, 16) and state.h.dtype == np.float32
    assert (state.c is None) == gru and (gru or state.c.shape == (1, 1, 16))
    assert np.isnan(state.prev_reward).all() == gru  # for the caller to set


def test_the_state_is_carried_and_zeroed_where_an_episode_starts(trained):
    policy = load_policy(trained("r2d2"))
    env = policy.make_env()
    obs = [env.reset(seed=1)[0]]
    for action in (0, 1, 2, 3, 0, 1):
        obs.append(env.step(action)[0])
    env.close()
    batch = np.stack(obs[:2])  # two envs
    _, state = policy.predict(batch, None, None, deterministic=True)
    for o in obs[2:]:
        _, state = policy.predict(np.stack([o, o]), state, [False, False], deterministic=True)
    assert np.abs(state.h).min() > 0  # a state that moved
    fresh_actions, fresh = policy.predict(batch, None, deterministic=True)
    zeros = state._replace(
        h=np.zeros_like(state.h), c=np.zeros_like(state.c), prev_action=np.full(2, -1)
    )
    np.testing.assert_array_equal(
        policy.predict(batch, zeros, deterministic=True)[0], fresh_actions
    )
    actions, started = policy.predict(batch, state, np.array([True, False]), deterministic=True)
    carried_actions, carried = policy.predict(batch, state, [False, False], deterministic=True)
    # env 0 starts again from zeros (as at the first call), env 1 goes on from its state
    np.testing.assert_array_equal(started.h[:, 0], fresh.h[:, 0])
    np.testing.assert_array_equal(started.c[:, 0], fresh.c[:, 0])
    np.testing.assert_array_equal(started.h[:, 1], carried.h[:, 1])
    assert not np.array_equal(carried.h[:, 0], fresh.h[:, 0])
    assert actions.tolist() == [fresh_actions[0], carried_actions[1]]


def test_a_feed_forward_policy_passes_the_state_through(trained):
    policy = load_policy(trained("dqn"))
    obs = policy.make_env().reset(seed=0)[0]
    mine = object()
    action, state = policy.predict(obs, mine, np.ones(1, bool), deterministic=True)
    assert state is mine and action in (0, 1)  # SB3's policies return the state given
    assert policy.predict(obs)[1] is None


def test_a_non_deterministic_prediction_explores_with_the_state(trained):
    policy = load_policy(trained("r2d2"))
    obs = np.stack([policy.make_env().reset(seed=s)[0] for s in range(200)])
    greedy, _ = policy.predict(obs, deterministic=True)
    explored, state = policy.predict(obs)  # SB3's default: deterministic=False
    assert policy.agent.env_steps == policy.env_steps + len(obs)
    assert 0 < np.mean(explored != greedy) <= policy.agent.epsilon
    assert state.prev_action.tolist() == explored.tolist()  # what was taken is fed next


def test_a_state_that_is_not_this_policys_is_one_line(trained):
    policy = load_policy(trained("r2d2"))
    obs = np.stack([policy.make_env().reset(seed=s)[0] for s in range(3)])
    _, state = policy.predict(obs, deterministic=True)
    h, c = state.h, state.c
    cases = {
        "(h, c) alone": ((h, c), r"^state of type tuple: expected the state predict returned"),
        "2 envs' state": (
            state._replace(h=h[:, :2], c=c[:, :2]),
            r"^a state of shapes .*: expected the state predict returned for 3 envs"
            r" \(h, c: \(1, 3, 16\); prev_action, prev_reward: \(3,\)\), or None",
        ),
        "a GRU's": (state._replace(c=None), r"^state of type RecurrentState: expected"),
    }
    for what, (bad, message) in cases.items():
        with pytest.raises(ValueError, match=message) as caught:
            policy.predict(obs, bad, deterministic=True)
        assert "\n" not in str(caught.value), what
    with pytest.raises(ValueError, match=r"^episode_start of shape \(2,\): expected one flag"):
        policy.predict(obs, state, [True, False], deterministic=True)
    gru = load_policy(trained("r2d2_gru"))
    _, unset = gru.predict(obs, deterministic=True)
    with pytest.raises(ValueError, match=r"^state.prev_reward is not set: .* state._replace"):
        gru.predict(obs, unset, deterministic=True)
    gru.predict(obs, unset, np.ones(3, bool), deterministic=True)  # new episodes need none
