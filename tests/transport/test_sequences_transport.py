"""A recurrent agent's sequences through an actor's channel: slots laid out for sequences, a batch
written by another process read back bit for bit, and slots sized for the largest batch a real
sampler emits."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest
from gymnasium import spaces
from omegaconf import OmegaConf

from border_py.actors.local import LocalActorSettings
from border_py.actors.sampler import Sampler, SampleStats
from border_py.config import build
from border_py.runs.settings import RunSettings
from border_py.sequences import STORED_SEQUENCE, Sequences
from border_py.trainers.async_trainer import AsyncSettings
from border_py.trainers.components import build_components
from border_py.transitions import Transitions
from border_py.transport.channel import BatchSender, SlotRing, hand_back, receive
from border_py.transport.layout import BatchLayout, SequenceShape
from border_py.transport.messages import BatchReady

CTX = mp.get_context("spawn")
SHAPE = SequenceShape(burn_in=3, length=4, period=2, n_step=2, state=(2, 5))
OBS = spaces.Box(-np.inf, np.inf, (3,), np.float32)


def _layout(priorities: bool = True) -> BatchLayout:
    return BatchLayout.for_sequences(OBS, n_buffer=6, n_envs=2, shape=SHAPE, priorities=priorities)


def _sequences(rows: int, seed: int, steps: int = SHAPE.steps) -> Sequences:
    """Random sequences of :data:`SHAPE`, with bit patterns a conversion would change (NaN,
    -0.0, infinities, subnormals) in every float column."""
    rng = np.random.default_rng(seed)
    length = SHAPE.length

    def floats(*shape: int) -> np.ndarray:
        values = rng.normal(size=(rows, *shape)).astype(np.float32)
        flat = values.reshape(-1)
        special = [np.nan, -0.0, -np.inf, np.float32(1e-45)][: flat.size]
        flat[: len(special)] = special
        return values

    return Sequences(
        obs=floats(steps, 3),
        action=rng.integers(0, 4, (rows, steps)),
        reward=floats(steps),
        present=rng.random((rows, steps)) < 0.8,
        state=floats(*SHAPE.state),
        burn=rng.integers(0, SHAPE.burn_in + 1, rows),
        first_prev_action=rng.integers(-1, 4, rows),
        first_prev_reward=floats(),
        ret=floats(length),
        discount=floats(length),
        offset=rng.integers(1, SHAPE.n_step + 1, (rows, length)),
        mask=rng.random((rows, length)) < 0.9,
        burn_in=SHAPE.burn_in,
        priority=floats(),
        key=rng.integers(-(2**62), 2**62, (rows, 3)),  # int64 keys, large ones too
    )


def _send_sequences(ring: SlotRing, notices, credits, rows: int, seed: int) -> None:
    """An actor's side: fill a free slot with :func:`_sequences` and announce it."""
    sender = BatchSender(ring, notices, credits)
    k = sender.free.popleft()
    n, frames = ring.write(k, _sequences(rows, seed), [1.5, -2.0], [7, 9])
    assert frames is None
    notice = BatchReady(
        actor=1,
        incarnation=0,
        slot=k,
        rows=n,
        priorities=True,
        env_steps=40,
        episodes=2,
        policy_version=3,
        policy_opt_steps=30,
        loaded_at=1.0,
    )
    sender.send(notice)


def test_sequences_written_by_another_process_are_read_back_bit_for_bit():
    ring = SlotRing.create(CTX, _layout(), n_slots=2)
    rows = ring.layout.capacity("reward")  # a full slot
    notices_r, notices_w = CTX.Pipe(duplex=False)
    credits_r, credits_w = CTX.Pipe(duplex=False)
    child = CTX.Process(target=_send_sequences, args=(ring, notices_w, credits_r, rows, 7))
    child.start()
    notices_w.close()
    credits_r.close()
    try:
        assert notices_r.poll(60), "no notice from the writer"
        (notice,) = receive(notices_r, 10)
        got = ring.read(notice)
    finally:
        child.join(timeout=30)
    assert child.exitcode == 0
    sent = _sequences(rows, 7)
    batch = got.transitions
    assert isinstance(batch, Sequences) and len(batch) == rows
    assert batch.burn_in == SHAPE.burn_in and batch.steps == SHAPE.steps
    for name in (*STORED_SEQUENCE, "priority", "key"):
        a, b = getattr(batch, name), getattr(sent, name)
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert a.tobytes() == b.tobytes(), name  # bit for bit: NaN, -0.0 and subnormals too
    assert np.shares_memory(batch.obs, ring.slots[notice.slot]["obs"])  # read in place
    assert got.episode_returns == [1.5, -2.0] and got.episode_lengths == [7, 9]
    assert (got.actor, got.env_steps, got.policy_opt_steps) == (1, 40, 30)
    hand_back(credits_w, notice.slot)  # the writer is gone: no reader, no error


