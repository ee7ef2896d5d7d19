"""R2D2 on hand-checked numbers: n-step double-Q targets with value rescaling, TD errors, the
masked loss, the priority mix; padding and terminals; acting with state; save and load."""

from __future__ import annotations

import io
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.base import RecurrentActing, reports_td_error
from border_py.agents.r2d2 import R2D2, sequence_priority, sequence_targets
from border_py.agents.sequence_batch import SequenceBatch
from border_py.errors import ConfigError
from border_py.sequences import Sequences
from tests.agents.sequence_data import random_sequences, with_garbage

CPU = torch.device("cpu")
SPACE = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
SMALL = {"hidden_sizes": [6], "core_size": 8, "burn_in": 3, "length": 4, "n_step": 2}
ROWS = [(0, None), (1, None), (3, None), (3, 4), (2, 8), (0, 5)]


def _h(x: float) -> float:
    """The paper's h, written out (eps 1e-3)."""
    return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + 1e-3 * x


def _h_inverse(y: float) -> float:
    """Solve h(x) = y by bisection: independent of the closed form under test."""
    lo, hi = -1e7, 1e7
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _h(mid) < y else (lo, mid)
    return (lo + hi) / 2


def _hand_batch(weight: list[float] | None = None) -> Sequences:
    """Two rows, B = 1, L = 3, N = 2 (T = 6), 2 actions. Row 0's learning steps take actions
    1, 0 and then its episode has ended (the third step is padding, full of garbage); row 1 has
    one learning step."""
    nan = float("nan")
    return Sequences(
        obs=np.zeros((2, 6, 3), np.float32),
        action=np.array([[0, 1, 0, 99, 0, 0], [0, 1, 7, 7, 7, 7]]),
        reward=np.zeros((2, 6), np.float32),
        present=np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0]], bool),
        state=np.zeros((2, 2, 8), np.float32),
        burn=np.array([1, 1]),
        first_prev_action=np.array([-1, -1]),
        first_prev_reward=np.zeros(2, np.float32),
        ret=np.array([[0.5, 1.0, nan], [0.5, nan, nan]], np.float32),
        discount=np.array([[0.9, 0.0, nan], [0.9, nan, nan]], np.float32),
        offset=np.array([[1, 2, 10**6], [1, 10**6, 10**6]]),
        mask=np.array([[1, 1, 0], [1, 0, 0]], bool),
        burn_in=1,
        weight=None if weight is None else np.array(weight, np.float32),
        index=np.array([3, 8]),
    )


# Q-values from the learning start on (rows, L + N = 5, 2 actions); both rows alike
Q = [[1.0, 2.0], [0.5, 3.0], [4.0, 1.0], [0.0, 0.0], [8.0, 8.0]]
Q_TARGET = [[9.0, 9.0], [6.0, 5.0], [7.0, 3.0], [1.0, 1.0], [6.0, 6.0]]
# step 0: Q(s_0, a=1) = 2.0; bootstrap s_1: a* = argmax [0.5, 3.0] = 1, Q_target(s_1, 1) = 5.0
# (not the target's max, 6.0: double Q)
Y0 = _h(0.5 + 0.9 * _h_inverse(5.0))  # = h(31.6278...) = 4.7437...
# step 1: Q(s_1, a=0) = 0.5; terminal (discount 0): y = h(1.0)
Y1 = _h(1.0)
D0, D1 = Y0 - 2.0, Y1 - 0.5


def _patched_agent(**overrides) -> R2D2:
    agent = R2D2(SPACE, gym.spaces.Discrete(2), **{**SMALL, "burn_in": 1, **overrides})
    q, q_target = torch.tensor([Q, Q], requires_grad=True), torch.tensor([Q_TARGET] * 2)
    agent.q.unroll = lambda *_: q  # type: ignore[method-assign]
    agent.q_target.unroll = lambda *_: q_target  # type: ignore[method-assign]
    return agent


def test_targets_td_errors_loss_and_priorities_of_one_batch_by_hand():
    assert (round(Y0, 4), round(Y1, 9)) == (4.7437, 0.415213562)
    agent = _patched_agent(loss="mse", eta=0.9)
    batch = SequenceBatch.of(_hand_batch(), CPU)
    q_taken, y = sequence_targets(agent.q.unroll(batch), agent.q_target.unroll(batch), batch, True)
    assert y[0, :2].tolist() == pytest.approx([Y0, Y1], rel=1e-6)
    assert q_taken[0, :2].tolist() == [2.0, 0.5]
    metrics = agent.update(_hand_batch(weight=[1.0, 0.5]))
    # mse over the 3 real steps, row 1's weighted by 0.5
    loss = (D0**2 + D1**2 + 0.5 * D0**2) / 3
    assert float(metrics["train/loss"]) == pytest.approx(loss, rel=1e-6)
    priority = [0.9 * abs(D0) + 0.1 * (abs(D0) + abs(D1)) / 2, abs(D0)]
    assert metrics["td_error"].tolist() == pytest.approx(priority, rel=1e-6)
    assert metrics["td_error"].dtype == np.float32
    assert float(metrics["train/q_mean"]) == pytest.approx((2.0 + 0.5 + 2.0) / 3)


