"""The training scalars the learning loop records every ``record_interval`` opt steps: what
happened since the last record (:class:`Window`), as CleanRL-style namespaced metrics
(``actor/``, ``perf/``, ``buffer/``) next to the update's own."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from border_py.actors.runtime import Actors
from border_py.trainers.settings import RunState
from border_py.transport.batch import ReceivedBatch

__all__ = ["Window", "training_scalars"]


@dataclass
class Window:
    """What happened since the last record."""

    env_steps: int = 0
    samples: int = 0
    opts: int = 0
    lag_sum: float = 0.0
    waited: float = 0.0
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    exploration: dict[str, list[float]] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)

    def take(self, batch: ReceivedBatch, opt_steps: int) -> None:
        """Count a batch received while the learner was at ``opt_steps``."""
        if batch.transitions is not None and len(batch.transitions):
            n = len(batch.transitions)
            self.samples += n
            self.lag_sum += n * (opt_steps - batch.policy_opt_steps)
        self.env_steps += batch.env_steps
        self.waited += batch.waited
        self.returns += batch.episode_returns
        self.lengths += batch.episode_lengths
        for key, value in batch.exploration.items():
            self.exploration.setdefault(key, []).append(value)


def training_scalars(
    update: dict[str, Any],
    window: Window,
    state: RunState,
    actors: Actors,
    batch_size: int,
    buffered: int,
    now: float,
) -> dict[str, Any]:
    """The scalars of a record at ``now`` (:func:`time.perf_counter`): the last update's metrics,
    the window's exploration stats and episodes, the run's rates over the window, the actors'
    health and the replay buffer's fill (``buffered`` transitions)."""
    w = window
    seconds = max(now - w.start, 1e-9)
    scalars = dict(update) | {k: float(np.mean(v)) for k, v in w.exploration.items()}
    if w.returns:
        scalars |= {
            "actor/episode_return": float(np.mean(w.returns)),
            "actor/episode_length": float(np.mean(w.lengths)),
        }
    scalars |= {
        "perf/env_steps": state.env_steps,
        "perf/env_steps_per_sec": w.env_steps / seconds,
        "perf/samples_total": state.samples,
        "perf/samples_per_sec": w.samples / seconds,
        "perf/opt_steps_per_sec": w.opts / seconds,
        "perf/samples_per_opt_step": w.samples / max(w.opts, 1),
        "perf/replay_ratio": w.opts * batch_size / max(w.env_steps, 1),
        "actor/alive": actors.alive(),
        "actor/restarts": actors.restarts(),
        "actor/backpressure": w.waited / (seconds * max(len(actors.records), 1)),
        "buffer/size": buffered,
    }
    if w.samples:
        scalars["perf/policy_lag"] = w.lag_sum / w.samples
    return scalars