def test_a_slot_of_sequences_refuses_what_it_does_not_carry():
    ring = SlotRing.create(CTX, _layout(), n_slots=1)
    capacity = ring.layout.capacity("reward")
    with pytest.raises(ValueError, match=r"^a batch of \d+ rows and 0 episodes does not fit"):
        ring.write(0, _sequences(capacity + 1, 0), [], [])
    with pytest.raises(
        ValueError, match=r"^the batch's obs rows are \(8, 3\), the slot's \(9, 3\)"
    ):
        ring.write(0, _sequences(2, 0, steps=SHAPE.steps - 1), [], [])  # another T
    transitions = Transitions(*(np.zeros(2, np.float32) for _ in range(5)))
    with pytest.raises(ValueError, match="a Transitions batch for a channel of sequences"):
        ring.write(0, transitions, [], [])
    keyless = _sequences(2, 0)
    keyless.key = None
    with pytest.raises(ValueError, match=r"^the sequences' keys are None, expected \(2, 3\)"):
        ring.write(0, keyless, [], [])
    keyless.key = np.zeros((2, 2), np.int64)
    with pytest.raises(ValueError, match=r"^the sequences' keys are \(2, 2\), expected \(2, 3\)"):
        ring.write(0, keyless, [], [])
    unscored = _sequences(2, 0)
    unscored.priority = None
    with pytest.raises(ValueError, match="no priorities but the channel carries them"):
        ring.write(0, unscored, [], [])
    without = SlotRing.create(CTX, _layout(priorities=False), n_slots=1)
    n, _ = without.write(0, unscored, [], [])
    notice = BatchReady(
        actor=0,
        incarnation=0,
        slot=0,
        rows=n,
        env_steps=1,
        episodes=0,
        policy_version=1,
        policy_opt_steps=0,
        loaded_at=0.0,
    )
    assert without.read(notice).transitions.priority is None


def test_the_async_trainer_gives_a_recurrent_agent_slots_that_hold_its_largest_batch(tiny_config):
    """Period 1 and CartPole's short random episodes: an episode's end flushes up to L + N open
    windows at once. Every batch of ``n_buffer`` (1) sequences the actors' sampler returns fits
    the slot laid out from the agent's settings, and the largest goes past ``n_buffer``."""
    overrides = (
        "agent=r2d2",
        "replay_buffer=sequence",
        "agent.length=4",
        "agent.burn_in=2",
        "agent.n_step=2",
        "agent.period=1",
        "agent.core_size=8",
        "actor_manager.n_envs_per_actor=3",
        "actor_manager.n_buffer=1",
    )
    config = OmegaConf.to_container(tiny_config(*overrides), resolve=True)
    assert isinstance(config, dict)
    parts = build_components(config, RunSettings.of(config), 0)
    AsyncSettings.check_components(AsyncSettings.__new__(AsyncSettings), parts)  # no refusal
    settings = build("actor_manager", config["actor_manager"])
    assert isinstance(settings, LocalActorSettings)
    layout = settings.layout(config, parts.env_factory.spaces(), parts.agent)
    assert layout.burn_in == 2 and layout.capacity("reward") == 1 + 3 * (1 + 6)
    ring = SlotRing.create(CTX, layout, n_slots=1)
    sampler = Sampler(parts.env_factory, parts.agent, 3, seed=0)
    sizes = []
    try:
        for _ in range(60):
            stats = SampleStats()
            batch = sampler.sample(1, stats)
            assert isinstance(batch, Sequences)
            rows, _ = ring.write(0, batch, stats.episode_returns, stats.episode_lengths)
            sizes.append(rows)
    finally:
        sampler.close()
    assert max(sizes) > 1 + 3  # episodes ended: their open windows came at once