def test_without_rescaling_the_target_is_the_plain_n_step_double_q_one():
    agent = _patched_agent(value_rescaling=False, loss="huber")
    batch = SequenceBatch.of(_hand_batch(), CPU)
    _, y = sequence_targets(agent.q.unroll(batch), agent.q_target.unroll(batch), batch, False)
    assert y[0, :2].tolist() == pytest.approx([0.5 + 0.9 * 5.0, 1.0])
    d0, d1 = 5.0 - 2.0, 1.0 - 0.5  # huber: |d| - 0.5 above 1, d^2 / 2 below
    metrics = agent.update(_hand_batch())
    assert float(metrics["train/loss"]) == pytest.approx((2.5 + d1**2 / 2 + 2.5) / 3)
    assert d0 == 3.0


def test_the_priority_mix_on_hand_numbers():
    td = torch.tensor([[1.0, 3.0, 2.0, 100.0], [4.0, 50.0, 50.0, 50.0]])
    mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    assert sequence_priority(td, mask, 0.9).tolist() == pytest.approx([0.9 * 3 + 0.1 * 2, 4.0])
    assert sequence_priority(td, mask, 1.0).tolist() == [3.0, 4.0]
    assert sequence_priority(td, mask, 0.0).tolist() == [2.0, 4.0]
    assert sequence_priority(td, torch.zeros_like(mask), 0.9).tolist() == [0.0, 0.0]


def test_a_terminal_stops_bootstrapping_and_a_truncation_does_not():
    seq = random_sequences(ROWS, 3, 4, 2)
    batch = SequenceBatch.of(seq, CPU)
    generator = torch.Generator().manual_seed(0)
    q, q_target = (
        torch.randn((6, 6, 3), generator=generator),
        torch.randn((6, 6, 3), generator=generator),
    )
    _, y = sequence_targets(q, q_target, batch, True)
    _, y_moved = sequence_targets(q, q_target + 10.0, batch, True)
    terminal = batch.mask & (batch.discount == 0)
    truncated = batch.mask & (batch.discount > 0)
    assert terminal.any() and truncated.any()
    assert torch.equal(y[terminal], y_moved[terminal])
    assert torch.all(y[truncated] != y_moved[truncated])


@pytest.mark.parametrize("burn_in_grad", [False, True])
def test_a_padded_step_changes_neither_the_loss_its_gradients_nor_the_priority(burn_in_grad):
    seq = random_sequences(ROWS, 3, 4, 2, n_actions=2)
    seq.weight = np.linspace(0.3, 1.0, len(ROWS)).astype(np.float32)
    results = []
    for batch in (seq, with_garbage(seq)):
        agent = R2D2(SPACE, gym.spaces.Discrete(2), burn_in_grad=burn_in_grad, **SMALL)
        loss, priority, _ = agent.losses(SequenceBatch.of(batch, CPU), agent.q_target)
        loss.backward()
        results.append((loss, priority, [p.grad for p in agent.q.parameters()]))
    (loss, priority, grads), (dirty_loss, dirty_priority, dirty_grads) = results
    assert torch.isfinite(dirty_loss) and torch.equal(loss, dirty_loss)
    assert torch.equal(priority, dirty_priority)
    assert all(g is not None for g in grads)
    assert all(torch.equal(a, b) for a, b in zip(grads, dirty_grads, strict=True))


