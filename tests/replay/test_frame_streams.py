"""The frame store's translation of local ids when a source's stream starts again from id 0 (an
actor slot whose source id an earlier life used): its new frames translate to themselves, never
to the earlier stream's, nor to MISSING."""

from __future__ import annotations

import numpy as np

from border_py.replay.frames import FrameStore
from border_py.transitions import MISSING, FrameChunk

STACK = 3


def episode(source: int, first: int, values: range) -> FrameChunk:
    """One episode's frames from local id ``first`` on, frame i filled with ``values[i]``: the
    reset frame links to itself (reset padding), each later one to the frame before it."""
    m = len(values)
    pixels = np.stack([np.full((2, 2), v, np.uint8) for v in values])
    prev = np.arange(first - 1, first + m - 1, dtype=np.int64)
    prev[0] = first
    return FrameChunk(source, first, pixels, prev, keep_from=0)


def interleaved(store: FrameStore, source: int, other: int, chunks: int, values: int) -> None:
    """``chunks`` episodes of 5 frames each from ``source`` (pixel values from ``values`` on),
    each followed by 5 frames of ``other``: ``source``'s table gets one segment per episode."""
    for k in range(chunks):
        store.add(episode(source, 5 * k, range(values + 5 * k, values + 5 * k + 5)))
        store.add(episode(other, 5 * k, range(200, 205)))


def test_a_stream_whose_local_ids_restart_translates_to_its_own_new_frames():
    store = FrameStore(capacity=1000, stack=STACK)
    interleaved(store, source=7, other=8, chunks=4, values=1)  # the first life: values 1 to 20
    assert len(store.sources[7]) == 4
    old = store.translate(7, np.arange(20))
    # the source comes back from local id 0 (values 101 on), still between the other's chunks
    written = store.written
    interleaved(store, source=7, other=8, chunks=3, values=101)
    new = store.translate(7, np.arange(15))
    assert (new != MISSING).all()
    expected = np.concatenate([written + 10 * k + np.arange(5) for k in range(3)])
    np.testing.assert_array_equal(new, expected)
    stacks = store.stacks(new)
    assert (stacks >= 101).all(), "a new stack holds a frame of the stream's first life"
    # each new frame's stack: itself and the frames below it in its own episode (reset padded)
    for local, stack in zip(range(15), stacks, strict=True):
        start = 5 * (local // 5)
        steps = [max(local - j, start) for j in range(STACK - 1, -1, -1)]
        np.testing.assert_array_equal(stack[:, 0, 0], [101 + s for s in steps])
    # what stored transitions hold (global ids) still rebuilds the first life's stacks
    assert (store.stacks(old) <= 20).all()


def test_a_restarted_stream_survives_a_snapshot_and_its_later_chunks_continue_it():
    store = FrameStore(capacity=1000, stack=STACK)
    interleaved(store, source=7, other=8, chunks=4, values=1)
    restored = FrameStore(capacity=1000, stack=STACK)
    restored.load(store.state(), store.arrays())
    interleaved(restored, source=7, other=8, chunks=2, values=101)
    new = restored.translate(7, np.arange(10))
    assert (new != MISSING).all() and (restored.stacks(new) >= 101).all()
    assert restored.sources[7][:, 0].tolist() == [0, 5]  # the new stream's segments alone


def test_an_id_below_every_segment_of_its_source_is_missing():
    """An id below the first segment (``seg == -1``) is not read as an offset into that segment:
    49, one below the stream's first id 50 (global id 10), would name global id 9, a live frame of
    another source."""
    store = FrameStore(capacity=1000, stack=STACK)
    store.add(episode(3, 0, range(100, 110)))  # another source's frames: global ids 0 to 9
    store.add(episode(7, 50, range(1, 6)))  # a stream whose ids start at 50: global ids 10 to 14
    ids = store.translate(7, np.array([49, 50, 54, 55]))
    assert ids.tolist() == [MISSING, 10, 14, MISSING]
