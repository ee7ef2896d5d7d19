"""The recurrent Q-network: its unroll over stored sequences equals acting step by step from the
stored state, padding never matters, and the burn-in's gradient is the configured choice."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.recurrent import RecurrentQNetwork
from border_py.agents.sequence_batch import SequenceBatch
from border_py.errors import ConfigError
from tests.agents.sequence_data import random_sequences, with_garbage

CPU = torch.device("cpu")
SPACE = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
B, L, N = 3, 4, 2
# (burn, final): burn 0, partial and full burn-in; episodes going on, ending in the learning
# steps, and ending in the bootstrap tail
ROWS = [(0, None), (1, None), (B, None), (B, B + 1), (2, B + L + 1), (0, B + 2)]


def _network(core: str, prev_reward: bool, dueling: bool = False) -> RecurrentQNetwork:
    torch.manual_seed(0)
    return RecurrentQNetwork(
        SPACE, 3, (5,), core=core, core_size=8, dueling=dueling, prev_reward=prev_reward
    )


def _sequences(core: str) -> SequenceBatch:
    parts = 2 if core == "lstm" else 1
    seq = random_sequences(ROWS, B, L, N, state_shape=(parts, 8))
    return SequenceBatch.of(seq, CPU)


@pytest.mark.parametrize(("core", "prev_reward"), [("lstm", True), ("lstm", False), ("gru", True)])
def test_the_unroll_equals_stepping_from_the_stored_state_over_the_present_indices(
    core, prev_reward
):
    net, batch = _network(core, prev_reward, dueling=core == "gru"), _sequences(core)
    with torch.no_grad():
        unrolled = net.unroll(batch)
    assert unrolled.shape == (len(ROWS), L + N, 3)
    for row, (burn, _) in enumerate(ROWS):
        state = batch.state[row : row + 1]
        compared = 0
        for t in range(B - burn, B + L + N):
            if not batch.present[row, t]:
                break
            with torch.no_grad():
                q, state = net.step(
                    batch.obs[row : row + 1, t],
                    batch.prev_action[row : row + 1, t],
                    batch.prev_reward[row : row + 1, t],
                    state,
                )
            if t >= B:
                torch.testing.assert_close(q[0], unrolled[row, t - B], rtol=1e-5, atol=1e-6)
                compared += 1
        assert compared >= 2


def test_a_changed_stored_state_or_burn_in_step_changes_the_learning_values():
    """The comparison above can fail: the burn-in and the stored state do reach the outputs."""
    net, batch = _network("lstm", True), _sequences("lstm")
    with torch.no_grad():
        base = net.unroll(batch)
        obs = batch.obs.clone()
        obs[2, 0] += 1.0  # row 2's first burn-in step (full burn-in)
        moved = net.unroll(dataclasses.replace(batch, obs=obs))
        state = batch.state.clone()
        state[2] += 1.0
        restated = net.unroll(dataclasses.replace(batch, state=state))
    for changed in (moved, restated):
        assert not torch.allclose(changed[2], base[2])
        others = [r for r in range(len(ROWS)) if r != 2]
        assert torch.equal(changed[others], base[others])


def test_garbage_in_the_padding_changes_nothing():
    seq = random_sequences(ROWS, B, L, N)
    net = _network("lstm", True)
    with torch.no_grad():
        clean = net.unroll(SequenceBatch.of(seq, CPU))
        dirty = net.unroll(SequenceBatch.of(with_garbage(seq), CPU))
    assert torch.isfinite(dirty).all()
    assert torch.equal(clean, dirty)


def _burn_in_gradient(grad_through_burn_in: bool) -> torch.Tensor:
    net, batch = _network("lstm", True), _sequences("lstm")
    obs = batch.obs.clone().requires_grad_(True)
    net.unroll(dataclasses.replace(batch, obs=obs), grad_through_burn_in).sum().backward()
    assert obs.grad is not None
    return obs.grad.abs().sum(dim=2)  # (rows, T)


def test_no_gradient_reaches_the_burn_in_by_default():
    grad = _burn_in_gradient(False)
    assert torch.all(grad[:, :B] == 0)
    assert torch.all(grad[:, B:][_sequences("lstm").present[:, B:]] > 0)


def test_with_grad_through_burn_in_the_real_burn_in_steps_get_gradient_and_padding_none():
    grad = _burn_in_gradient(True)
    for row, (burn, _) in enumerate(ROWS):
        assert torch.all(grad[row, B - burn : B] > 0)
        assert torch.all(grad[row, : B - burn] == 0)  # left padding never reaches the core


def test_states_are_k_by_hidden_per_env_and_a_bad_core_is_one_line():
    lstm, gru = _network("lstm", False), _network("gru", False)
    assert lstm.initial_state(4).shape == (4, 2, 8)
    assert gru.initial_state(4).shape == (4, 1, 8)
    obs, prev = torch.zeros((4, 3)), torch.full((4,), -1)
    q, state = gru.step(obs, prev, torch.zeros(4), gru.initial_state(4))
    assert q.shape == (4, 3) and state.shape == (4, 1, 8)
    with pytest.raises(ConfigError, match=r"^core='rnn': must be 'lstm' or 'gru'$"):
        RecurrentQNetwork(SPACE, 3, core="rnn")


def test_no_previous_action_is_a_zero_one_hot():
    net = _network("lstm", True)
    inputs = net.core_inputs(
        torch.zeros((1, 3, 3)), torch.tensor([[-1, 0, 2]]), torch.zeros((1, 3))
    )
    one_hot = inputs[0, :, 5:8]  # after the torso's 5 features
    assert one_hot.tolist() == [[0, 0, 0], [1, 0, 0], [0, 0, 1]]
    assert inputs.shape == (1, 3, 5 + 3 + 1)
