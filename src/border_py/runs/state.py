"""What a checkpoint's ``trainer.pt`` holds, typed: the run's state beside the agent's.

The file keeps its format (one flat mapping, read with ``torch.load(weights_only=True)``):
:meth:`TrainerState.to_dict` writes it and :meth:`TrainerState.from_dict` reads it, checkpoints of
earlier versions included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

SERIAL_KEY = "sampler"  # what the serial trainer's in-process actor saves (its envs and windows)


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
