"""Actor priorities from the Q-values the actor acted on (:mod:`border_py.actors.values`)."""

from __future__ import annotations

import numpy as np
import pytest

import tests.frame_env  # noqa: F401  (registers FramePattern-v0)
from border_py.actors.nstep import NStepProcessor
from border_py.actors.sampler import Sampler, SampleStats
from border_py.actors.values import RING, ActedValues
from border_py.agents.dqn import DQN
from border_py.envs.factory import GymEnvFactory


def sampler(by_values: bool, dueling: bool = False, n_step: int = 3) -> Sampler:
    """A DQN actor on stacked pattern frames (terminations and time-limit truncations within a
    dozen steps) whose priorities come from acted values, or from ``td_error`` on full stacks."""
    factory = GymEnvFactory("FramePattern-v0")
    agent = DQN(
        *factory.spaces(),
        network="mlp",
        hidden_sizes=[32],
        dueling=dueling,
        n_step=n_step,
        gamma=0.9,
        seed=3,
        eps_start=0.5,
        eps_final=0.5,
    )
    out = Sampler(
        factory, agent, n_envs=4, seed=11, replayable=True, frame_stack=4, priorities=True
    )
    assert out.scorer is not None  # a DQN acts on values it hands out
    if not by_values:  # the reference: score every transition's full stacks again
        out.scorer = None
        out.stack_processor = NStepProcessor(4, agent.n_step, agent.gamma)
    return out


@pytest.mark.parametrize(("dueling", "n_step"), [(False, 3), (True, 1)])
def test_acted_value_priorities_equal_the_agents_td_errors(dueling, n_step):
    fast, reference = sampler(True, dueling, n_step), sampler(False, dueling, n_step)
    discounts = []
    for _ in range(12):  # ~150 transitions, dozens of terminations and truncations
        a = fast.sample(13, SampleStats())
        b = reference.sample(13, SampleStats())
        np.testing.assert_array_equal(a.obs, b.obs)  # the same transitions, the same frames ids
        np.testing.assert_array_equal(a.discount, b.discount)
        assert a.priority is not None and b.priority is not None
        np.testing.assert_allclose(a.priority, b.priority, rtol=1e-5, atol=1e-6)
        discounts.append(a.discount)
    d = np.concatenate(discounts)
    assert (d == 0).any()  # terminations: nothing to bootstrap from
    if n_step > 1:  # truncations cut windows short: their final observations bootstrap
        assert ((d > 0.9**n_step + 1e-6) & (d < 1)).any()


def test_single_steps_get_the_same_priorities_as_batches():
    fast, reference = sampler(True), sampler(False)
    compared = 0
    for _ in range(40):
        a, b = fast.step(SampleStats()), reference.step(SampleStats())
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            np.testing.assert_allclose(a.priority, b.priority, rtol=1e-5, atol=1e-6)
            compared += len(a)
    assert compared > 100


def test_values_survive_a_checkpoint_of_the_sampler():
    fast, reference = sampler(True), sampler(False)
    for s in (fast, reference):
        s.sample(20, SampleStats())
    state = fast.state()
    restored = sampler(True)
    restored.restore(state)
    restored.agent.load_state_dict(fast.agent.state_dict())  # its exploration RNG too
    a, b = restored.sample(30, SampleStats()), reference.sample(30, SampleStats())
    np.testing.assert_array_equal(a.obs, b.obs)
    np.testing.assert_allclose(a.priority, b.priority, rtol=1e-5, atol=1e-6)


def test_priorities_by_hand_and_a_batch_too_wide_for_the_ring():
    values = ActedValues()
    q = np.array([[1.0, 3.0], [2.0, -1.0]], np.float32)
    values.acted(np.array([5, 6]), q, np.array([0, 0]))  # Q(s5, 0) = 1, max 3; Q(s6, 0) = 2, max 2
    values.bootstrap(np.array([7]), np.array([10.0], np.float32))  # a truncation's final value
    got = values.priorities(
        np.array([5, 5, 6]),
        np.array([6, 7, 5]),
        np.array([0.5, 1.0, -1.0], np.float32),
        np.array([0.9, 0.81, 0.0], np.float32),
    )
    np.testing.assert_allclose(got, [abs(0.5 + 0.9 * 2 - 1), abs(1 + 8.1 - 1), abs(-1 - 2)])
    with pytest.raises(RuntimeError, match="spans more than"):
        values.priorities(
            np.array([0]), np.array([RING]), np.zeros(1, np.float32), np.ones(1, np.float32)
        )
