"""agents/recurrent_inference.py: R2D2 acts in numpy (an MLP torso on the CPU) as its network's
torch step does: the same greedy actions over whole episodes, Q to float32 rounding (relative
1e-5) and the same states, with every core and head, after learning, after a weight load and after
the parameters moved to other storage; other networks keep the module's step."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.r2d2 import R2D2
from border_py.agents.recurrent_inference import RecurrentInference
from tests.agents.sequence_data import random_sequences

CARTPOLE = gym.make("CartPole-v1").observation_space
TWO = gym.spaces.Discrete(2)
NETWORKS = [
    {"core": "lstm"},
    {"core": "gru"},
    {"core": "lstm", "dueling": True, "head_sizes": [8], "prev_reward": True},
    {"core": "gru", "dueling": True, "hidden_sizes": [16, 8], "prev_reward": True},
    {"core": "lstm", "hidden_sizes": [], "head_sizes": [8, 8]},
]


def _agent(seed: int = 0, **hparams) -> R2D2:
    small = {"hidden_sizes": [16], "core_size": 12, "burn_in": 2, "length": 4, "n_step": 2}
    return R2D2(CARTPOLE, TWO, seed=seed, **{**small, **hparams})


def _module_step(agent, obs, state, prev_action, prev_reward):
    """The torch module's step (what the agent acted with before the numpy path)."""
    with torch.inference_mode():
        q, next_state = agent.q.step(
            torch.as_tensor(obs, dtype=torch.float32),
            torch.as_tensor(prev_action, dtype=torch.int64),
            torch.as_tensor(prev_reward, dtype=torch.float32),
            torch.as_tensor(state),
        )
    return q.numpy(), next_state.numpy()


def _play(agent: R2D2, episodes: int = 3, n_envs: int = 4, seed: int = 0) -> int:
    """Play ``episodes`` CartPole episodes in each of ``n_envs`` envs, greedily, each env's
    state zeroed at its episodes' starts, with the numpy step and the module's side by side
    (each carrying its own states); assert they agree at every step. Returns the steps played."""
    assert agent.fast_step is not None
    envs = [gym.make("CartPole-v1") for _ in range(n_envs)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    ours, theirs = agent.initial_state(n_envs), agent.initial_state(n_envs)
    prev_action, prev_reward = np.full(n_envs, -1), np.zeros(n_envs, np.float32)
    ended, steps = np.zeros(n_envs, int), 0
    while ended.min() < episodes:
        q_np, next_ours = agent.fast_step(obs, prev_action, prev_reward, ours)
        actions, next_ours_too = agent.act_recurrent(obs, ours, prev_action, prev_reward, False)
        q, next_theirs = _module_step(agent, obs, theirs, prev_action, prev_reward)
        assert actions.tolist() == q.argmax(axis=1).tolist()
        assert np.array_equal(next_ours, next_ours_too) and next_ours.dtype == np.float32
        assert q_np.dtype == np.float32 and q_np.shape == q.shape
        scale = np.abs(q).max(axis=1, keepdims=True)
        assert np.all(np.abs(q_np - q) <= 1e-5 * scale), (q_np, q)
        np.testing.assert_allclose(next_ours, next_theirs, rtol=1e-5, atol=1e-6)
        ours, theirs = next_ours, next_theirs
        prev_action, prev_reward = actions.copy(), np.ones(n_envs, np.float32)
        for i, env in enumerate(envs):
            obs[i], _, terminated, truncated, _ = env.step(int(actions[i]))
            if terminated or truncated:  # the next episode starts from zeros
                obs[i] = env.reset()[0]
                ours[i], theirs[i], prev_action[i], prev_reward[i] = 0.0, 0.0, -1, 0.0
                ended[i] += 1
        steps += 1
    return steps


@pytest.mark.parametrize("hparams", NETWORKS, ids=lambda h: "-".join(map(str, h.values())))
def test_numpy_acting_is_the_modules_step_over_whole_episodes(hparams):
    agent = _agent(**hparams)
    assert isinstance(agent.fast_step, RecurrentInference)
    assert _play(agent) > 20  # vector steps, across 3 episodes of each env


def test_it_follows_the_weights_through_learning_loads_and_moved_storage():
    learner = _agent(lr=1e-2)
    before = learner.fast_step(np.ones((2, 4), np.float32), [-1, 0], [0, 1], np.ones((2, 2, 12)))
    for seed in range(3):  # optimizer steps change the weights in place
        learner.update(random_sequences([(0, None), (2, 5)], 2, 4, 2, 4, 2, (2, 12), seed=seed))
    after = learner.fast_step(np.ones((2, 4), np.float32), [-1, 0], [0, 1], np.ones((2, 2, 12)))
    assert not np.array_equal(before[0], after[0])
    _play(learner, episodes=1)

    actor = _agent(seed=9)  # an actor's copy, other weights until it loads the learner's
    actor.load_policy_state(learner.policy_state())
    obs, state = np.ones((2, 4), np.float32), np.ones((2, 2, 12), np.float32)
    for got, want in zip(actor.fast_step(obs, [-1, 0], [0, 1], state), after, strict=True):
        np.testing.assert_array_equal(got, want)
    _play(actor, episodes=1)

    actor.q.core.share_memory()  # the core's parameters move (their old storage is freed)
    _play(actor, episodes=1)
    other = _agent(seed=5)
    actor.q.load_state_dict(other.q.state_dict(), assign=True)  # parameters replaced
    assert not np.array_equal(actor.fast_step(obs, [-1, 0], [0, 1], state)[0], after[0])
    _play(actor, episodes=1)


def test_uint8_and_image_shaped_vector_observations_are_scaled_and_flattened():
    space = gym.spaces.Box(0, 255, (2, 3), np.uint8)
    agent = R2D2(space, TWO, hidden_sizes=[8], core_size=6)
    assert agent.fast_step is not None
    obs = np.random.default_rng(0).integers(0, 256, (5, 2, 3), dtype=np.uint8)
    state, prev = np.zeros((5, 2, 6), np.float32), np.array([-1, 0, 1, 1, 0])
    q_np, state_np = agent.fast_step(obs, prev, np.zeros(5), state)
    q, expected = _module_step(agent, obs, state, prev, np.zeros(5))
    np.testing.assert_allclose(q_np, q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state_np, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"observations of shape \(6,\): expected a batch"):
        agent.fast_step(np.zeros(6, np.uint8), prev[:1], np.zeros(1), state[:1])


def test_conv_torsos_step_with_the_module():
    space = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)  # MinAtar's shape: the MinAtar CNN
    agent = R2D2(space, gym.spaces.Discrete(3), hidden_sizes=[16], core_size=8)
    assert agent.fast_step is None and RecurrentInference.of(agent.q) is None
    obs = np.random.default_rng(0).integers(0, 2, (3, 4, 10, 10), dtype=np.uint8)
    state, prev = agent.initial_state(3), np.array([-1, 0, 2])
    actions, next_state = agent.act_recurrent(obs, state, prev, np.zeros(3), False)
    q, expected = _module_step(agent, obs, state, prev, np.zeros(3))
    assert actions.tolist() == q.argmax(axis=1).tolist()
    np.testing.assert_array_equal(next_state, expected)
