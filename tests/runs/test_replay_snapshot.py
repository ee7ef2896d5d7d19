"""The replay buffer in a checkpoint: one memory-mapped ``.npy`` per array, written from the live
arrays, published with the checkpoint, resumed into the same samples; older ``.npz`` snapshots
still resume; a truncated file and a snapshot too large for memory are one line."""

from __future__ import annotations

import logging
import os
import resource
import signal
from pathlib import Path

import numpy as np
import pytest

from border_py import resources
from border_py._version import __version__
from border_py.errors import ConfigError, RunError
from border_py.layout import BUFFER, BUFFER_NPZ
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.uniform import UniformReplayBuffer
from border_py.resources import size_text
from border_py.runs.checkpoint import load_checkpoint, recover, save_checkpoint
from border_py.runs.replay_snapshot import read_snapshot, write_snapshot
from border_py.runs.resume import check_resume_memory
from border_py.runs.state import TrainerState
from border_py.transitions import STORED, FrameChunk, Transitions

SIDE, STACK, EPISODE = 6, 4, 7


def cartpole(first: int, n: int) -> Transitions:
    """``n`` CartPole-shaped transitions whose reward identifies them."""
    v = np.arange(first, first + n, dtype=np.float32)
    obs = np.repeat(v[:, None], 4, 1)
    return Transitions(obs, v.astype(np.int64) % 2, v, obs + 100, np.full(n, 0.99, np.float32))


def framed(first: int, n: int) -> Transitions:
    """``n`` new frames (ids ``first ..``) of one stream, episodes of ``EPISODE`` steps, and one
    transition ending at each; a frame's pixels tell its id."""
    ids = first + np.arange(n, dtype=np.int64)
    prev = np.where(ids % EPISODE == 0, ids, ids - 1)  # a reset frame pads with itself
    batch = Transitions(prev, ids % 3, ids.astype(np.float32), ids, np.full(n, 0.99, np.float32))
    pixels = (ids[:, None, None] * 7 + np.arange(SIDE * SIDE).reshape(SIDE, SIDE)) % 256
    batch.frames = FrameChunk(0, first, pixels.astype(np.uint8), prev, max(first - 1, 0))
    return batch


KINDS = {
    "uniform": (lambda c: UniformReplayBuffer(c, seed=3), cartpole),
    "prioritized": (lambda c: PrioritizedReplayBuffer(c, seed=3, beta_steps=50), cartpole),
    "frames": (lambda c: PrioritizedReplayBuffer(c, seed=3, frame_stack=STACK), framed),
}


def filled(kind: str, capacity: int, pushes: int) -> UniformReplayBuffer:
    """A buffer of ``kind`` after ``pushes`` batches of 9 (it wraps), sampled a few times."""
    make, rows = KINDS[kind]
    buffer = make(capacity)
    for k in range(pushes):
        buffer.push(rows(9 * k, 9))
    for _ in range(3):
        batch = buffer.sample(8)
        if batch.index is not None:
            buffer.update_priorities(batch.index, batch.reward / 7)
    return buffer


def save(root: Path, buffer: UniformReplayBuffer | None, name: str = "000000100") -> Path:
    """A checkpoint holding ``buffer``, saved by the real checkpoint code."""
    replay = buffer.state() if buffer is not None else {}
    state = TrainerState(100, 1000, 1000, {}, replay, {}, {})
    return save_checkpoint(
        root,
        name,
        policy={},
        agent_state={},
        state=state,
        config={"seed": 0, "env": {}, "agent": {}},
        meta={"replay_buffer": buffer is not None, "border_py": __version__},
        buffer=None if buffer is None else buffer.arrays(),
    )


def assert_same_samples(a: UniformReplayBuffer, b: UniformReplayBuffer) -> None:
    for _ in range(5):
        x, y = a.sample(16), b.sample(16)
        for key in (*STORED, "weight", "index"):
            np.testing.assert_array_equal(getattr(x, key), getattr(y, key), err_msg=key)
        if x.index is not None:
            a.update_priorities(x.index, x.reward / 5)
            b.update_priorities(y.index, y.reward / 5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_resumed_memory_mapped_buffer_samples_what_the_saved_one_would(tmp_path, kind):
    saved = filled(kind, 40, 7)  # 63 transitions into 40 rows: wrapped
    path = save(tmp_path, saved)
    arrays = load_checkpoint(path).buffer()
    assert arrays is not None and set(arrays) == set(saved.arrays())
    assert all(isinstance(a, np.memmap) and not a.flags.writeable for a in arrays.values())
    assert sorted(os.listdir(path / BUFFER)) == sorted(
        ["arrays.json", *(f"{name}.npy" for name in arrays)]
    )
    assert not (path / BUFFER_NPZ).exists()
    resumed = KINDS[kind][0](40)
    resumed.load(load_checkpoint(path).state.replay, arrays)
    assert_same_samples(resumed, saved)
    resumed.push(KINDS[kind][1](63, 9))  # the stream goes on where it was
    saved.push(KINDS[kind][1](63, 9))
    assert_same_samples(resumed, saved)


def test_a_mapped_frame_ring_resumes_into_a_larger_one_in_time_order(tmp_path):
    saved = filled("frames", 40, 7)
    path = save(tmp_path, saved)
    larger = PrioritizedReplayBuffer(100, seed=0, frame_stack=STACK)
    larger.load(load_checkpoint(path).state.replay, load_checkpoint(path).buffer())
    order = (saved._next + np.arange(len(saved))) % saved.capacity  # oldest first
    live = saved._live(order)
    assert live.sum() > 30
    want, got = saved._gather(order[live]), larger._gather(np.flatnonzero(live))
    for key in STORED:
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)


