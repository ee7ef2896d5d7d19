"""An actor's memory (actors/recurrent.py) and the evaluator's: each env's recurrent state, the
previous action and reward, zeroed at every episode start (after an autoreset too)."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import torch

from border_py.actors.recurrent import RecurrentStream
from border_py.agents.r2d2 import R2D2
from border_py.envs.factory import GymEnvFactory
from border_py.evaluation.evaluator import Evaluator

STEPS = 4  # CartPole cut at 4 steps: episodes end (truncated) every 4 steps, others terminate


class Counting:
    """A recurrent agent whose state counts the steps it acted on since its zero state."""

    gamma, n_step, batch_size = 0.9, 2, 4
    burn_in, length, period = 2, 3, 2

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def initial_state(self, n: int) -> np.ndarray:
        return np.zeros((n, 2, 3), dtype=np.float32)

    def act_recurrent(self, obs, state, prev_action, prev_reward, explore):
        self.calls.append((state.copy(), prev_action.copy(), prev_reward.copy()))
        actions = (np.arange(len(obs)) + state[:, 0, 0]) % 2  # a function of the state
        return actions.astype(np.int64), state + 1.0


def _run(stream: RecurrentStream, agent: Counting, env, steps: int, count, last_action):
    """Step ``env`` with ``stream``, asserting what the agent was given (``count`` steps into
    each env's episode, after ``last_action``); the sequences out, where the envs are now."""
    out = []
    for _ in range(steps):
        obs = env.obs
        action = stream.act(obs)
        state, prev_action, prev_reward = agent.calls[-1]
        np.testing.assert_array_equal(state[:, 0, 0], count)  # zeros at each episode's start
        np.testing.assert_array_equal(prev_action, np.where(count == 0, -1, last_action))
        np.testing.assert_array_equal(prev_reward, np.where(count == 0, 0.0, 1.0))
        step = env.step(action)
        stream.add(obs, action, step)
        done = step.terminated | step.truncated
        count = np.where(done, 0, count + 1)
        last_action = action
        taken = stream.take()
        if taken is not None:
            out.append(taken)
    return out, count, last_action


def test_each_env_acts_with_its_own_state_reset_at_every_episode_start():
    agent = Counting()
    env = GymEnvFactory("CartPole-v1", max_episode_steps=STEPS).make_vector(3, seed=0)
    stream = RecurrentStream(agent, 3, agent.gamma, agent.n_step)
    sequences, *_ = _run(stream, agent, env, 40, np.zeros(3), np.full(3, -1))
    rows = [s for s in sequences if len(s)]
    assert rows
    for seq in rows:  # a window stores the state before its first present step: zeros at an
        # episode's first step (no previous action there), the steps taken before it otherwise
        first = seq.first_prev_action == -1
        assert (seq.state[first] == 0).all() and (seq.state[~first][:, 0, 0] > 0).all()
        assert (seq.state[seq.burn < seq.burn_in] == 0).all()  # a short burn-in: the start
    env.close()


def test_the_memory_round_trips_through_a_weights_only_checkpoint():
    agent, twin = Counting(), Counting()
    env = GymEnvFactory("CartPole-v1", max_episode_steps=STEPS).make_vector(
        2, seed=1, replayable=True
    )
    stream = RecurrentStream(agent, 2, agent.gamma, agent.n_step)
    _, *now = _run(stream, agent, env, 7, np.zeros(2), np.full(2, -1))  # mid-episode
    buffer = io.BytesIO()
    torch.save(stream.state(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    resumed = RecurrentStream(twin, 2, agent.gamma, agent.n_step)
    resumed.restore(saved)
    state = env.state()
    a, *_ = _run(stream, agent, env, 9, *now)
    env.restore(state)
    b, *_ = _run(resumed, twin, env, 9, *now)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for name, value in x.arrays().items():
            np.testing.assert_array_equal(value, y.arrays()[name], err_msg=name)
    env.close()


class Taken(gym.Wrapper):
    """Records the actions the env was stepped with."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.actions: list[int] = []

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


def test_the_evaluator_starts_each_episode_from_zeros_and_feeds_back_the_action_taken():
    agent = Counting()
    factory = GymEnvFactory("CartPole-v1", max_episode_steps=STEPS)
    evaluator = Evaluator(factory, n_episodes=3, seed=0, max_steps=100, epsilon=0.5)
    evaluator.env = taken = Taken(evaluator.env)
    result = evaluator.evaluate(agent)  # type: ignore[arg-type]
    calls = iter(agent.calls)
    actions = iter(taken.actions)
    for length in result.episode_returns:  # CartPole: +1 a step, so a return is a length
        previous = -1
        for t in range(int(length)):
            state, prev_action, prev_reward = next(calls)
            assert state[0, 0, 0] == t  # advanced at random steps too
            assert prev_action[0] == previous and prev_reward[0] == (0.0 if t == 0 else 1.0)
            previous = next(actions)
    assert next(calls, None) is None
    evaluator.close()


def test_an_r2d2_actor_cuts_the_sequences_its_torch_step_would():
    """R2D2 acts in numpy (agents/recurrent_inference.py): an actor's stream explores with the
    same actions and cuts the same sequences, states to float32 rounding, as with the module's
    torch step, over whole episodes."""
    factory = GymEnvFactory("CartPole-v1", max_episode_steps=30)
    streams, envs = [], []
    for numpy_step in (True, False):
        space, actions = factory.spaces()
        small = {"hidden_sizes": [16], "core_size": 8, "burn_in": 2, "length": 4, "n_step": 2}
        agent = R2D2(space, actions, seed=3, eps_decay_steps=200, **small)
        assert agent.fast_step is not None
        if not numpy_step:
            agent.fast_step = None
        streams.append(RecurrentStream(agent, 4, agent.gamma, agent.n_step))
        envs.append(factory.make_vector(4, seed=0))
    cut: list[list] = [[], []]
    for _ in range(150):  # several episodes of each env, epsilon from 1 down to 0.05
        for k, (stream, env) in enumerate(zip(streams, envs, strict=True)):
            obs = env.obs
            action = stream.act(obs)
            stream.add(obs, action, env.step(action))
            if (taken := stream.take()) is not None:
                cut[k].append(taken)
        np.testing.assert_array_equal(streams[0].prev_action, streams[1].prev_action)
        np.testing.assert_allclose(streams[0].memory, streams[1].memory, rtol=1e-5, atol=1e-6)
    assert len(cut[0]) == len(cut[1]) > 10
    for ours, theirs in zip(cut[0], cut[1], strict=True):
        for name, array in ours.arrays().items():
            other = theirs.arrays()[name]
            if name == "state":
                np.testing.assert_allclose(array, other, rtol=1e-5, atol=1e-6)
            else:
                np.testing.assert_array_equal(array, other, err_msg=name)
    for env in envs:
        env.close()
