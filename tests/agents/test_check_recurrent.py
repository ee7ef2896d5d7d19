"""``check_agent`` on a recurrent agent (R2D2): it learns on sequences cut as its actors cut them
and acts with ``act_recurrent``; R2D2 (LSTM and GRU) keeps the contract, and a recurrent agent
that breaks one of its guarantees fails in one line naming it."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from border_py.agents import AgentCheckError, check_agent
from border_py.agents.check_sequences import collect_sequences, garbled, padded
from border_py.agents.r2d2 import R2D2
from border_py.sequences import Sequences

SMALL = {
    "hidden_sizes": [16],
    "core_size": 16,
    "burn_in": 4,
    "length": 8,
    "n_step": 3,
    "batch_size": 8,
}
CHECKED = [
    "accepts the env's spaces",
    "builds for the env's spaces",
    "protocol",
    "constructor leaves the global RNGs alone",
    "attributes",
    "initial state",
    "deterministic given seed",
    "act shapes",
    "acts on its state",
    "greedy act changes nothing",
    "update metrics",
    "exploration stats",
    "policy state",
    "state round trip",
    "continue identically after save/load",
    "padding changes nothing",
    "prefetch parity",
    "prioritized replay",
    "TD-error scoring",
    "fixed epsilon",
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


@pytest.mark.parametrize("core", ["lstm", "gru"])
def test_r2d2_keeps_the_contract(core):
    assert check_agent(R2D2, cartpole(), {**SMALL, "core": core}) == CHECKED


def test_the_sequences_are_cut_as_actors_cut_them():
    agent = R2D2(
        observation_space=cartpole().observation_space,
        action_space=cartpole().action_space,
        **SMALL,
    )
    seq = collect_sequences(agent, cartpole(), 8, seed=0)
    assert len(seq) >= 8 and seq.burn_in == 4 and seq.length == 8 and seq.tail == 3
    assert seq.state.shape[1:] == (2, 16)
    # windows stored from an episode's first step: a zero state, no previous action
    starts = seq.first_prev_action == -1
    assert starts[seq.burn < 4].all()  # a burn-in cut short starts at the episode's start
    assert starts.any() and (seq.state[starts] == 0).all()
    later = ~starts  # windows stored from a later step: the state the actor carried there
    assert later.any() and (np.abs(seq.state[later]).sum(axis=(1, 2)) > 0).all()
    assert padded(seq) > 0  # CartPole's short random episodes end inside windows


def test_garbling_changes_only_padding():
    agent = R2D2(
        observation_space=cartpole().observation_space,
        action_space=cartpole().action_space,
        **SMALL,
    )
    seq = collect_sequences(agent, cartpole(), 8, seed=0)
    other = garbled(seq, 2)
    assert not np.array_equal(other.obs, seq.obs)
    assert np.array_equal(other.obs[seq.present], seq.obs[seq.present])
    assert np.array_equal(other.ret[seq.mask], seq.ret[seq.mask])
    learning = seq.action[:, 4:12]
    assert np.array_equal(other.action[:, 4:12][seq.mask], learning[seq.mask])
    assert other.action.max() < 2 and other.offset.min() >= 0


# -- deliberately broken recurrent agents ---------------------------------------------------------


class IgnoresState(R2D2):
    """Acts from a zero state whatever state it is handed."""

    def act_recurrent(self, obs, state, prev_action, prev_reward, explore):
        zeros = np.zeros_like(state)
        return super().act_recurrent(obs, zeros, prev_action, prev_reward, explore)


class OnesAtStart(R2D2):
    """Starts episodes from ones, where its actors zero the state."""

    def initial_state(self, n: int) -> np.ndarray:
        return np.ones_like(super().initial_state(n))


class LearnsOnPadding(R2D2):
    """Learns at every learning step, those without an action too."""

    def update(self, batch: Sequences) -> dict[str, Any]:
        return super().update(dataclasses.replace(batch, mask=np.ones_like(batch.mask)))


class BurnsInPadding(R2D2):
    """Burns in from the window's first index, padding or not."""

    def update(self, batch: Sequences) -> dict[str, Any]:
        full = np.full_like(batch.burn, batch.burn_in)
        return super().update(dataclasses.replace(batch, burn=full))


class FlatState(R2D2):
    """Returns its next state without the parts axis."""

    def act_recurrent(self, obs, state, prev_action, prev_reward, explore):
        actions, after = super().act_recurrent(obs, state, prev_action, prev_reward, explore)
        return actions, after.reshape(len(after), -1)


class ForgetsExplorationRNG(R2D2):
    """Saves and loads everything but its exploration generator."""

    checkpointed = {key: part for key, part in R2D2.checkpointed.items() if key != "rng"}


class PeriodPastLength(R2D2):
    """Starts a window every length + 1 steps: a step of each period learned by no window."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.period = self.length + 1


BROKEN = [  # (class, the guarantee it breaks, a part of the message)
    (PeriodPastLength, "attributes", "period=9, not an int in [1, length=8]"),
    (IgnoresState, "acts on its state", "the state given is ignored"),
    (OnesAtStart, "initial state", "initial_state(1) is not all zeros"),
    (LearnsOnPadding, "padding changes nothing", "with other values where it pads"),
    (BurnsInPadding, "padding changes nothing", "with other values where it pads"),
    (FlatState, "act shapes", "a batch of 1, explore=False: the next state is 'shape (1, 32)"),
    (
        ForgetsExplorationRNG,
        "continue identically after save/load",
        "act_recurrent(obs, state, prev_action, prev_reward, explore=True) at step 0",
    ),
]


@pytest.mark.parametrize(
    ("agent_class", "guarantee", "detail"), BROKEN, ids=[b[0].__name__ for b in BROKEN]
)
def test_a_broken_recurrent_agent_fails_in_one_line_naming_the_guarantee(
    agent_class, guarantee, detail
):
    with pytest.raises(AgentCheckError) as err:
        check_agent(agent_class, cartpole(), SMALL)
    message = str(err.value)
    assert err.value.guarantee == guarantee, message
    name = f"{__name__}.{agent_class.__qualname__}"
    assert message.startswith(f"{name} breaks '{guarantee}': "), message
    assert detail in message and "\n" not in message
