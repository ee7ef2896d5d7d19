"""The channels between processes: notices, shared-memory slots, credits, weights."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
import torch
from gymnasium import spaces

from border_py.transitions import FrameChunk, Transitions
from border_py.transport.channel import (
    BatchSender,
    LearnerGone,
    Readable,
    SlotRing,
    hand_back,
    receive,
    send,
)
from border_py.transport.layout import BatchLayout
from border_py.transport.messages import (
    MAX_NOTICE,
    ActorDone,
    BatchReady,
    EvalDone,
    WorkerFailed,
    decode,
    encode,
)
from border_py.transport.weights import (
    OPT_STEPS,
    VERSION,
    InlineWeights,
    PolicyWeights,
    RayWeights,
    SharedWeights,
    WeightPublisher,
)

CTX = mp.get_context("spawn")


def _notice(**changes) -> BatchReady:
    fields = dict(
        actor=1,
        incarnation=0,
        slot=0,
        rows=3,
        env_steps=5,
        episodes=1,
        policy_version=2,
        policy_opt_steps=20,
        loaded_at=1.5,
    )
    return BatchReady(**(fields | changes))


def test_every_message_fits_one_atomic_pipe_write():
    notice = _notice(exploration={"train/epsilon": 0.1})
    assert decode(encode(notice)) == notice
    long = WorkerFailed(actor=0, incarnation=2, error="x" * 10_000 + "\nRuntimeError: boom")
    data = encode(long)
    assert len(data) <= MAX_NOTICE
    kept = decode(data)
    assert kept.error.startswith("...") and kept.exception == "RuntimeError: boom"
    for text in ("é" * 2000, "あ" * 5000):  # 2 and 3 bytes a character: 3000 do not fit
        wide = WorkerFailed(actor=0, incarnation=0, error=f"{text}\nValueError: {text[:40]}")
        data = encode(wide)
        assert len(data) <= MAX_NOTICE
        kept = decode(data)
        assert kept.exception == f"ValueError: {text[:40]}" and wide.error.endswith(kept.error[4:])
    many = EvalDone(
        opt_steps=1,
        env_steps=2,
        return_mean=3.0,
        return_std=0.0,
        return_min=3.0,
        return_max=3.0,
        length_mean=4.0,
        returns=[3.0] * 5000,
        seeds=range(10, 5010),
    )
    cut = decode(encode(many))
    assert 0 < len(cut.returns) < 5000 and cut.return_mean == 3.0  # statistics stay exact
    assert cut.seeds == range(10, 5010)
    with pytest.raises(ValueError, match="more than"):
        encode(_notice(exploration={f"k{i}": float(i) for i in range(1000)}))


def _layout(frames: bool = False, priorities: bool = False) -> BatchLayout:
    obs = spaces.Box(0, 255, (4, 8, 8), np.uint8) if frames else spaces.Box(-1, 1, (3,))
    return BatchLayout.for_batches(
        obs,
        spaces.Discrete(2),
        n_buffer=4,
        n_envs=2,
        n_step=3,
        frame_stack=4 if frames else None,
        priorities=priorities,
    )


def test_a_slot_carries_a_batch_its_frames_priorities_and_episodes_without_a_copy():
    ring = SlotRing.create(CTX, _layout(frames=True, priorities=True), n_slots=2)
    n = 5
    batch = Transitions(
        obs=np.arange(n),
        action=np.array([0, 1, 0, 1, 1]),
        reward=np.linspace(0, 1, n, dtype=np.float32),
        next_obs=np.arange(n) + 1,
        discount=np.full(n, 0.9, np.float32),
        priority=np.arange(n, dtype=np.float32),
        frames=FrameChunk(7, 10, np.full((3, 8, 8), 9, np.uint8), np.array([9, 10, 11]), 8),
    )
    rows, chunk = ring.write(1, batch, [12.5], [7])
    assert rows == n and chunk is batch.frames
    got = ring.read(
        _notice(
            slot=1,
            rows=n,
            frames=3,
            frame_source=7,
            frame_first=10,
            frame_keep_from=8,
            priorities=True,
        )
    )
    t = got.transitions
    for name in ("obs", "action", "reward", "next_obs", "discount", "priority"):
        np.testing.assert_array_equal(getattr(t, name), getattr(batch, name), err_msg=name)
    assert t.frames.source == 7 and t.frames.first == 10 and t.frames.keep_from == 8
    np.testing.assert_array_equal(t.frames.pixels, batch.frames.pixels)
    assert got.episode_returns == [12.5] and got.episode_lengths == [7]
    assert np.shares_memory(t.obs, ring.slots[1]["obs"])  # a view of the slot: nothing copied


def test_a_batch_too_large_for_its_slot_is_refused():
    ring = SlotRing.create(CTX, _layout(), n_slots=1)
    rows = ring.layout.capacity("reward") + 1
    batch = Transitions(
        np.zeros((rows, 3), np.float32),
        np.zeros(rows, np.int64),
        np.zeros(rows, np.float32),
        np.zeros((rows, 3), np.float32),
        np.zeros(rows, np.float32),
    )
    with pytest.raises(ValueError, match="does not fit"):
        ring.write(0, batch, [], [])


def test_credits_give_back_pressure_and_the_learners_exit_is_seen():
    ring = SlotRing.create(CTX, _layout(), n_slots=2)
    notices_r, notices_w = CTX.Pipe(duplex=False)
    credits_r, credits_w = CTX.Pipe(duplex=False)
    sender = BatchSender(ring, notices_w, credits_r)
    for slot in (sender.free.popleft(), sender.free.popleft()):
        sender.send(_notice(slot=slot))
    waited = []
    assert not sender.wait_for_slot(lambda: waited.append(1) or len(waited) < 3, 0.01)  # full
    assert [m.slot for m in receive(notices_r, 10)] == [0, 1]
    hand_back(credits_w, 1)
    assert sender.wait_for_slot(lambda: True, 0.01) and list(sender.free) == [1]
    credits_w.close()  # the learner is gone
    sender.free.clear()
    with pytest.raises(LearnerGone):
        sender.wait_for_slot(lambda: True, 0.01)


@pytest.mark.parametrize("registered", [False, True])  # Connection.poll, or a Readable
def test_a_writers_last_messages_are_read_before_its_eof(registered):
    reader, writer = CTX.Pipe(duplex=False)
    readable = Readable(reader) if registered else None
    assert receive(reader, 10, readable) == []  # nothing yet: no wait
    send(writer, _notice(slot=0))
    send(writer, WorkerFailed(actor=1, incarnation=0, error="RuntimeError: boom"))
    writer.close()  # the actor exited before the learner looked
    last = receive(reader, 10, readable)
    assert [type(m) for m in last] == [BatchReady, WorkerFailed]
    assert last[1].exception == "RuntimeError: boom"
    with pytest.raises(EOFError):
        receive(reader, 10, readable)


def _write_notices_forever(conn) -> None:
    n = 0
    while True:
        send(conn, _notice(rows=n, exploration={"pad": float(n)}))
        n += 1


@pytest.mark.slow
@pytest.mark.parametrize("registered", [False, True])  # Connection.poll, or a Readable
def test_a_writer_killed_mid_stream_leaves_only_whole_messages(registered):
    """Kill a process that writes notices as fast as it can while the learner reads: the reader
    gets whole messages, in order, then EOF; it never blocks on half a message."""
    for delay in (0.0, 0.01, 0.05, 0.1, 0.2):
        reader, writer = CTX.Pipe(duplex=False)
        readable = Readable(reader) if registered else None
        child = CTX.Process(target=_write_notices_forever, args=(writer,))
        child.start()
        writer.close()
        assert reader.poll(60)  # it is writing
        killer = threading.Timer(delay, os.kill, (child.pid, signal.SIGKILL))
        killer.start()
        rows = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if reader.poll(1.0):
                    rows += [m.rows for m in receive(reader, 10_000, readable)]
            except EOFError:
                break
        else:
            raise AssertionError("no EOF after the writer died")
        killer.join()
        child.join(timeout=10)
        assert rows == list(range(len(rows))) and len(rows) > 0


def test_weights_are_read_whole_or_not_at_all():
    state = {"a": torch.arange(6.0).view(2, 3), "b": torch.tensor([7.0])}
    weights = SharedWeights.create(CTX, state)
    assert weights.version == 0
    weights.publish(state, opt_steps=5)
    version, opt_steps, got = weights.read()
    assert (version, opt_steps) == (1, 5) and torch.equal(got["a"], state["a"])
    weights._data[0] = 123.0  # a copy torn by a publication under way: its CRC no longer matches
    assert weights.read(attempts=3) is None
    weights._header[0] += 1  # a publication under way (odd sequence number)
    assert weights.read(attempts=3) is None
    weights._header[0] += 1
    weights.publish({"a": state["a"] * 2, "b": state["b"]}, opt_steps=9)
    version, opt_steps, got = weights.read()
    assert (version, opt_steps) == (2, 9) and torch.equal(got["a"], state["a"] * 2)


def test_weights_are_read_only_under_the_version_and_opt_steps_they_were_published_with():
    """A weakly ordered CPU may load the header after the copy: a whole copy of one publication
    under the next one's version and opt steps must not be accepted (the CRC covers them)."""
    state = {"a": torch.arange(6.0).view(2, 3)}
    weights = SharedWeights.create(CTX, state)
    weights.publish(state, opt_steps=5)
    assert weights.read()[:2] == (1, 5)
    header = weights._header
    header[VERSION] = 2  # another label over the same weights
    assert weights.read(attempts=3) is None
    header[VERSION], header[OPT_STEPS] = 1, 9
    assert weights.read(attempts=3) is None
    header[OPT_STEPS] = 5  # its own label again
    version, opt_steps, got = weights.read()
    assert (version, opt_steps) == (1, 5) and torch.equal(got["a"], state["a"])


