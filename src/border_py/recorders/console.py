"""The terminal during ``border train``: rich logging and the live progress view of a run.

On a terminal the view is a rich progress bar (opt steps of ``trainer.max_opts`` with an ETA, rates,
evaluation returns, buffer fill, actors) under the scrolling log; log records and the bar share one
rich console so they never garble each other. Elsewhere (CI, ``nohup``, a pipe) it falls back to a
plain log line every ``progress_interval`` seconds. ``progress=false`` turns it off.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.5  # how often the view reads the counters
RATE_WINDOW = 10  # refreshes the rates are averaged over
_console: Console | None = None


PLAIN_FORMAT = "[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"


def console() -> Console:
    """The process's rich console on stderr, shared by the log handler and the progress view."""
    global _console
    if _console is None:
        _console = Console(stderr=True)
    return _console


def log_handler() -> logging.Handler:
    """The console log handler of ``border train`` (Hydra's ``job_logging`` builds it): rich on a
    terminal, plain timestamped lines on stderr elsewhere (CI logs, ``nohup``, pipes)."""
    if not console().is_terminal:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(PLAIN_FORMAT))
        return handler
    return RichHandler(
        console=console(),
        show_path=False,
        markup=False,
        rich_tracebacks=False,
        log_time_format="[%X]",
    )


def _si(value: float) -> str:
    """``12345 -> '12.3k'``."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}"


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressView:
    """Shows how a run is doing; the trainers call :meth:`update` as often as they like.

    Args:
        max_opts: the run's opt-step budget.
        start_opts: opt steps already done (a resumed run).
        enabled: show anything at all (``progress``).
        interval: seconds between plain progress lines when stderr is not a terminal
            (``progress_interval``).
        capacity: replay-buffer capacity (for the fill ratio).
        n_actors: actor processes (None: the serial trainer).
    """

    def __init__(
        self,
        max_opts: int,
        start_opts: int,
        enabled: bool,
        interval: float,
        capacity: int,
        n_actors: int | None = None,
    ) -> None:
        self.max_opts, self.capacity, self.n_actors = max_opts, capacity, n_actors
        self.enabled, self.interval = enabled, interval
        self.latest_eval: float | None = None
        self.best_eval: float | None = None
        self.history: deque[tuple[float, int, int]] = deque(maxlen=RATE_WINDOW)
        self.last_refresh = self.last_line = time.monotonic()
        self.live: Progress | None = None
        if enabled and console().is_terminal:
            self.live = Progress(
                TextColumn("[bold]opt steps"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[stats]}"),
                console=console(),
                refresh_per_second=2,
            )
            self.task = self.live.add_task("train", total=max_opts, completed=start_opts, stats="")
            self.live.start()

    def on_eval(self, return_mean: float, best: float) -> None:
        """Note an evaluation's mean return and the best so far."""
        self.latest_eval, self.best_eval = return_mean, best

    def due(self) -> bool:
        """Whether the view wants fresh counters now (cheap: call it every opt step)."""
        return self.enabled and time.monotonic() - self.last_refresh >= REFRESH_SECONDS

    def update(
        self,
        opt_steps: int,
        samples: int,
        buffer_size: int,
        actors_alive: int | None = None,
        restarts: int = 0,
    ) -> None:
        """Take the run's counters (when :meth:`due`)."""
        now = self.last_refresh = time.monotonic()
        self.history.append((now, opt_steps, samples))
        stats = self.stats(buffer_size, actors_alive, restarts)
        if self.live is not None:
            self.live.update(self.task, completed=opt_steps, stats=stats)
        elif now - self.last_line >= self.interval:
            self.last_line = now
            done = opt_steps / self.max_opts
            log.info(
                "progress: opt %d/%d (%.0f%%) | %s | ETA %s",
                opt_steps,
                self.max_opts,
                100 * done,
                stats,
                _clock(self.eta(opt_steps)),
            )

    def rates(self) -> tuple[float, float]:
        """(opt steps/s, samples/s) over the last few refreshes."""
        if len(self.history) < 2:
            return 0.0, 0.0
        (t0, o0, s0), (t1, o1, s1) = self.history[0], self.history[-1]
        seconds = max(t1 - t0, 1e-9)
        return (o1 - o0) / seconds, (s1 - s0) / seconds

    def eta(self, opt_steps: int) -> float:
        """Seconds to ``max_opts`` at the current opt-step rate (inf while unknown)."""
        opt_rate, _ = self.rates()
        return (self.max_opts - opt_steps) / opt_rate if opt_rate > 0 else math.inf

    def stats(self, buffer_size: int, actors_alive: int | None, restarts: int) -> str:
        """The one-line summary next to the bar."""
        opt_rate, sample_rate = self.rates()
        parts = [f"{_si(sample_rate)} samples/s", f"{opt_rate:.0f} opt/s"]
        if self.latest_eval is not None:
            parts.append(f"eval {self.latest_eval:.1f} (best {self.best_eval:.1f})")
        parts.append(f"buffer {100 * buffer_size / self.capacity:.0f}%")
        if self.n_actors is not None:
            parts.append(f"actors {actors_alive}/{self.n_actors}, {restarts} restarts")
        return " | ".join(parts)

    def close(self) -> None:
        """Stop the live view (idempotent)."""
        if self.live is not None:
            self.live.stop()
            self.live = None
