"""Experience replay over preallocated numpy arrays (a ring buffer, FIFO eviction).

:class:`UniformReplayBuffer` samples uniformly; :class:`PrioritizedReplayBuffer` (Schaul et al.
2016, proportional variant) samples row ``i`` with probability ``p_i**alpha / sum_j p_j**alpha``
from a sum tree over the same rows. Both can store stacked pixel observations frame by frame
(``frame_stack``, see :mod:`border_py.frames`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import ConfigError, flag, fraction, non_negative, positive, require
from border_py.frames import FrameStore
from border_py.sum_tree import MinTree, SumTree
from border_py.transitions import STORED, Transitions

MAX_REDRAWS = 100  # rounds of redrawing rows whose frames are gone before giving up


class UniformReplayBuffer:
    """A fixed-capacity ring buffer of transitions, sampled uniformly with replacement.

    Storage is allocated on the first push, from the shapes and dtypes of that batch.

    Args:
        capacity: maximum number of transitions kept; the oldest are overwritten.
        seed: seed of the sampling generator.
        frame_stack: null: store observations as they are; ``k``: observations are stacks of
            ``k`` uint8 frames (gymnasium's ``FrameStackObservation``), stored one frame per env
            step in a ring of ``capacity + capacity // 32 + 1`` frames and rebuilt when sampled.
            A transition whose frames that ring has overwritten is never sampled; the margin
            covers the extra reset frames of episodes of 32 steps or more, so with shorter
            episodes (or frames still in flight from many envs) a few of the oldest
            transitions become unsampleable before they are evicted.
    """

    def __init__(self, capacity: int, seed: int | None, frame_stack: int | None = None) -> None:
        positive("capacity", capacity, int)
        if seed is not None:
            non_negative("seed", seed)
        require(
            "frame_stack",
            frame_stack is None or (isinstance(frame_stack, int) and frame_stack >= 1),
            "null or a positive int",
            frame_stack,
        )
        self.capacity = capacity
        self.frame_stack = frame_stack
        self.rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] = {}
        self._next = 0
        self._size = 0
        self._frames = (
            FrameStore(capacity + capacity // 32 + 1, frame_stack) if frame_stack else None
        )

    def __len__(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated storage (rows, frames, priority trees)."""
        arrays = [*self._storage.values()]
        if self._frames is not None and self._frames.pixels is not None:
            arrays += [self._frames.pixels, self._frames.prev]
        return sum(a.nbytes for a in arrays) + self._extra_nbytes()

    def _extra_nbytes(self) -> int:
        return 0

    def check_run(self, agent: Any, observation_space: gym.Space) -> None:
        """Fail with one :class:`ConfigError` line if this buffer cannot serve ``agent`` on
        ``observation_space`` (called before anything starts)."""
        if self.frame_stack is None:
            return
        shape = observation_space.shape or ()
        ok = (
            observation_space.dtype == np.uint8 and len(shape) == 3 and shape[0] == self.frame_stack
        )
        require(
            "replay_buffer.frame_stack",
            ok,
            f"null for observations {observation_space} (frame storage needs uint8 stacks of"
            f" shape ({self.frame_stack}, H, W))",
            self.frame_stack,
        )

    def push(self, batch: Transitions) -> None:
        """Append a batch, overwriting the oldest transitions when full."""
        arrays = self._columns(batch)
        if not self._storage:
            self._storage = {
                k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in arrays.items()
            }
        n = len(batch)
        if n > self.capacity:  # only the newest `capacity` transitions can survive
            arrays = {k: v[-self.capacity :] for k, v in arrays.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for key, value in arrays.items():
            self._storage[key][idx] = value
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        self._on_push(idx, batch, n)

    def _columns(self, batch: Transitions) -> dict[str, np.ndarray]:
        """The columns to store for ``batch`` (frame references translated to global ids)."""
        frames = self._frames
        if (frames is None) != (batch.frames is None):
            raise ValueError(
                f"replay_buffer.frame_stack={self.frame_stack}: got a batch "
                f"{'without' if frames is not None else 'with'} frame references"
            )
        if frames is None:
            return batch.arrays()
        frames.add(batch.frames)
        obs = frames.translate(batch.frames.source, batch.obs)
        next_obs = frames.translate(batch.frames.source, batch.next_obs)
        # the older of the two stacks' oldest frames (MISSING, below every id, wins)
        oldest = np.minimum(frames.oldest(obs), frames.oldest(next_obs))
        return batch.arrays() | {"obs": obs, "next_obs": next_obs, "oldest": oldest}

    def _on_push(self, idx: np.ndarray, batch: Transitions, n: int) -> None:
        """Hook: rows ``idx`` now hold the last ``n`` transitions of ``batch``."""

    def _live(self, idx: np.ndarray) -> np.ndarray:
        """Which rows ``idx`` can be sampled."""
        return self._frames_held(idx)

    def _frames_held(self, idx: np.ndarray) -> np.ndarray:
        """Which rows ``idx`` still have every frame of their stacks (all, without frame storage)."""
        if self._frames is None:
            return np.ones(len(idx), dtype=bool)
        return self._frames.live(self._storage["oldest"][idx])

    def _draw(self, n: int) -> np.ndarray:
        return self.rng.integers(0, self._size, size=n)

    def _redraw(self, n: int) -> np.ndarray:
        return self._draw(n)

    def _forget(self, idx: np.ndarray) -> None:
        """Hook: rows ``idx`` turned out unusable (their frames are gone)."""

    def _draw_usable(self, n: int) -> np.ndarray:
        """``n`` rows from :meth:`_draw`, unusable ones replaced by fresh :meth:`_redraw` draws."""
        if self._size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = self._draw(n)
        for _ in range(MAX_REDRAWS):
            bad = ~self._live(idx)
            if not bad.any():
                return idx
            self._forget(idx[bad])
            idx[bad] = self._redraw(int(bad.sum()))
        raise RuntimeError(
            "replay buffer: no transition has all its frames left (episodes far shorter than 32"
            " steps fill the frame ring faster than the transition ring)"
        )

    def _gather(self, idx: np.ndarray) -> Transitions:
        """The transitions in rows ``idx`` (stacks rebuilt from frames with frame storage)."""
        columns = {k: self._storage[k][idx] for k in STORED}
        if self._frames is not None:
            columns["obs"] = self._frames.stacks(columns["obs"])
            columns["next_obs"] = self._frames.stacks(columns["next_obs"])
        return Transitions(**columns)

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn uniformly with replacement."""
        return self._gather(self._draw_usable(batch_size))

    def state(self) -> dict[str, Any]:
        """Position, size and sampling-RNG state (plain data)."""
        state: dict[str, Any] = {
            "next": self._next,
            "size": self._size,
            "rng": self.rng.bit_generator.state,
        }
        if self._frames is not None:
            state["frames"] = self._frames.state()
        return state

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored transitions (only the filled rows), for a compact snapshot."""
        arrays = {k: v[: self._size] for k, v in self._storage.items()}
        if self._frames is not None:
            arrays |= self._frames.arrays()
        return arrays

    def continue_schedule(self, state: dict) -> None:
        """Continue the sampling of a checkpoint whose transitions were not saved: its RNG (and,
        prioritized, beta's position and the largest priority seen)."""
        self.rng.bit_generator.state = state["rng"]

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays`.

        With the same capacity the rows keep their places (an exact resume); with a larger one
        they are put in time order, oldest first, and new transitions follow them.
        """
        size, next_row = int(state["size"]), int(state["next"])
        if size > self.capacity:
            raise ConfigError(
                f"replay_buffer.capacity={self.capacity}: must be >= {size}, the transitions the"
                " checkpoint's replay buffer holds"
            )
        if ("frames" in state) != (self._frames is not None):
            raise ConfigError(
                f"replay_buffer.frame_stack={self.frame_stack}: cannot change on resume"
            )
        rows = {k: v for k, v in arrays.items() if not k.startswith("frame_")}
        if self._frames is not None:
            self._frames.load(state["frames"], arrays)
        if size != self.capacity and next_row != size:  # a wrapped ring: unroll it, oldest first
            rows = {k: np.roll(v, -next_row, axis=0) for k, v in rows.items()}
            next_row = size
        self._storage = {
            k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in rows.items()
        }
        for key, value in rows.items():
            self._storage[key][:size] = value
        self._size, self._next = size, next_row % self.capacity
        self.rng.bit_generator.state = state["rng"]


class PrioritizedReplayBuffer(UniformReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over the uniform buffer's rows.

    Row ``i`` holds priority ``p_i = (|delta_i| + eps) ** alpha`` in a sum tree (sampling) and a
    min tree (the largest importance weight). A batch of ``B`` is drawn stratified: the total
    priority is cut into ``B`` equal segments and one row is drawn from each, by a batched
    prefix-sum search (O(B log N), no loop over the batch). Importance-sampling weights
    ``w_i = (N * P(i)) ** -beta`` are divided by the largest weight any stored row can have,
    ``(N * min_j P(j)) ** -beta`` (the min tree's, as in Schaul et al.), so ``w_i = (p_i / p_min)
    ** -beta <= 1``. ``beta`` grows linearly from ``beta_start`` to 1 over ``beta_steps`` calls
    of :meth:`sample` (one per optimization step).

    New rows get the largest priority seen so far (1 at first), or, with ``priority_from_actors``,
    the TD errors the actors computed for them (Ape-X). The learner replaces the priorities of
    the rows it sampled with their new TD errors (:meth:`update_priorities`).

    Args:
        capacity: maximum number of transitions kept; the oldest are overwritten.
        seed: seed of the sampling generator.
        alpha: priority exponent (0: uniform).
        beta_start: importance-sampling exponent at the first sample.
        beta_steps: samples (opt steps) over which beta reaches 1 (0: beta is 1 throughout).
        eps: added to every |TD error| so that no row's priority is zero.
        priority_from_actors: actors compute the initial priorities of the transitions they send
            with their copy of the policy (the agent must implement ``td_error``).
        frame_stack: see :class:`UniformReplayBuffer`.
    """

    def __init__(
        self,
        capacity: int,
        seed: int | None,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_steps: int = 100000,
        eps: float = 1e-6,
        priority_from_actors: bool = False,
        frame_stack: int | None = None,
    ) -> None:
        super().__init__(capacity, seed, frame_stack)
        non_negative("alpha", alpha, float)
        fraction("beta_start", beta_start)
        non_negative("beta_steps", beta_steps)
        positive("eps", eps)
        flag("priority_from_actors", priority_from_actors)
        self.alpha, self.beta_start, self.beta_steps, self.eps = alpha, beta_start, beta_steps, eps
        self.priority_from_actors = priority_from_actors
        self._sum = SumTree(capacity)
        self._min = MinTree(capacity)
        self.max_priority = 1.0  # the largest |TD error| + eps seen (before the exponent)
        self.samples = 0  # calls of sample() so far: the beta schedule's position

    def _extra_nbytes(self) -> int:
        return sum(level.nbytes for tree in (self._sum, self._min) for level in tree.levels)

    def check_run(self, agent: Any, observation_space: gym.Space) -> None:
        """Also require an agent that reports TD errors (and computes them on actors if asked)."""
        super().check_run(agent, observation_space)
        name = type(agent).__name__
        if not getattr(agent, "reports_td_error", False):
            raise ConfigError(
                f"replay_buffer=prioritized: the agent {name} does not report TD errors"
                " (reports_td_error); use replay_buffer=uniform"
            )
        if self.priority_from_actors and not callable(getattr(agent, "td_error", None)):
            raise ConfigError(
                f"replay_buffer.priority_from_actors=true: the agent {name} has no td_error(batch)"
            )

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of the next sample."""
        if self.samples >= self.beta_steps:
            return 1.0
        return self.beta_start + (1.0 - self.beta_start) * self.samples / self.beta_steps

    def priorities(self) -> np.ndarray:
        """The stored rows' priorities ``p_i`` (after the exponent)."""
        return self._sum.leaves(slice(0, self._size)).copy()

    def _set(self, idx: np.ndarray, p: np.ndarray) -> None:
        self._sum.set(idx, p)
        self._min.set(idx, np.where(p > 0, p, np.inf))

    def _on_push(self, idx: np.ndarray, batch: Transitions, n: int) -> None:
        if self.priority_from_actors and batch.priority is not None:
            raw = np.abs(np.asarray(batch.priority, np.float64)[-n:]) + self.eps
            self.max_priority = max(self.max_priority, float(raw.max(initial=0.0)))
            p = raw**self.alpha
        else:
            p = np.full(n, self.max_priority**self.alpha)
        self._set(idx, np.where(self._frames_held(idx), p, 0.0))  # replaces the old rows' ones

    def _total(self) -> float:
        total = self._sum.total
        if total <= 0:
            raise RuntimeError("replay buffer: every stored transition has priority zero")
        return total

    def _draw(self, n: int) -> np.ndarray:
        """Stratified: one prefix sum drawn uniformly in each of ``n`` equal segments of the total."""
        total = self._total()
        values = (np.arange(n) + self.rng.random(n)) * (total / n)
        return self._sum.find_prefix(np.minimum(values, np.nextafter(total, 0)))

    def _redraw(self, n: int) -> np.ndarray:
        total = self._total()
        return self._sum.find_prefix(np.minimum(self.rng.random(n) * total, np.nextafter(total, 0)))

    def _live(self, idx: np.ndarray) -> np.ndarray:
        # A zero leaf (a forgotten row, or padding past the filled rows) comes out of a prefix
        # search only by float rounding: never use it.
        live = self._sum.leaves(idx) > 0
        live[live] = super()._live(idx[live])
        return live

    def _forget(self, idx: np.ndarray) -> None:
        self._set(idx, np.zeros(len(idx)))

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn by priority, with ``weight`` and ``index`` set."""
        beta = self.beta
        idx = self._draw_usable(batch_size)
        weight = (self._sum.leaves(idx) / self._min.min) ** -beta
        batch = self._gather(idx)
        batch.weight = weight.astype(np.float32)
        batch.index = idx
        self.samples += 1
        return batch

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Set the priorities of rows ``index`` to ``(|td_error| + eps) ** alpha``."""
        td = np.asarray(td_error, dtype=np.float64).reshape(-1)
        if td.shape != np.shape(index):
            raise ValueError(f"td_error has shape {td.shape}, the sampled rows {np.shape(index)}")
        if not np.isfinite(td).all():
            raise RuntimeError("non-finite TD errors: the agent's values diverged")
        raw = np.abs(td) + self.eps
        self.max_priority = max(self.max_priority, float(raw.max(initial=0.0)))
        self._set(index, np.where(self._frames_held(np.asarray(index)), raw**self.alpha, 0.0))

    def state(self) -> dict[str, Any]:
        """The uniform buffer's state plus the beta position and the largest priority."""
        return super().state() | {"samples": self.samples, "max_priority": self.max_priority}

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows plus their priorities (``priority``)."""
        return super().arrays() | {"priority": self.priorities()}

    def continue_schedule(self, state: dict) -> None:
        """Also continue beta's annealing and the largest priority seen."""
        super().continue_schedule(state)
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (priorities move with their rows)."""
        arrays = dict(arrays)
        priority = arrays.pop("priority", None)
        if priority is None:
            raise ConfigError(
                "replay_buffer=prioritized: the checkpoint's replay buffer has no priorities"
                " (it was saved by a uniform buffer)"
            )
        size, next_row = int(state["size"]), int(state["next"])
        super().load(state, arrays)
        if size != self.capacity and next_row != size:
            priority = np.roll(priority, -next_row)
        leaves = np.zeros(self.capacity)
        leaves[:size] = priority
        self._sum.rebuild(leaves)
        self._min.rebuild(np.where(leaves > 0, leaves, np.inf))
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])
