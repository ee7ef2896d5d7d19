"""What travels between the learner and its worker processes: one dataclass per message kind.

Every message a worker sends is encoded by :func:`encode` into at most :data:`MAX_NOTICE` bytes
and written to its own pipe with one ``write(2)``. POSIX makes such a write to a pipe atomic (at
most ``PIPE_BUF`` bytes), so a worker killed at any moment leaves either the whole message in the
pipe or none of it: the learner never reads half a message, never waits for the rest of one, and
a message from one worker can never corrupt another's. Bulk data never travels in a message:
transitions go through shared-memory slots (:mod:`border_py.transport.channel`), weights through
shared memory (:mod:`border_py.transport.weights`).
"""

from __future__ import annotations

import pickle
import select
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "MAX_NOTICE",
    "ActorDone",
    "BatchReady",
    "EvalDone",
    "EvalRequest",
    "Message",
    "WorkerFailed",
    "decode",
    "encode",
]

HEADER = 4  # multiprocessing.Connection's length prefix
MAX_NOTICE = select.PIPE_BUF - HEADER  # so that prefix + message is one atomic pipe write
TRACEBACK_CHARS = 3000  # the tail of a traceback that fits a message


@dataclass(frozen=True, kw_only=True)
class BatchReady:
    """An actor filled a shared-memory slot with a batch of transitions.

    Attributes:
        actor: the actor slot's index; ``incarnation`` counts its restarts.
        slot: which slot of the actor's ring holds the batch.
        rows: transitions in the slot.
        frames: new frames in the slot (frame storage); ``frame_source``, ``frame_first`` and
            ``frame_keep_from`` are the :class:`~border_py.transitions.FrameChunk`'s fields.
        priorities: whether the slot carries the actor's initial priorities.
        env_steps: env steps the actor took to produce the batch.
        episodes: episodes that ended meanwhile (their returns and lengths are in the slot).
        policy_version: the weights' publication the batch was sampled with.
        policy_opt_steps: the learner's opt steps when those weights were published.
        loaded_at: ``time.time()`` when the actor loaded those weights.
        exploration: the agent's exploration scalars (e.g. ``train/epsilon``).
        waited: seconds the actor waited for a free slot before this batch (back-pressure).
    """

    actor: int
    incarnation: int
    slot: int
    rows: int
    frames: int = 0
    frame_source: int = 0
    frame_first: int = 0
    frame_keep_from: int = 0
    priorities: bool = False
    env_steps: int
    episodes: int
    policy_version: int
    policy_opt_steps: int
    loaded_at: float
    exploration: dict[str, float] = field(default_factory=dict)
    waited: float = 0.0


@dataclass(frozen=True, kw_only=True)
class WorkerFailed:
    """A worker (actor or evaluator) raised; ``error`` is its traceback (the tail, if long)."""

    actor: int
    incarnation: int
    error: str

    @property
    def exception(self) -> str:
        """The traceback's last line: the exception, e.g. ``RuntimeError: injected crash``."""
        lines = [line for line in self.error.strip().splitlines() if line.strip()]
        return lines[-1] if lines else "unknown error"


@dataclass(frozen=True, kw_only=True)
class ActorDone:
    """An actor's last message: the transitions it sent, and those it sampled but could not send
    because the stop came first."""

    actor: int
    incarnation: int
    sent: int
    dropped: int


@dataclass(frozen=True, kw_only=True)
class EvalRequest:
    """Learner to evaluator: evaluate the weights of publication ``version`` (those of
    ``opt_steps``), taken after ``env_steps`` env steps, on the reset seeds ``seeds`` (None: the
    evaluator's own, those of the run's selection evaluations)."""

    opt_steps: int
    env_steps: int
    version: int
    seeds: range | None = None


@dataclass(frozen=True, kw_only=True)
class EvalDone:
    """Evaluator to learner: the evaluation of the weights of ``opt_steps`` (its statistics, and
    the episodes' returns and lengths: the first ones only, if there are too many for one
    message)."""

    opt_steps: int
    env_steps: int
    return_mean: float
    return_std: float
    return_min: float
    return_max: float
    length_mean: float
    returns: list[float]
    seeds: range  # the episodes' reset seeds
    lengths: list[int] = field(default_factory=list)  # the episodes' steps, as many as returns


Message = BatchReady | WorkerFailed | ActorDone | EvalRequest | EvalDone


def encode(message: Message) -> bytes:
    """``message`` as at most :data:`MAX_NOTICE` bytes; a long traceback or a long list of
    episode returns is cut to fit (the end of a traceback, the first returns)."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) <= MAX_NOTICE:
        return data
    if isinstance(message, WorkerFailed) and len(message.error) > 64:
        error = message.error  # its tail, shorter each time (non-ASCII text takes more bytes)
        keep = TRACEBACK_CHARS if len(error) > TRACEBACK_CHARS + 4 else len(error) // 2
        return encode(replace(message, error="...\n" + error[-keep:]))
    if isinstance(message, EvalDone) and message.returns:
        half = len(message.returns) // 2
        return encode(
            replace(message, returns=message.returns[:half], lengths=message.lengths[:half])
        )
    raise ValueError(f"{type(message).__name__} needs {len(data)} bytes, more than {MAX_NOTICE}")


def decode(data: bytes) -> Any:
    """The message :func:`encode` wrote (only ever from this run's own worker processes)."""
    return pickle.loads(data)