def test_a_slow_reader_skips_versions_and_never_blocks_the_writer():
    state = {"w": torch.zeros(200_000)}
    weights = SharedWeights.create(CTX, state)
    start = time.perf_counter()
    for k in range(1, 51):
        weights.publish({"w": torch.full((200_000,), float(k))}, opt_steps=k)
    assert time.perf_counter() - start < 10  # no lock to wait for
    version, opt_steps, got = weights.read()
    assert version == 50 and opt_steps == 50 and float(got["w"][0]) == 50.0


@pytest.mark.parametrize(
    "make",
    [
        lambda state: SharedWeights.create(CTX, state),
        lambda _: RayWeights(),
        lambda _: InlineWeights(),
    ],
    ids=["shared", "ray", "inline"],
)
def test_every_publisher_gives_each_publication_the_next_version(make):
    state = {"a": torch.arange(3.0)}
    publisher = make(state)
    assert isinstance(publisher, WeightPublisher) and publisher.version == 0
    assert [publisher.publish(state, opt_steps=k) for k in (5, 9)] == [1, 2]
    assert publisher.version == 2


def test_ray_weights_go_into_the_object_store_once_when_an_actor_needs_them(monkeypatch):
    puts = []

    class Ray:  # Ray's put, and nothing else
        @staticmethod
        def put(value):
            puts.append(value)
            return f"ref{len(puts)}"

    monkeypatch.setitem(sys.modules, "ray", Ray)
    weights = RayWeights()
    weights.publish({"a": torch.arange(3.0)}, opt_steps=5)
    weights.publish({"a": torch.arange(3.0) * 2}, opt_steps=9)
    assert not puts  # nobody needed them yet
    assert weights.since(0) == ("ref1", 2) and weights.since(1) == ("ref1", 2)
    assert weights.since(2) == (None, 2)  # an actor with the latest gets nothing
    (put,) = puts
    assert isinstance(put, PolicyWeights) and put.opt_steps == 9
    assert torch.equal(put.state()["a"], torch.arange(3.0) * 2)


def test_inline_weights_keep_the_opt_steps_the_agent_acts_at():
    weights = InlineWeights()
    weights.publish({}, opt_steps=40)
    assert weights.opt_steps == 40


def test_actor_done_and_failures_decode():
    done = ActorDone(actor=2, incarnation=1, sent=300, dropped=20)
    assert decode(encode(done)) == done