def test_the_target_network_is_copied_every_target_update_interval_steps():
    agent = R2D2(SPACE, gym.spaces.Discrete(2), target_update_interval=3, lr=1e-2, **SMALL)
    seq = random_sequences(ROWS, 3, 4, 2, n_actions=2)
    first = [p.clone() for p in agent.q_target.parameters()]
    for _ in range(2):
        agent.update(seq)
    assert all(torch.equal(a, b) for a, b in zip(first, agent.q_target.parameters(), strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, agent.q.parameters(), strict=True))
    agent.update(seq)
    pairs = zip(agent.q.parameters(), agent.q_target.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_acting_carries_the_state_and_explores_with_epsilon():
    agent = R2D2(SPACE, gym.spaces.Discrete(2), eps_start=0.0, eps_final=0.0, **SMALL)
    assert isinstance(agent, RecurrentActing) and reports_td_error(agent)
    state = agent.initial_state(3)
    assert state.shape == (3, 2, 8) and state.dtype == np.float32 and not state.any()
    obs = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    prev_action, prev_reward = np.array([-1, 0, 1]), np.array([0.0, 1.0, -1.0])
    actions, next_state = agent.act_recurrent(obs, state, prev_action, prev_reward, explore=True)
    with torch.no_grad():
        q, expected = agent.q.step(
            torch.as_tensor(obs),
            torch.as_tensor(prev_action),
            torch.as_tensor(prev_reward, dtype=torch.float32),
            torch.as_tensor(state),
        )
    assert actions.tolist() == q.argmax(1).tolist()
    # numpy's step (agents/recurrent_inference.py) sums in another order than torch's
    np.testing.assert_allclose(next_state, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert next_state.any()
    agent.set_epsilon(1.0)
    many = np.concatenate(
        [agent.act_recurrent(obs, state, prev_action, prev_reward, True)[0] for _ in range(200)]
    )
    assert 0.4 < many.mean() < 0.6  # uniform over 2 actions


def test_actor_priorities_change_nothing():
    agent = R2D2(SPACE, gym.spaces.Discrete(2), **SMALL)
    before = {k: v.clone() for k, v in agent.q.state_dict().items()}
    priority = agent.td_error(random_sequences(ROWS, 3, 4, 2, n_actions=2))
    assert priority.shape == (len(ROWS),) and priority.dtype == np.float32
    assert np.all(priority > 0) and agent.opt_steps == 0
    assert all(torch.equal(before[k], v) for k, v in agent.q.state_dict().items())


def test_a_saved_and_loaded_agent_continues_identically():
    batches = [random_sequences(ROWS, 3, 4, 2, n_actions=2, seed=s) for s in range(6)]
    first = R2D2(SPACE, gym.spaces.Discrete(2), seed=0, lr=1e-2, **SMALL)
    for batch in batches[:3]:
        first.update(batch)
        first.act_recurrent(
            np.zeros((2, 3), np.float32),
            first.initial_state(2),
            np.array([-1, -1]),
            np.zeros(2),
            True,
        )
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    second = R2D2(SPACE, gym.spaces.Discrete(2), seed=1, lr=1e-2, **SMALL)
    second.load_state_dict(torch.load(buffer, weights_only=True))
    obs, state = np.ones((4, 3), np.float32), first.initial_state(4)
    for batch in batches[3:]:
        assert float(first.update(batch)["train/loss"]) == float(second.update(batch)["train/loss"])
        a, sa = first.act_recurrent(obs, state, np.zeros(4), np.zeros(4), True)
        b, sb = second.act_recurrent(obs, state, np.zeros(4), np.zeros(4), True)
        assert a.tolist() == b.tolist() and np.array_equal(sa, sb)
    for net in ("q", "q_target"):
        ours, theirs = getattr(first, net).state_dict(), getattr(second, net).state_dict()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert (
        (first.opt_steps, first.env_steps)
        == (second.opt_steps, second.env_steps)
        == (6, 3 * 2 + 3 * 4)
    )


def test_the_policy_state_is_the_online_network():
    agent = R2D2(SPACE, gym.spaces.Discrete(2), seed=3, **SMALL)
    other = R2D2(SPACE, gym.spaces.Discrete(2), seed=4, **SMALL)
    other.load_policy_state(agent.policy_state())
    obs, state = np.ones((2, 3), np.float32), agent.initial_state(2)
    assert np.array_equal(
        agent.act_recurrent(obs, state, np.zeros(2), np.zeros(2), False)[1],
        other.act_recurrent(obs, state, np.zeros(2), np.zeros(2), False)[1],
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"period": 5, "length": 4}, r"^period=5: must be at most length=4$"),
        ({"core": "rnn"}, r"^core='rnn': must be 'lstm' or 'gru'$"),
        ({"eta": 1.5}, r"^eta=1.5: must be "),
        ({"burn_in": -1}, r"^burn_in=-1: must be a non-negative int$"),
        ({"length": 0}, r"^length=0: must be a positive int$"),
    ],
)
def test_bad_settings_are_one_line(overrides, message):
    with pytest.raises(ConfigError, match=message):
        R2D2(SPACE, gym.spaces.Discrete(2), **{**SMALL, **overrides})
