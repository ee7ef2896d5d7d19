"""Proportional prioritization over the rows of a ring buffer (Schaul et al. 2016), shared by the
transition buffer (:mod:`border_py.replay.prioritized`) and the sequence buffer
(:mod:`border_py.replay.sequence_prioritized`).

Row ``i`` holds priority ``p_i = (|e_i| + eps) ** alpha`` (``e_i``: its TD error, or its
sequence's mix of them) in a sum tree (sampling) and a min tree (the largest importance weight);
a zero priority marks a row never to draw. A batch of ``B`` is drawn stratified: the total
priority is cut into ``B`` equal segments and one row is drawn from each, by a batched prefix-sum
search (O(B log N), no loop over the batch). Importance-sampling weights ``w_i = (N * P(i)) **
-beta`` are divided by the largest weight any stored row can have, ``(N * min_j P(j)) ** -beta``,
so ``w_i = (p_i / p_min) ** -beta <= 1``; ``beta`` grows linearly from ``beta_start`` to 1 over
``beta_steps`` samples (one per optimization step).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from border_py.config import flag, fraction, non_negative, positive
from border_py.errors import RunError
from border_py.replay.ring import copy_rows
from border_py.replay.sum_tree import MinTree, SumTree, ancestors, last_occurrences, level_sizes

__all__ = ["Prioritization", "check_finite"]


class Prioritization:
    """The priorities of a buffer's ``capacity`` rows, their sampling and their checkpoint.

    New rows get the largest ``|e| + eps`` seen so far (1 at first, :attr:`max_priority`), raised
    to ``alpha``, or with ``from_actors`` the priorities of the errors their actors sent.

    Args:
        capacity: rows of the buffer.
        alpha: priority exponent (0: uniform).
        beta_start: importance-sampling exponent at the first sample.
        beta_steps: samples over which beta reaches 1 (0: beta is 1 throughout).
        eps: added to every ``|e|`` so that no row's priority is zero.
        from_actors: actors send initial priorities with their batches.

    Raises:
        ConfigError: a bad ``alpha``, ``beta_start``, ``beta_steps``, ``eps`` or ``from_actors``
            (named as the ``replay_buffer`` keys).
    """

    def __init__(
        self,
        capacity: int,
        alpha: float,
        beta_start: float,
        beta_steps: int,
        eps: float,
        from_actors: bool,
    ) -> None:
        non_negative("alpha", alpha, float)
        fraction("beta_start", beta_start)
        non_negative("beta_steps", beta_steps)
        positive("eps", eps)
        flag("priority_from_actors", from_actors)
        self.alpha, self.beta_start, self.beta_steps, self.eps = alpha, beta_start, beta_steps, eps
        self.from_actors = from_actors
        self.capacity = capacity
        self.sums = SumTree(capacity)
        self.mins = MinTree(capacity)
        self.max_priority = 1.0  # the largest |e| + eps seen (before the exponent)
        self.samples = 0  # samples weighed so far: the beta schedule's position

    @property
    def nbytes(self) -> int:
        """Bytes of the two trees."""
        return sum(level.nbytes for tree in (self.sums, self.mins) for level in tree.levels)

    @staticmethod
    def estimate_nbytes(capacity: int) -> int:
        """The :attr:`nbytes` of the trees over ``capacity`` rows (float64 nodes)."""
        return 2 * 8 * sum(level_sizes(capacity))

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of the next sample."""
        if self.samples >= self.beta_steps:
            return 1.0
        return self.beta_start + (1.0 - self.beta_start) * self.samples / self.beta_steps

    def leaves(self, size: int) -> np.ndarray:
        """The priorities ``p_i`` (after the exponent) of rows ``0 .. size - 1``: a view."""
        return self.sums.leaves(slice(0, size))

    def set(self, idx: np.ndarray, p: np.ndarray) -> None:
        """Rows ``idx`` get priorities ``p`` (after the exponent; 0: never drawn)."""
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            return
        node, pick = last_occurrences(idx)  # a repeated row keeps its last priority
        p = np.asarray(p, dtype=np.float64)
        p = (p if p.shape == idx.shape else np.broadcast_to(p, idx.shape))[pick]
        path = ancestors(node, len(self.sums.levels))  # the same nodes in both trees
        self.sums.set_path(path, p)
        self.mins.set_path(path, np.where(p > 0, p, np.inf))

    def of_errors(self, errors: np.ndarray, what: str | None = None) -> np.ndarray:
        """The priorities ``(|e| + eps) ** alpha`` of ``errors``; :attr:`max_priority` rises to
        their largest ``|e| + eps``.

        Raises:
            RunError: ``what`` is named (errors checked here) and one is not finite; nothing is
                changed.
        """
        raw = np.abs(np.asarray(errors, np.float64)) + self.eps
        top = float(raw.max(initial=0.0))  # NaN or inf when any error is
        if what is not None and not math.isfinite(top):
            check_finite(errors, what)
        self.max_priority = max(self.max_priority, top)
        return raw**self.alpha

    def check_pushed(self, priority: np.ndarray | None) -> None:
        """Refuse a pushed batch's actor priorities (``priority``) if one is not finite.

        Raises:
            RunError: an actor sent a non-finite priority (its copy of the agent diverged).
        """
        if self.from_actors and priority is not None:
            check_finite(priority, "priorities from an actor")

    def pushed(self, n: int, priority: np.ndarray | None) -> np.ndarray:
        """The priorities of ``n`` new rows: of the last ``n`` of their actors' ``priority``
        with ``from_actors``, else the largest seen so far."""
        if self.from_actors and priority is not None:
            return self.of_errors(np.asarray(priority, np.float64)[-n:])
        return np.full(n, self.max_priority**self.alpha)

    def updated(self, index: np.ndarray, td_error: np.ndarray) -> np.ndarray:
        """The new priorities of the sampled rows ``index`` from their ``td_error``.

        Raises:
            ValueError: ``td_error`` is not shaped as ``index``.
            RunError: a non-finite TD error (the agent diverged); no priority is changed.
        """
        td = np.asarray(td_error, dtype=np.float64).reshape(-1)
        if td.shape != np.shape(index):
            raise ValueError(f"td_error has shape {td.shape}, the sampled rows {np.shape(index)}")
        return self.of_errors(td, "TD errors")

    def _total(self) -> float:
        total = self.sums.total
        if total <= 0:
            raise RuntimeError("replay buffer: every stored transition has priority zero")
        return total

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` rows, stratified: one prefix sum drawn uniformly in each of ``n`` equal segments
        of the total priority.

        Raises:
            RuntimeError: every row has priority zero.
        """
        total = self._total()
        values = (np.arange(n) + rng.random(n)) * (total / n)
        return self.sums.find_prefix(np.minimum(values, np.nextafter(total, 0)))

    def redraw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` rows drawn independently by priority (replacements for unusable draws)."""
        total = self._total()
        return self.sums.find_prefix(np.minimum(rng.random(n) * total, np.nextafter(total, 0)))

    def weigh(self, idx: np.ndarray) -> np.ndarray:
        """The float32 importance-sampling weights of a sample's rows ``idx``; beta's schedule
        moves on by one sample."""
        weight = (self.sums.leaves(idx) / self.mins.min) ** -self.beta
        self.samples += 1
        return weight.astype(np.float32)

    def state(self) -> dict[str, Any]:
        """Beta's position and the largest priority seen (plain data)."""
        return {"samples": self.samples, "max_priority": self.max_priority}

    def continue_schedule(self, state: dict) -> None:
        """Continue a checkpoint's beta position and largest priority (its :meth:`state`)."""
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])

    def load(self, state: dict, priority: np.ndarray) -> None:
        """Restore a checkpoint's priorities (its buffer's ``size`` rows, ``next`` its ring's next
        row: placed as the buffer places its rows, see
        :meth:`~border_py.replay.uniform.UniformReplayBuffer.load`) and its :meth:`state`."""
        leaves = np.zeros(self.capacity)
        copy_rows(leaves, priority, int(state["size"]), int(state["next"]), self.capacity)
        self.restore(leaves, state)

    def restore(self, leaves: np.ndarray, state: dict) -> None:
        """Restore the ``capacity`` rows' priorities ``leaves`` (after the exponent; 0: never
        drawn), placed by the buffer, and a checkpoint's :meth:`state`."""
        self.sums.rebuild(leaves)
        self.mins.rebuild(np.where(leaves > 0, leaves, np.inf))
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])


def check_finite(values: np.ndarray, what: str) -> None:
    """Refuse NaN or infinite ``values``: one would make every priority sum NaN or infinite.

    Raises:
        RunError: naming how many of ``what`` are not finite.
    """
    bad = np.size(values) - int(np.count_nonzero(np.isfinite(values)))
    if bad:
        raise RunError(
            f"{bad} non-finite {what}: the agent's values diverged (try a lower agent.lr or"
            " agent.max_grad_norm)"
        )
