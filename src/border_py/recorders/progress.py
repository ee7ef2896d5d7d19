"""The live progress view of ``border train``: how far the run is on its budget, how fast it goes
and how it is doing, one line under the scrolling log.

The bar counts what the run's budget counts, and says so: opt steps of ``trainer.max_opts`` when
it is set, else env steps of ``trainer.max_env_steps`` (every recipe, and plain ``border train``).
The line is rich's own progress columns (what is counted, the bar, the count, the percentage, the
time remaining) followed by the stats, in this order: the budget counter's rate, the actors
(alive of started, restarts), the latest and best evaluation return, the other counter's rate,
samples/s and buffer fill; actors that died or restarted come first. As many stats as the width
leaves room for are shown, each whole (at 80 columns: the budget's rate and the actors).

Rates are rich's speed estimate over the last :data:`RATE_WINDOW_SECONDS`, the same estimate the
time remaining divides by. The last frame shows each counter's rate over the session instead,
from the first refresh where it advanced to the last, as the run summary times its
``opt_steps_per_sec``; and the actors as the last refresh while training saw them (the last frame
comes after the actors were stopped). Off a terminal (CI, ``nohup``, a pipe) the same parts make
one plain log line every ``progress_interval`` seconds. ``progress=false`` turns the view off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from border_py.recorders.console import console, format_number

__all__ = ["RATE_WINDOW_SECONDS", "Budget", "ProgressView", "Steps"]

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.5  # how often the view takes the counters
RATE_WINDOW_SECONDS = 10.0  # the rates (and the time remaining) are estimated over this window
SEPARATOR = " | "
LABELS = {"opt_steps": "opt steps", "env_steps": "env steps", "samples": "samples"}


@dataclass(frozen=True)
class Steps:
    """Where a run is: its opt steps and env steps."""

    opt_steps: int
    env_steps: int


@dataclass(frozen=True)
class Budget:
    """What the bar counts: ``total`` of ``counter`` (``opt_steps`` or ``env_steps``)."""

    counter: str
    total: int

    @classmethod
    def of(cls, max_opts: int | None, max_env_steps: int | None) -> Budget:
        """The budget the bar shows: ``max_opts`` when set, else ``max_env_steps``."""
        if max_opts is not None:
            return cls("opt_steps", max_opts)
        if max_env_steps is None:
            raise ValueError("a run needs max_opts or max_env_steps")
        return cls("env_steps", max_env_steps)

    @property
    def other(self) -> str:
        """The counter the bar does not count (its rate is shown among the stats)."""
        return "env_steps" if self.counter == "opt_steps" else "opt_steps"


def rate_text(value: float) -> str:
    """A rate: ``12345 -> '12.3k'``, ``612.4 -> '612'``, ``66.7 -> '67'``, ``2.54 -> '2.54'``."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}" if abs(value) >= 10 else format_number(value)


