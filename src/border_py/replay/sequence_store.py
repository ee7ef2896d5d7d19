"""Sequence storage that keeps each env step once: a ring of steps, and sequences as rows of step ids.

Windows of one episode overlap (a new one every ``period`` steps, each ``T = B + L + N`` steps
long), so storing every sequence whole stores each step's observation ``T / period`` times (2-3
times with R2D2's settings). Here a step (its observation, action and reward) is written once into
a ring under a global id (the order steps arrived in), and a sequence row holds the ring slots
of its ``T`` indices (int32; an extra slot of zeros where an index is not present: padding reads
back as zeros) beside its own columns (state, burn, targets, mask). Gathering a batch is one
indexed read per step column. A held row only points at steps the ring still holds, so a slot
names one step id: the newest one written there.

A sequence is recognised as sharing steps with an earlier one by its **key**, never by content:
``(stream, episode, start)``, int64, with ``stream`` naming one env of one actor (unique among the
live senders), ``episode`` that env's episode number and ``start`` the episode step ``s`` of the
window's first learning index. Index ``t`` of the window is episode step ``s - B + t``; a stream
remembers the ids of its newest window's steps, so the next window of the same episode reuses
those it overlaps and writes only its new steps. A stream's keys only grow: a key at or below the
stream's last one is a new stream under a reused id (an actor restarted afresh) and shares
nothing. Rows pushed without keys share nothing (each present step written anew).

Eviction: rows leave first in, first out (the oldest when ``capacity`` rows are held), and when
the step ring overwrites a step, every row that uses it leaves with every row older than it (each
step remembers the newest row that uses it): a kept row never points at an overwritten step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.replay.chunked import copy_ring
from border_py.sequences import STORED_SEQUENCE, Sequences

__all__ = ["ROW_COLUMNS", "STEP_COLUMNS", "SequenceStore"]

STEP_COLUMNS = ("obs", "action", "reward")  # stored once per env step
# stored per sequence, beside its step ids: the rest of a stored sequence but ``present`` (which the
# step ids stand for)
ROW_COLUMNS = tuple(c for c in STORED_SEQUENCE if c not in (*STEP_COLUMNS, "present"))


class SequenceStore:
    """Sequence rows over a ring of steps (see the module docstring).

    Args:
        capacity: rows (sequences) kept at most.
        steps: env steps the ring keeps at most.
    """

    def __init__(self, capacity: int, steps: int) -> None:
        self.capacity, self.ring = capacity, steps
        self.burn_in: int | None = None
        self.step_arrays: dict[str, np.ndarray] = {}  # (ring + 1, ...): the last slot, zeros, pads
        self.user = np.full(steps, -1, dtype=np.int64)  # the newest row number using each slot
        self.rows: dict[str, np.ndarray] = {}  # (capacity, ...): "at" (capacity, T) and ROW_COLUMNS
        self.written = 0  # steps written so far = the next step id
        self.floor = 0  # no step below this id is held (a restored ring starts above 0)
        self.rows_written = 0  # rows pushed so far = the next row number (row r: slot r % capacity)
        self.size = 0  # rows held: the newest ``size`` row numbers
        self.streams: dict[int, tuple[int, int, np.ndarray]] = {}  # stream -> (episode, s, ids)
        self._pruned_at = 0

    @property
    def first_live(self) -> int:
        """The oldest step id the ring still holds."""
        return max(self.written - self.ring, self.floor)

    @property
    def next(self) -> int:
        """The slot of the next row."""
        return self.rows_written % self.capacity

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated steps and rows."""
        arrays = [*self.step_arrays.values(), self.user, *self.rows.values()]
        return sum(a.nbytes for a in arrays)

    def allocate(self, batch: Sequences) -> None:
        """Allocate the ring and rows for sequences shaped as ``batch``'s."""
        n, steps = self.capacity, batch.steps
        self.step_arrays = {
            name: np.zeros(
                (self.ring + 1, *getattr(batch, name).shape[2:]), getattr(batch, name).dtype
            )
            for name in STEP_COLUMNS
        }
        index = np.int32 if self.ring < np.iinfo(np.int32).max else np.int64
        self.rows = {"at": np.full((n, steps), self.ring, dtype=index)}
        for name in ROW_COLUMNS:
            value = getattr(batch, name)
            self.rows[name] = np.zeros((n, *value.shape[1:]), value.dtype)
        self.burn_in = batch.burn_in

    def _known(self, key: np.ndarray, steps: int) -> np.ndarray:
        """``(rows, T)``: the ids of the steps of the windows ``key`` the ring holds from an
        earlier push (-1: not stored, or overwritten)."""
        known = np.full((len(key), steps), -1, dtype=np.int64)
        first: dict[int, tuple[int, int, np.ndarray] | None] = {}  # the stream's entry, if valid
        for r, (stream, episode, start) in enumerate(key.tolist()):
            if stream not in first:  # a first key at or below the stream's last: restarted
                entry = self.streams.get(stream)
                first[stream] = None if entry is None or (episode, start) <= entry[:2] else entry
            entry = first[stream]
            if entry is None or entry[0] != episode:
                continue
            shift = start - entry[1]
            if 0 < shift < steps:  # the window overlaps the stream's last one (shift steps on)
                known[r, : steps - shift] = entry[2][shift:]
        known[known < self.first_live] = -1
        return known

    def _ids(self, batch: Sequences, key: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, T)`` step ids of ``batch``'s indices (-1 where not present), new ones from
        :attr:`written` on, and the ``(row, index)`` of each new step, in id order."""
        present = batch.present
        if key is None:
            ids = np.full(present.shape, -1, dtype=np.int64)
            ids[present] = self.written + np.arange(int(present.sum()))
            return ids, np.stack(np.nonzero(present))
        ids = self._known(key, batch.steps)
        ids[~present] = -1
        r, t = np.nonzero(present & (ids < 0))
        # windows of one episode in this batch overlap too: one new id per distinct
        # (stream, episode, episode step)
        stream, episode, u = key[r, 0], key[r, 1], key[r, 2] + t
        order = np.lexsort((u, episode, stream))
        first = np.zeros(len(order), dtype=bool)  # the first of each distinct step, in order
        first[:1] = True
        for column in (stream, episode, u):
            first[1:] |= column[order][1:] != column[order][:-1]
        new = np.empty(len(order), dtype=np.int64)
        new[order] = self.written + np.cumsum(first) - 1
        ids[r, t] = new
        return ids, np.stack((r[order[first]], t[order[first]]))

    def push(self, batch: Sequences, key: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Store ``batch`` (its newest ``capacity`` rows) with its keys ``(rows, 3)`` or None.

        Returns:
            The slots of the rows written (the newest last) and the slots of the rows that left
            early because a step they use was overwritten.
        """
        if len(batch) > self.capacity:  # only the newest `capacity` sequences can survive
            cut = len(batch) - self.capacity
            batch = Sequences(
                **{k: v[cut:] for k, v in batch.arrays().items()}, burn_in=batch.burn_in
            )
            key = None if key is None else key[cut:]
        n = len(batch)
        ids, fresh = self._ids(batch, key)
        if key is not None:
            for r, (stream, episode, start) in enumerate(key.tolist()):
                self.streams[stream] = (episode, start, ids[r])
        rows = self.rows_written + np.arange(n)
        lost = self._write_steps(batch, *fresh)
        row, t = np.nonzero(ids >= 0)
        used = ids[row, t]
        # a row of this batch may use a step the writing overwrote (a ring shorter than a batch)
        if used.size and used.min() < self.first_live:
            lost = max(lost, int(rows[row[used < self.first_live]].max()))
        slots = rows % self.capacity
        at = np.full(ids.shape, self.ring, dtype=self.rows["at"].dtype)
        at[row, t] = used % self.ring
        self.rows["at"][slots] = at
        for name in ROW_COLUMNS:
            self.rows[name][slots] = getattr(batch, name)
        np.maximum.at(self.user, at[row, t], rows[row])
        self.rows_written += n
        self.size = min(self.size + n, self.capacity)
        self._prune_streams()
        return slots, self._evict(lost)

    def _write_steps(self, batch: Sequences, rows: np.ndarray, at: np.ndarray) -> int:
        """Write the steps at indices ``at`` of rows ``rows`` of ``batch`` as the next ids;
        returns the newest row number that used a step they overwrote (-1: none)."""
        m = len(rows)
        keep = slice(max(m - self.ring, 0), m)
        slots = (self.written + np.arange(m)[keep]) % self.ring
        lost = int(self.user[slots].max(initial=-1)) if self.written + m > self.ring else -1
        for name in STEP_COLUMNS:
            self.step_arrays[name][slots] = getattr(batch, name)[rows[keep], at[keep]]
        self.user[slots] = -1
        self.written += m
        return lost

    def _evict(self, lost: int) -> np.ndarray:
        """Drop the held rows numbered up to ``lost``; returns their slots."""
        oldest = self.rows_written - self.size
        gone = min(max(lost - oldest + 1, 0), self.size)
        self.size -= gone
        return (oldest + np.arange(gone)) % self.capacity

    def _prune_streams(self) -> None:
        """Forget the streams none of whose steps the ring still holds (once per lap of it)."""
        if self.written - self._pruned_at < self.ring:
            return
        self._pruned_at = self.written
        first = self.first_live
        self.streams = {s: e for s, e in self.streams.items() if e[2].max() >= first}

    def live(self, slots: np.ndarray) -> np.ndarray:
        """Which row slots hold a kept row."""
        return (np.asarray(slots) - (self.rows_written - self.size)) % self.capacity < self.size

    def gather(self, slots: np.ndarray) -> Sequences:
        """The sequences in row slots ``slots``: ``[rows, T, ...]`` columns by indexed reads."""
        assert self.burn_in is not None, "nothing was stored yet"
        at = self.rows["at"][slots]
        obs = self.step_arrays["obs"]
        # np.take on rows of flat observations: faster than fancy indexing on n-d ones
        flat = np.take(obs.reshape(len(obs), -1), at.reshape(-1), axis=0)
        columns = {name: self.rows[name][slots] for name in ROW_COLUMNS}
        return Sequences(
            obs=flat.reshape(*at.shape, *obs.shape[1:]),
            action=self.step_arrays["action"][at],
            reward=self.step_arrays["reward"][at],
            present=at != self.ring,
            **columns,
            burn_in=self.burn_in,
        )

    def state(self) -> dict[str, Any]:
        """Counters, the ring's and rows' sizes and the streams' newest windows, as plain data."""
        return {
            "written": self.written,
            "floor": self.first_live,
            "ring": self.ring,
            "rows_written": self.rows_written,
            "size": self.size,
            "capacity": self.capacity,
            "burn_in": self.burn_in,
            "streams": [[s, e[0], e[1], e[2].tolist()] for s, e in self.streams.items()],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The steps (``step_*``, with ``step_user``) and rows (``row_*``) as held: views, valid
        until the next push, of the ring's and the rows' slots up to the last one in use."""
        if not self.rows:
            return {}
        steps = min(self.written, self.ring)
        filled = min(self.rows_written, self.capacity)
        out = {f"step_{k}": v[:steps] for k, v in self.step_arrays.items()}
        out["step_user"] = self.user[:steps]
        return out | {f"row_{k}": v[:filled] for k, v in self.rows.items()}

    def step_ids(self, slots: np.ndarray) -> np.ndarray:
        """The step ids of rows ``slots`` (held ones), -1 where an index is not present."""
        return _step_ids(self.rows["at"][slots], self.ring, self.written)

    def needed(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> int:
        """The oldest step id a saved store's held rows use (its ``written`` if none)."""
        saved_rows, size = int(state["rows_written"]), int(state["size"])
        slots = (saved_rows - size + np.arange(size)) % int(state["capacity"])
        ids = _step_ids(arrays["row_at"][slots], int(state["ring"]), int(state["written"]))
        return int(ids[ids >= 0].min(initial=int(state["written"])))

    def load(self, state: dict[str, Any], arrays: dict[str, np.ndarray], first: int) -> None:
        """Restore :meth:`state` and :meth:`arrays` (this store as large or larger, its ring
        holding the saved steps from id ``first`` on), chunk by chunk."""
        self.written, self.floor = int(state["written"]), first
        self.rows_written, self.size = int(state["rows_written"]), int(state["size"])
        self.burn_in = int(state["burn_in"])
        self.streams = {
            int(s): (int(e), int(start), np.asarray(ids, np.int64))
            for s, e, start, ids in state["streams"]
        }
        self._pruned_at = self.written
        ring, capacity = int(state["ring"]), int(state["capacity"])
        for name in STEP_COLUMNS:
            saved = arrays[f"step_{name}"]
            self.step_arrays[name] = np.zeros((self.ring + 1, *saved.shape[1:]), saved.dtype)
        for name, saved in (
            *((k, arrays[f"step_{k}"]) for k in STEP_COLUMNS),
            ("user", arrays["step_user"]),
        ):
            dst = self.user if name == "user" else self.step_arrays[name]
            copy_ring(dst, saved, first, self.written, dst_slots=self.ring, src_slots=ring)
        self.rows = {}
        first_row = self.rows_written - self.size
        for name in ("at", *ROW_COLUMNS):
            saved = arrays[f"row_{name}"]
            self.rows[name] = np.zeros((self.capacity, *saved.shape[1:]), saved.dtype)
            copy_ring(
                self.rows[name],
                saved,
                first_row,
                self.rows_written,
                dst_slots=self.capacity,
                src_slots=capacity,
            )
        if ring != self.ring:  # the held rows' slots in this ring
            held = (first_row + np.arange(self.size)) % self.capacity
            ids = _step_ids(self.rows["at"][held], ring, self.written)
            index = np.int32 if self.ring < np.iinfo(np.int32).max else np.int64
            self.rows["at"] = self.rows["at"].astype(index)
            self.rows["at"][:] = self.ring
            self.rows["at"][held] = np.where(ids >= 0, ids % self.ring, self.ring)


def _step_ids(at: np.ndarray, ring: int, written: int) -> np.ndarray:
    """The step ids in slots ``at`` of a ring of ``ring`` steps after ``written`` (each slot
    holds the newest id written there), -1 for the padding slot ``ring``."""
    newest = written - 1 - (written - 1 - at.astype(np.int64)) % ring
    return np.where(at == ring, -1, newest)
