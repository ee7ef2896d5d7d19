"""A batch of transitions as the learner receives it from an actor, wherever the actor runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from border_py.sequences import Sequences
from border_py.transitions import Transitions

__all__ = ["ReceivedBatch"]


@dataclass
class ReceivedBatch:
    """Transitions from one actor, with what the actor knew when it sampled them.

    Attributes:
        actor: the actor slot that sent them.
        transitions: the batch, a recurrent agent's sequences (None when the env steps finished no transition yet, e.g. while
            n-step windows fill); its arrays may be views of shared memory that are valid only
            until the learner's ``deliver`` callback returns (it copies them into the replay
            buffer).
        env_steps: env steps taken to produce the batch.
        episode_returns: returns of the training episodes that ended meanwhile.
        episode_lengths: their lengths.
        policy_opt_steps: the learner's opt steps when the acting weights were published.
        loaded_at: ``time.time()`` when the actor loaded those weights.
        exploration: the agent's exploration scalars (e.g. ``train/epsilon``).
        waited: seconds the actor spent waiting for the learner (back-pressure) before sending.
    """

    actor: int
    transitions: Transitions | Sequences | None
    env_steps: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    policy_opt_steps: int = 0
    loaded_at: float = 0.0
    exploration: dict[str, float] = field(default_factory=dict)
    waited: float = 0.0