def test_the_snapshot_is_written_from_the_live_arrays_without_a_copy():
    buffer = filled("frames", 40, 7)
    arrays = buffer.arrays()
    held = [*buffer._storage.values(), buffer._frames.pixels, buffer._frames.prev]
    held.append(buffer.prioritization.sums.levels[0])
    for name, array in arrays.items():
        assert any(np.shares_memory(array, h) for h in held), name


def test_an_older_npz_snapshot_still_resumes(tmp_path):
    saved = filled("frames", 40, 7)
    # what earlier versions wrote: the live frames oldest first, a state without their layout
    frames = saved._frames
    slots = np.arange(frames.first_live, frames.written) % frames.capacity
    old = {k: v.copy() for k, v in saved.arrays().items()}
    old |= {"frame_pixels": frames.pixels[slots], "frame_prev": frames.prev[slots]}
    state = saved.state()
    del state["frames"]["ring"]
    path = save(tmp_path, None)
    np.savez(path / BUFFER_NPZ, **old)
    arrays = load_checkpoint(path).buffer()
    assert arrays is not None and not any(isinstance(a, np.memmap) for a in arrays.values())
    resumed = PrioritizedReplayBuffer(40, seed=0, frame_stack=STACK)
    resumed.load(state, arrays)
    assert_same_samples(resumed, saved)


def test_a_truncated_array_file_is_one_line(tmp_path):
    path = save(tmp_path, filled("frames", 40, 7))
    file = path / BUFFER / "frame_pixels.npy"
    os.truncate(file, file.stat().st_size - 5)
    with pytest.raises(ConfigError) as refused:
        load_checkpoint(path).buffer()
    assert str(refused.value) == (
        f"{file}: corrupt replay-buffer snapshot ({file.stat().st_size} bytes, its header makes"
        f" it {file.stat().st_size + 5})"
    )


def test_a_failed_save_leaves_the_previous_checkpoint_and_its_buffer(tmp_path):
    first = filled("frames", 400, 30)
    path = save(tmp_path, first)
    before = {k: np.array(v) for k, v in load_checkpoint(path).buffer().items()}
    second = filled("frames", 400, 40)
    limit = 2 * 2**10  # bytes per file: the records fit, the frames (~10 KiB) do not
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it: EFBIG, no signal
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        with pytest.raises(RunError, match=r"could not be written .*the earlier checkpoints"):
            save(tmp_path, second)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["000000100"]  # no temporary dir left
    after = load_checkpoint(path).buffer()
    assert set(after) == set(before)
    for name, array in before.items():
        np.testing.assert_array_equal(after[name], array, err_msg=name)


def test_a_checkpoint_killed_before_its_publish_is_never_read(tmp_path):
    """What a kill before the rename leaves (a hidden temporary dir with part of the buffer) is
    neither a checkpoint nor kept."""
    path = save(tmp_path, filled("uniform", 40, 3))
    torn = tmp_path / ".tmp-000000200-x"
    torn.mkdir()
    (torn / BUFFER).mkdir()
    (torn / BUFFER / "obs.npy").write_bytes(b"\x93NUMPY")
    assert load_checkpoint(tmp_path.parent / tmp_path.name / "000000100").path == path
    recover(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["000000100"]


def test_resuming_a_buffer_larger_than_memory_is_refused_in_one_line(tmp_path, monkeypatch, caplog):
    path = save(tmp_path, filled("uniform", 40, 7))
    saved = sum(a.nbytes for a in load_checkpoint(path).buffer().values())
    monkeypatch.setattr(resources, "available_memory", lambda: (saved - 1, "of memory available"))
    with pytest.raises(ConfigError) as refused:
        check_resume_memory(load_checkpoint(path), 40, True)
    assert str(refused.value) == (
        f"replay_buffer.capacity=40: resuming {path}'s replay buffer needs ~{size_text(saved)},"
        f" more than the {size_text(saved - 1)} of memory available; free memory or resume on a"
        " machine with more"
        " (or check_resources=false to run anyway)"
    )
    monkeypatch.setattr(resources, "available_memory", lambda: (saved, "of memory available"))
    check_resume_memory(load_checkpoint(path), 40, True)  # fits: the files are mapped, not read
    arrays = {k: np.array(v) for k, v in load_checkpoint(path).buffer().items()}
    os.rename(path / BUFFER, tmp_path / "aside")
    np.savez(path / BUFFER_NPZ, **arrays)  # an older snapshot is read whole beside the buffer
    with pytest.raises(
        ConfigError, match=r"replay_buffer.npz read whole beside the buffer\) needs"
    ):
        check_resume_memory(load_checkpoint(path), 40, True)
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        check_resume_memory(load_checkpoint(path), 40, False)
    assert "replay_buffer.capacity=40: resuming" in caplog.text


def test_any_array_layout_is_written_in_c_order_and_read_back_equal(tmp_path):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    arrays = {
        "contiguous": np.arange(24, dtype=np.float32).reshape(6, 4),
        "strided": np.arange(48).reshape(12, 4)[::2],
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "transposed": frames.transpose(0, 1, 3, 2),
        "empty": np.zeros((0, 3), np.uint8),
    }
    (tmp_path / "ckpt").mkdir()
    write_snapshot(tmp_path / "ckpt", arrays)
    read = read_snapshot(tmp_path / "ckpt")
    assert read is not None and set(read) == set(arrays)
    for name, array in arrays.items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array), name
