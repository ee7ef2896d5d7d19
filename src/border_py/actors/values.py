"""Ape-X initial priorities from the Q-values an actor acted on.

An actor that scores its transitions (``replay_buffer.priority_from_actors``) needs, for each
n-step transition ``(s, a, R, d, s')``, the TD error ``|R + d * max_a' Q(s', a') - Q(s, a)|`` of
its policy copy. Evaluating the network again on ``s`` and ``s'`` costs two forward passes per
transition, twice the acting itself: with the Nature CNN on a CPU, most of an Atari actor's time.
Yet the actor already evaluated ``Q(s, .)`` when it chose ``a``, and ``Q(s', .)`` when it acts on
``s'`` one step later (as Ape-X's actors do, Horgan et al. 2018). Only the final observation of a
truncated episode is never acted on: it gets a forward pass of its own. A terminated episode
bootstraps from nothing (``d = 0``).

:class:`ActedValues` keeps ``Q(s, a)`` and ``max_a Q(s, a)`` per observation, keyed by the frame id
that names each stacked observation (:class:`~border_py.actors.frames.FrameEncoder`), in a ring of
preallocated arrays; :class:`ActedValueScorer` fills it as a sampler acts and steps, and scores the
sampler's batches. The values are those of the weights the actor held when it evaluated them: a
transition whose window spans a weight update mixes two versions, as Ape-X's do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.actors.frames import FrameEncoder
from border_py.agents.base import ValueActing
from border_py.envs.vector import VectorStep
from border_py.transitions import Transitions

__all__ = ["RING", "ActedValueScorer", "ActedValues"]

RING = 1 << 18  # values kept: a batch's ids must span fewer (a few per env step, per env)


class ActedValues:
    """Per-observation ``Q(s, a_taken)`` and ``max_a Q(s, a)``, by frame id (module docstring)."""

    def __init__(self) -> None:
        self.taken = np.zeros(RING, dtype=np.float32)  # Q(s, a) of the action taken in s
        self.best = np.zeros(RING, dtype=np.float32)  # max_a Q(s, a): what s bootstraps with

    def acted(self, ids: np.ndarray, q: np.ndarray, actions: np.ndarray) -> None:
        """Observations ``ids`` were acted on with ``actions``, chosen from values ``q`` (B, A)."""
        slots = ids % RING
        rows = np.arange(len(ids))
        self.taken[slots] = q[rows, np.asarray(actions, dtype=np.int64)]
        self.best[slots] = q.max(axis=1)

    def bootstrap(self, ids: np.ndarray, values: np.ndarray) -> None:
        """What observations ``ids`` bootstrap with (final observations, the current ones)."""
        self.best[ids % RING] = values

    def priorities(
        self, obs_ids: np.ndarray, next_ids: np.ndarray, reward: np.ndarray, discount: np.ndarray
    ) -> np.ndarray:
        """``|R + d * max Q(s') - Q(s, a)|`` per transition, float32.

        Raises:
            RuntimeError: the transitions span more ids than the ring keeps.
        """
        if len(obs_ids) and max(next_ids.max(), obs_ids.max()) - obs_ids.min() >= RING:
            raise RuntimeError(
                f"actor priorities: a batch spans more than {RING} observations (lower"
                " actor_manager.n_buffer)"
            )
        target = reward + discount * self.best[next_ids % RING]
        return np.abs(target - self.taken[obs_ids % RING]).astype(np.float32)

    def state(self, first_id: int, end_id: int) -> dict[str, Any]:
        """The values of ids ``first_id`` to ``end_id - 1`` as plain data (for checkpoints)."""
        slots = np.arange(first_id, end_id) % RING
        return {
            "first": first_id,
            "taken": self.taken[slots].tolist(),
            "best": self.best[slots].tolist(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`."""
        slots = (state["first"] + np.arange(len(state["taken"]))) % RING
        self.taken[slots] = state["taken"]
        self.best[slots] = state["best"]


class ActedValueScorer:
    """A sampler's scorer of fresh transitions from the values its agent acted on.

    Args:
        agent: acts on the values it hands out.
        frames: the sampler's frame ids (what the values are keyed by).
    """

    def __init__(self, agent: ValueActing, frames: FrameEncoder) -> None:
        self.agent, self.frames = agent, frames
        self.values = ActedValues()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The exploring actions for ``obs`` (the frames' current ids); their values are kept."""
        action, q = self.agent.act_with_values(obs, explore=True)
        self.values.acted(self.frames.ids, q, action)
        return action

    def episodes_ended(self, ended: np.ndarray, next_ids: np.ndarray, step: VectorStep) -> None:
        """What the final observations of the ``ended`` envs bootstrap with: nothing after a
        termination, the policy's best value after a truncation (a forward pass of their own)."""
        best = np.zeros(len(ended), dtype=np.float32)
        cut = ~step.terminated[ended]
        if cut.any():
            best[cut] = self.agent.q_values(step.next_obs[ended[cut]]).max(axis=1)
        self.values.bootstrap(next_ids[ended], best)

    def score(self, batch: Transitions, current_obs: np.ndarray) -> None:
        """Set ``batch.priority`` (frame-id transitions); ``current_obs``: the observations the
        envs act on next, which the newest transitions bootstrap from (valued now)."""
        self.values.bootstrap(self.frames.ids, self.agent.q_values(current_obs).max(axis=1))
        batch.priority = self.values.priorities(
            batch.obs, batch.next_obs, batch.reward, batch.discount
        )

    def state(self) -> dict[str, Any]:
        """The values any pending transition still needs (those of the frames' horizon)."""
        end = self.frames.next_id
        return self.values.state(max(end - self.frames.horizon, 0), end)

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state`."""
        self.values.load_state(state)
