"""The Sequences data unit: its shape and the core's previous-action/reward inputs."""

from __future__ import annotations

import numpy as np
import pytest

from border_py.sequences import Sequences


def _window(burn: int, burn_in: int = 2, length: int = 3, tail: int = 2) -> Sequences:
    """One row whose burn-in has ``burn`` real steps; actions 10, 11, ... and rewards 0.5, 1.5, ...
    from the first present index; the episode goes on past the window."""
    steps = burn_in + length + tail
    first = burn_in - burn
    present = np.arange(steps) >= first
    action = np.where(present, 10 + np.arange(steps) - first, 0)[None]
    reward = np.where(present, 0.5 + np.arange(steps) - first, 0.0).astype(np.float32)[None]
    return Sequences(
        obs=np.zeros((1, steps, 4), np.float32),
        action=action.astype(np.int64),
        reward=reward,
        present=present[None],
        state=np.zeros((1, 2, 8), np.float32),
        burn=np.array([burn]),
        first_prev_action=np.array([7 if burn < burn_in and first > 0 else -1]),
        first_prev_reward=np.array([0.25], np.float32),
        ret=np.zeros((1, length), np.float32),
        discount=np.ones((1, length), np.float32),
        offset=np.ones((1, length), np.int64),
        mask=np.ones((1, length), bool),
        burn_in=burn_in,
    )


def test_the_shape_is_read_from_the_arrays_and_the_burn_in():
    seq = _window(burn=2)
    assert (seq.steps, seq.length, seq.tail, seq.burn_in, len(seq)) == (7, 3, 2, 2, 1)


def test_previous_inputs_shift_by_one_from_the_stored_first_ones():
    prev_action, prev_reward = _window(burn=2).previous()
    assert prev_action[0].tolist() == [-1, 10, 11, 12, 13, 14, 15]
    assert prev_reward[0].tolist() == [0.25, 0.5, 1.5, 2.5, 3.5, 4.5, 5.5]


def test_a_short_burn_in_leaves_the_padding_before_it_without_inputs():
    prev_action, prev_reward = _window(burn=1).previous()  # index 0 is padding
    assert prev_action[0].tolist() == [-1, 7, 10, 11, 12, 13, 14]
    assert prev_reward[0].tolist() == [0.0, 0.25, 0.5, 1.5, 2.5, 3.5, 4.5]


def test_concat_keeps_rows_in_order_and_refuses_other_shapes():
    joined = Sequences.concat([_window(burn=2), _window(burn=1)])
    assert joined.burn.tolist() == [2, 1] and joined.burn_in == 2
    with pytest.raises(ValueError, match="different shapes"):
        Sequences.concat([_window(burn=2), _window(burn=1, burn_in=1)])