def _bar_width() -> int:
    """Columns of the bar: an eighth of the console, within [10, 40]."""
    return max(10, min(40, console().width // 8))


class _Span:
    """When a counter first and last advanced this session, with its values then: its session
    rate is the run summary's way of timing a rate (from the first step to the last)."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.first: tuple[float, int] | None = None
        self.last: tuple[float, int] | None = None

    def take(self, now: float, value: int) -> None:
        """Note the counter's value at a refresh."""
        if value > self.value:
            self.first = self.first or (now, value)
            self.last = (now, value)
        self.value = value

    def rate(self) -> float | None:
        """Steps per second from its first advance to its last (None before two advances)."""
        if self.first is None or self.last is None or self.last[0] <= self.first[0]:
            return None
        return (self.last[1] - self.first[1]) / (self.last[0] - self.first[0])


class _Fitted:
    """The stats as rich renders them in the width the line leaves: the first ones that fit,
    each whole (a cut number would mislead)."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(0, len(SEPARATOR.join(self.parts)))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        kept: list[str] = []
        for part in self.parts:
            if len(SEPARATOR.join([*kept, part])) > options.max_width:
                break
            kept.append(part)
        yield Text(SEPARATOR.join(kept), no_wrap=True, overflow="crop")


class _StatsColumn(ProgressColumn):
    """The stats after rich's columns (the task's ``stats`` field), fitted to the width left."""

    def render(self, task: Task) -> _Fitted:
        return _Fitted(task.fields.get("stats", []))


class _Remaining(TimeRemainingColumn):
    """rich's time remaining, blank in the last frame (a run that stopped has none left)."""

    def render(self, task: Task) -> Text:
        return Text("") if task.fields.get("ended") else super().render(task)


class ProgressView:
    """Shows how a run is doing; the trainers call :meth:`update` when :meth:`due`, and
    :meth:`finish` with the final counters at the end (so that the last frame is current).

    Args:
        budget: what the bar counts, and up to what.
        start: where the run starts (a resumed run's counters).
        enabled: show anything at all (``progress``).
        interval: seconds between plain progress lines when stderr is not a terminal
            (``progress_interval``).
        capacity: replay-buffer capacity (for the fill ratio).
        n_actors: actor processes (None: the serial trainer, which has no actors or samples).
        clock: the time source (seconds, monotonic).
    """

    def __init__(
        self,
        budget: Budget,
        start: Steps,
        enabled: bool,
        interval: float,
        capacity: int,
        n_actors: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budget, self.capacity, self.n_actors = budget, capacity, n_actors
        self.enabled, self.interval, self.clock = enabled, interval, clock
        self.latest_eval: float | None = None
        self.best_eval: float | None = None
        self.buffer_size, self.restarts = 0, 0
        self.alive: int | None = None  # actors alive at the last refresh while training
        self.last_refresh = self.last_line = clock()
        self.bar = BarColumn(bar_width=_bar_width())
        self.remaining = _Remaining()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            self.bar,
            MofNCompleteColumn(),
            TaskProgressColumn(),
            self.remaining,
            _StatsColumn(),
            console=console(),
            get_time=clock,
            speed_estimate_period=RATE_WINDOW_SECONDS,
            refresh_per_second=2,
        )
        starts = {"opt_steps": start.opt_steps, "env_steps": start.env_steps, "samples": 0}
        counters = [budget.counter, budget.other] + (["samples"] if n_actors is not None else [])
        self.tasks: dict[str, TaskID] = {}
        self.spans: dict[str, _Span] = {}
        for name in counters:
            main = name == budget.counter
            self.tasks[name] = self.progress.add_task(
                LABELS[name],
                total=budget.total if main else None,
                completed=starts[name],
                visible=main,
                stats=[],
            )
            self.spans[name] = _Span(starts[name])
        self.live = enabled and console().is_terminal
        if self.live:
            self.progress.start()

    def on_eval(self, return_mean: float, best: float) -> None:
        """Note an evaluation's mean return and the best so far."""
        self.latest_eval, self.best_eval = return_mean, best

    def due(self) -> bool:
        """Whether the view wants fresh counters now (cheap: call it every opt step)."""
        return self.enabled and self.clock() - self.last_refresh >= REFRESH_SECONDS

    def update(
        self,
        steps: Steps,
        samples: int,
        buffer_size: int,
        actors_alive: int | None = None,
        restarts: int = 0,
    ) -> None:
        """Take the run's counters (when :meth:`due`)."""
        now = self.last_refresh = self.clock()
        self.alive = actors_alive
        values = self._take(steps, samples, buffer_size, restarts)
        for name, span in self.spans.items():
            span.take(now, values[name])
        self._show()
        if not self.live and now - self.last_line >= self.interval:
            self.last_line = now
            self._log_line()

    def finish(
        self,
        steps: Steps,
        samples: int,
        buffer_size: int,
        actors_alive: int | None = None,
        restarts: int = 0,
    ) -> None:
        """Show the final counters, the session's rates and no time remaining, then stop the
        view. ``actors_alive`` is not shown: the actors are stopped by now."""
        if self.enabled:
            self._take(steps, samples, buffer_size, restarts)
        self.close()

    def _take(self, steps: Steps, samples: int, buffer_size: int, restarts: int) -> dict[str, int]:
        """Note the counters every frame shows; each step counter's task moves to its value (rich
        times its rate from these moves). Returns the step counters by name."""
        self.buffer_size, self.restarts = buffer_size, restarts
        values = {"opt_steps": steps.opt_steps, "env_steps": steps.env_steps, "samples": samples}
        for name, task in self.tasks.items():
            self.progress.update(task, completed=values[name])
        return values

    def _task(self, name: str) -> Task:
        return next(task for task in self.progress.tasks if task.id == self.tasks[name])

    def _show(self, ended: bool = False) -> None:
        """Hand the stats to the bar's line (drawn by rich at its next refresh)."""
        self.bar.bar_width = _bar_width()  # the terminal may have been resized
        main = self.tasks[self.budget.counter]
        self.progress.update(main, stats=self.parts(ended), ended=ended)

    def rate(self, name: str, ended: bool = False) -> float | None:
        """Steps of counter ``name`` per second: over the rate window while the run trains,
        over the session once it ``ended``; None before it has advanced twice (0 when it has
        stood still for the whole window)."""
        span = self.spans[name]
        if ended:
            return span.rate()
        speed = self._task(name).speed
        if speed is None and span.rate() is not None:
            return 0.0
        return speed

    def parts(self, ended: bool = False) -> list[str]:
        """The stats after the bar, most important first (see the module docstring)."""
        rates = {name: self.rate(name, ended) for name in self.tasks}
        shown = {
            name: f"{rate_text(r)} {LABELS[name]}/s" for name, r in rates.items() if r is not None
        }
        head = [shown.get(self.budget.counter, "")]
        if self.n_actors is not None and self.alive is not None:
            restarted = f", {self.restarts} restarts" if self.restarts else ""
            actors = f"actors {self.alive}/{self.n_actors}{restarted}"
            trouble = self.alive != self.n_actors or self.restarts > 0
            head = [actors, *head] if trouble else [*head, actors]
        if self.latest_eval is not None:
            best = format_number(self.best_eval)
            head.append(f"eval {format_number(self.latest_eval)} (best {best})")
        tail = [shown.get(self.budget.other, ""), shown.get("samples", "")]
        tail.append(f"buffer {100 * self.buffer_size / self.capacity:.0f}%")
        return [part for part in head + tail if part]

    def _log_line(self) -> None:
        task = self._task(self.budget.counter)
        remaining = task.time_remaining
        log.info(
            "progress: %s %d/%d (%.0f%%) | %s%s",
            LABELS[self.budget.counter],
            task.completed,
            self.budget.total,
            task.percentage,
            SEPARATOR.join(self.parts()),
            "" if remaining is None else f" | ETA {self.remaining.render(task).plain}",
        )

    def close(self) -> None:
        """Stop the live view with its last counters, the session's rates and no time remaining
        (idempotent)."""
        if self.live:
            self._show(ended=True)
            self.progress.stop()
            self.live = False
