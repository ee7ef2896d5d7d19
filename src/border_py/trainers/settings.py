"""The loop settings every trainer shares (the ``trainer`` group's common keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from border_py.config import flag, non_negative, positive, require
from border_py.trainers.components import Components, build_components


@dataclass
class LoopSettings:
    """Settings every trainer shares (border's names and semantics).

    Args:
        max_opts: optimization steps of the run.
        warmup_period: transitions collected before the first optimization step.
        eval_interval: opt steps between evaluations.
        eval_episodes: episodes per evaluation.
        eval_max_steps: step cap of an evaluation episode.
        record_interval: opt steps between training scalars.
        save_interval: opt steps between periodic checkpoints (0 disables them; a final
            checkpoint is always written).
        keep_checkpoints: periodic checkpoints kept, newest first (``best`` is always kept).
        save_replay_buffer: put the replay buffer into periodic and final checkpoints.
        target_return: stop early once ``eval/return_mean`` reaches it (None: never).
    """

    max_opts: int
    warmup_period: int = 1000
    eval_interval: int = 1000
    eval_episodes: int = 10
    eval_max_steps: int = 10000
    record_interval: int = 100
    save_interval: int = 10000
    keep_checkpoints: int = 3
    save_replay_buffer: bool = False
    target_return: float | None = None

    def __post_init__(self) -> None:
        positive("max_opts", self.max_opts, int)
        non_negative("warmup_period", self.warmup_period)
        positive("eval_interval", self.eval_interval, int)
        positive("eval_episodes", self.eval_episodes, int)
        positive("eval_max_steps", self.eval_max_steps, int)
        positive("record_interval", self.record_interval, int)
        non_negative("save_interval", self.save_interval)
        positive("keep_checkpoints", self.keep_checkpoints, int)
        flag("save_replay_buffer", self.save_replay_buffer)
        target = self.target_return
        number = isinstance(target, (int, float)) and not isinstance(target, bool)
        require("target_return", target is None or number, "null or a number", target)

    def check(self, config: dict[str, Any]) -> Components:
        """Validate the config's components against these settings without training; return them."""
        return build_components(config, self.warmup_period)
