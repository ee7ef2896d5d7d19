"""Sequence replay checkpoints written by main's first sequence buffer (whole rows in a ring, its
arrays named as the sequence columns, no store state) load, and sampling goes on exactly as main's
buffer went on: an exact resume of a run started before the ring of steps.

The fixtures (``tests/fixtures/sequence_replay_main/``) were written by main's code (see the
README there): a buffer of capacity 6 after 9 sequences (wrapped), sampled 3 times, its state and
arrays, and the 3 samples main drew next."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from border_py.errors import ConfigError
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.sequences import STORED_SEQUENCE

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sequence_replay_main"
KINDS = [("uniform", SequenceReplayBuffer), ("prioritized", PrioritizedSequenceReplayBuffer)]


def _saved(name: str) -> tuple[dict, dict[str, np.ndarray], list[dict]]:
    with np.load(FIXTURES / f"{name}.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    saved = json.loads((FIXTURES / f"{name}.json").read_text())
    return saved["state"], arrays, saved["samples"]


@pytest.mark.parametrize(("name", "buffer_class"), KINDS)
def test_a_checkpoint_of_mains_sequence_buffer_resumes_exactly(name, buffer_class):
    state, arrays, samples = _saved(name)
    assert "store" not in state and set(arrays) - {"priority"} == set(STORED_SEQUENCE)
    buf = buffer_class(capacity=6, seed=99)
    buf.load(state, arrays)
    assert len(buf) == 6
    for expected in samples:  # main's next draws: the same rows, slots and weights
        batch = buf.sample(16)
        assert batch.first_prev_action.tolist() == expected["id"]
        if expected["index"] is not None:
            assert batch.index.tolist() == expected["index"]
            assert batch.weight.tolist() == expected["weight"]
    # and it saves in the names main wrote, with this buffer's store state beside them
    assert set(buf.arrays()) == set(arrays) and buf.state()["store"]["layout"] == "whole"


@pytest.mark.parametrize(("name", "buffer_class"), KINDS)
def test_a_checkpoint_of_mains_sequence_buffer_fills_a_larger_one_oldest_first(name, buffer_class):
    state, arrays, _ = _saved(name)
    larger = buffer_class(capacity=10, seed=1)
    larger.load(state, arrays)
    held = larger.store.gather(larger.store.rows_written - 6 + np.arange(6)).reward[:, 0]
    assert held.tolist() == [3, 4, 5, 6, 7, 8]  # main's rows 3..8, oldest first
    sample = larger.sample(200)
    assert set(sample.first_prev_action.tolist()) == {3, 4, 5, 6, 7, 8}
    if name == "prioritized":  # the priorities moved with their rows
        by_row = dict(zip(sample.first_prev_action.tolist(), sample.weight.tolist(), strict=True))
        assert by_row[8] == min(by_row.values())  # row 8 sampled 8/3: the largest priority
    with pytest.raises(ConfigError, match=r"steps_per_sequence=2: the checkpoint's sequences are"):
        buffer_class(capacity=10, seed=1, steps_per_sequence=2).load(state, arrays)
