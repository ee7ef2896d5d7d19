"""What a checkpoint's ``trainer.pt`` holds, and what a resume restores: the one place a reader
learns both.

The run's state has an owner per part, and each owner has a ``state()``/``restore()`` pair, side
by side in its own class; :meth:`TrainerState.capture` composes the parts into what ``trainer.pt``
holds and :meth:`TrainerState.restore` hands each back to its owner (:class:`Owners`), in this
order:

- ``opt_steps``, ``env_steps``, ``samples``: the run's counters
  (:class:`~border_py.trainers.settings.RunState`);
- ``env_intervals``: when evaluations and checkpoints fall due
  (:class:`~border_py.trainers.cadence.Cadence`);
- ``gate``: when the learner may optimize (the trainer's
  :class:`~border_py.trainers.settings.Gate`);
- ``replay``: the replay buffer's position; its transitions are the checkpoint's
  ``replay_buffer/`` (without them the buffer starts empty and the gate counts its warmup again);
- ``rng``: the global RNGs, python, numpy and torch (:mod:`border_py.seeding`);
- the actors' keys: each actor slot's record (``actors``), or the serial trainer's actor with its
  envs' episodes (``sampler``, ``actor``) (:class:`~border_py.actors.runtime.Actors`);
- ``best_return``, ``eval_returns``, ``seconds``: the run's book
  (:class:`~border_py.trainers.run_book.RunBook`), taken as a checkpoint is written.

The rest of a checkpoint: ``agent.pt`` is the agent's own ``state_dict`` (networks, optimizers,
its counters and exploration RNG), loaded into the agent when the session checks that the
checkpoint fits the config (:meth:`~border_py.runs.session.RunSession.fits`); ``policy.pt`` and
``config.json`` are for acting and resuming; ``meta.json`` is derived from the state
(:meth:`TrainerState.summary`). The run dir itself is repaired by its owner, the session, before
anything is restored (:meth:`~border_py.runs.session.RunSession.repair`, once the run logs to its
``train.log``).

The file keeps its format (one flat mapping, read with ``torch.load(weights_only=True)``):
:meth:`TrainerState.to_dict` writes it and :meth:`TrainerState.from_dict` reads it, checkpoints of
earlier versions included.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np

from border_py.replay.base import ReplayBuffer
from border_py.seeding import global_rng_state, set_global_rng_state

__all__ = ["BOOK", "Owner", "Owners", "TrainerState"]

log = logging.getLogger(__name__)

SERIAL_KEY = "sampler"  # what the serial trainer's in-process actor saves (its envs and windows)
COUNTERS = ("opt_steps", "env_steps", "samples")
BOOK = ("best_return", "eval_returns", "seconds")


class Owner(Protocol):
    """An owner of a part of the run's state."""

    def state(self) -> Any:
        """Its part, as plain data."""

    def restore(self, saved: Any) -> None:
        """Continue from :meth:`state`."""


class Gate(Owner, Protocol):
    """The trainer's gate (:class:`~border_py.trainers.settings.Gate`), as a resume sees it."""

    warmup_period: int  # transitions collected before the first opt step

    def restart(self, counters: Any) -> None:
        """Count the warmup again from the counters now (a resume without the transitions)."""


@dataclass
class Owners:
    """Who holds each part of the run's state (see the module docstring)."""

    counters: Owner
    cadence: Owner
    gate: Gate
    replay: ReplayBuffer
    actors: Owner
    book: Owner


@dataclass
class TrainerState:
    """The run's state at a checkpoint.

    Attributes:
        opt_steps: optimization steps so far (all sessions).
        env_steps: env steps the actors took.
        samples: transitions received into the replay buffer.
        gate: where the gate counts from (see :class:`~border_py.trainers.settings.Gate`).
        env_intervals: the env-step interval an evaluation and a checkpoint were last done in.
        replay: the replay buffer's position (its arrays are in ``replay_buffer/``).
        rng: the global RNG states (python, numpy, torch).
        actors: what the actors saved: each actor slot's record (``actors``), or the serial
            trainer's actor (``sampler``, ``actor``).
        best_return: the best evaluation so far.
        eval_returns: every evaluation's mean return, in order.
        seconds: training seconds, all sessions.
    """

    opt_steps: int
    env_steps: int
    samples: int
    gate: dict[str, Any]
    replay: dict[str, Any]
    rng: dict[str, Any]
    actors: dict[str, Any]
    env_intervals: dict[str, int] = field(default_factory=dict)
    best_return: float = -math.inf
    eval_returns: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @classmethod
    def capture(cls, owners: Owners) -> TrainerState:
        """The run's state now, each part from its owner (the caller holds the replay buffer
        still: the prefetch thread samples from it)."""
        return cls(
            **owners.counters.state(),
            gate=owners.gate.state(),
            env_intervals=owners.cadence.state(),
            replay=owners.replay.state(),
            rng=global_rng_state(),
            actors=owners.actors.state(),
            **owners.book.state(),
        )

    def restore(self, owners: Owners, arrays: dict[str, np.ndarray] | None) -> None:
        """Hand each part back to its owner, the counters first (the others count from them),
        the RNGs before the actors start (the serial trainer's envs draw from them).

        ``arrays``: the replay buffer's transitions (None: the checkpoint has none, so the buffer
        keeps only its sampling schedule and the gate counts the warmup again).
        """
        owners.counters.restore({name: getattr(self, name) for name in COUNTERS})
        owners.cadence.restore(self.env_intervals)
        owners.gate.restore(self.gate)
        if arrays is not None:
            owners.replay.load(self.replay, arrays)
        else:
            owners.replay.continue_schedule(self.replay)
            owners.gate.restart(owners.counters)
            log.warning(
                "resuming without a replay buffer (trainer.save_replay_buffer was off): collecting"
                " %d transitions before optimizing again",
                owners.gate.warmup_period,
            )
        set_global_rng_state(self.rng)
        owners.actors.restore(self.actors)
        owners.book.restore({name: getattr(self, name) for name in BOOK})

    def summary(self) -> dict[str, Any]:
        """What a checkpoint's ``meta.json`` says of the run (for people; the resume reads this
        state, never the meta): its counters, best return and training seconds."""
        return {
            "opt_steps": self.opt_steps,
            "env_steps": self.env_steps,
            "best_return": self.best_return,
            "seconds": round(self.seconds, 3),
        }

    @property
    def serial(self) -> bool:
        """Whether the serial trainer saved it (its envs are restored one by one on resume)."""
        return SERIAL_KEY in self.actors

    def to_dict(self) -> dict[str, Any]:
        """The mapping ``trainer.pt`` holds: every field, the actors' keys at the top level."""
        saved = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "actors"}
        return saved | self.actors

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> TrainerState:
        """Read :meth:`to_dict`'s mapping (keys that came later get their defaults).

        Raises:
            KeyError: a key every checkpoint holds is missing.
        """
        own = {f.name for f in fields(cls)} - {"actors"}
        return cls(
            opt_steps=int(saved["opt_steps"]),
            env_steps=int(saved["env_steps"]),
            samples=int(saved["samples"]),
            gate=saved["gate"],
            replay=saved["replay"],
            rng=saved["rng"],
            actors={k: v for k, v in saved.items() if k not in own},
            env_intervals=dict(saved.get("env_intervals", {})),
            best_return=float(saved.get("best_return", -math.inf)),
            eval_returns=[float(r) for r in saved.get("eval_returns", [])],
            seconds=float(saved.get("seconds", 0.0)),
        )
