"""When the learning loop evaluates and saves: every ``eval_interval`` (``save_interval``) opt
steps, and once in each stretch of ``eval_env_interval`` (``save_env_interval``) env steps."""

from __future__ import annotations

from border_py.trainers.settings import LoopSettings, RunState

__all__ = ["Cadence"]


class Cadence:
    """Whether an evaluation or a checkpoint is due after an opt step.

    An env-step interval is due once per stretch of that many env steps the run enters (the
    learner's env steps jump by whole batches); which stretch each was last done in is the
    cadence's state, so that a resumed run neither repeats nor skips one.

    Args:
        settings: the trainer's intervals.
        counters: the run's counters (read, never written).
    """

    def __init__(self, settings: LoopSettings, counters: RunState) -> None:
        self.settings, self.counters = settings, counters
        self.eval_stretch = self.save_stretch = 0  # a fresh run starts in the first stretch

    def _stretch(self, interval: int | None) -> int:
        """Which ``interval``-long stretch of env steps the run is in (0 when no interval)."""
        return self.counters.env_steps // interval if interval else 0

    def evaluation_due(self) -> bool:
        """Whether an evaluation is due now (then it counts as done)."""
        settings = self.settings
        due, self.eval_stretch = self._due(
            settings.eval_interval, settings.eval_env_interval, self.eval_stretch
        )
        return due

    def save_due(self) -> bool:
        """Whether a periodic checkpoint is due now (then it counts as done)."""
        settings = self.settings
        due, self.save_stretch = self._due(
            settings.save_interval, settings.save_env_interval, self.save_stretch
        )
        return due

    def _due(self, every: int | None, env_interval: int | None, last: int) -> tuple[bool, int]:
        """Whether it is due (every ``every`` opt steps, or a stretch of ``env_interval`` env
        steps after the ``last`` one done), and the stretch it is then last done in."""
        stretch = self._stretch(env_interval)
        by_opts = bool(every and self.counters.opt_steps % every == 0)
        return (True, stretch) if by_opts or stretch > last else (False, last)

    def state(self) -> dict[str, int]:
        """The stretch each was last done in (``trainer.pt``'s ``env_intervals``)."""
        return {"eval": self.eval_stretch, "save": self.save_stretch}

    def restore(self, saved: dict[str, int]) -> None:
        """Continue from :meth:`state` (the counters restored first); a checkpoint of a version
        that did not save it continues from the stretch its env steps are in."""
        self.eval_stretch = int(saved.get("eval", self._stretch(self.settings.eval_env_interval)))
        self.save_stretch = int(saved.get("save", self._stretch(self.settings.save_env_interval)))
