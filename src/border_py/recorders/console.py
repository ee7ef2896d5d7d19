"""The terminal during ``border train``: rich logging, the live progress view and the run summary.

On a terminal the view is one rich progress line under the scrolling log: opt steps of
``trainer.max_opts`` as a bar, a count and a percentage, the ETA once the opt-step rate is known,
then rates, evaluation returns, buffer fill and actors, as many as the terminal's width leaves room
for (the minor ones drop first: at 80 columns the bar, the count and the ETA always stay). Log
records and the bar share one rich console so they never garble each other. Elsewhere (CI,
``nohup``, a pipe) it falls back to a plain log line every ``progress_interval`` seconds.
``progress=false`` turns it off. At the end, :func:`summary_table` renders the run's summary.

Numbers meant for people go through :func:`format_number` (significant digits, so that a return
of 0.952 does not print as 1.0 and one of 12345.6 does not print as 1.23e+04).
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
)

from border_py.secrets import RedactingFormatter

log = logging.getLogger(__name__)

REFRESH_SECONDS = 0.5  # how often the view reads the counters
RATE_WINDOW = 10  # refreshes the rates are averaged over
ETA_AFTER_SECONDS = (
    2.0  # seconds of optimizing before the opt-step rate (and so the ETA) is trusted
)
SEPARATOR = " | "
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
        handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))  # lines kept in job logs
        return handler
    return RichHandler(
        console=console(),
        show_path=False,
        markup=False,
        rich_tracebacks=False,
        log_time_format="[%X]",
    )


def format_number(value: float | None, digits: int = 3) -> str:
    """``value`` for people: ``digits`` significant digits, whole numbers in full, no exponent
    for everyday scales.

    ``0.95213 -> '0.952'``, ``1.0 -> '1'``, ``-20.47 -> '-20.5'``, ``475.2 -> '475'``,
    ``999.7 -> '1000'``, ``12345.6 -> '12346'``, ``0.000123 -> '0.000123'``, ``None -> '-'``.
    """
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    big = abs(value) >= 10 ** (digits - 1)  # then as many digits as the integer part has
    text = f"{value:.0f}" if big else f"{value:.{digits}g}"
    return "0" if text == "-0" else text


def _rate(value: float) -> str:
    """A rate: ``12345 -> '12.3k'``, ``612.4 -> '612'``, ``66.7 -> '67'``, ``2.54 -> '2.54'``."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{unit}"
    return f"{value:.0f}" if abs(value) >= 10 else format_number(value)


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _bar_width() -> int:
    """Columns of the progress bar: a fifth of the console, within [10, 40]."""
    return max(10, min(40, console().width // 5))


def _fit(parts: list[tuple[int, str]], budget: int) -> str:
    """The ``(priority, text)`` parts that fit in ``budget`` characters, most important (lowest
    priority number) first, shown in their given order; the first that does not fit and every
    less important one are left out."""
    kept: set[int] = set()
    used = 0
    for index in sorted(range(len(parts)), key=lambda i: parts[i][0]):
        width = len(parts[index][1]) + (len(SEPARATOR) if kept else 0)
        if used + width > budget:
            break
        kept.add(index)
        used += width
    return SEPARATOR.join(text for i, (_, text) in enumerate(parts) if i in kept)


class ProgressView:
    """Shows how a run is doing; the trainers call :meth:`update` when :meth:`due`, and
    :meth:`finish` with the final counters at the end (so that the last frame is current).

    Args:
        max_opts: the run's opt-step budget.
        start_opts: opt steps already done (a resumed run).
        enabled: show anything at all (``progress``).
        interval: seconds between plain progress lines when stderr is not a terminal
            (``progress_interval``).
        capacity: replay-buffer capacity (for the fill ratio).
        n_actors: actor processes (None: the serial trainer).
        clock: the time source (seconds, monotonic).
    """

    def __init__(
        self,
        max_opts: int,
        start_opts: int,
        enabled: bool,
        interval: float,
        capacity: int,
        n_actors: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_opts, self.start_opts = max_opts, start_opts
        self.capacity, self.n_actors = capacity, n_actors
        self.enabled, self.interval, self.clock = enabled, interval, clock
        self.latest_eval: float | None = None
        self.best_eval: float | None = None
        self.history: deque[tuple[float, int, int]] = deque(maxlen=RATE_WINDOW)
        self.optimizing_since: float | None = None  # first refresh with opt steps beyond start
        self.last_refresh = self.last_line = clock()
        self.counters: tuple[int, int | None, int] = (0, None, 0)  # buffer, actors alive, restarts
        self.live: Progress | None = None
        if enabled and console().is_terminal:
            self.bar = BarColumn(bar_width=_bar_width())
            self.live = Progress(
                TextColumn("[bold]opt"),
                self.bar,
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[tail]}"),
                console=console(),
                refresh_per_second=2,
            )
            self.task = self.live.add_task("train", total=max_opts, completed=start_opts, tail="")
            self.live.start()

    def on_eval(self, return_mean: float, best: float) -> None:
        """Note an evaluation's mean return and the best so far."""
        self.latest_eval, self.best_eval = return_mean, best

    def due(self) -> bool:
        """Whether the view wants fresh counters now (cheap: call it every opt step)."""
        return self.enabled and self.clock() - self.last_refresh >= REFRESH_SECONDS

    def update(
        self,
        opt_steps: int,
        samples: int,
        buffer_size: int,
        actors_alive: int | None = None,
        restarts: int = 0,
    ) -> None:
        """Take the run's counters (when :meth:`due`)."""
        now = self.last_refresh = self.clock()
        self.history.append((now, opt_steps, samples))
        self.counters = (buffer_size, actors_alive, restarts)
        if self.optimizing_since is None and opt_steps > self.start_opts:
            self.optimizing_since = now
        if self.live is not None:
            self.live.update(self.task, completed=opt_steps, tail=self.tail(opt_steps))
        elif now - self.last_line >= self.interval:
            self.last_line = now
            self._log_line(opt_steps)

    def finish(
        self,
        opt_steps: int,
        samples: int,
        buffer_size: int,
        actors_alive: int | None = None,
        restarts: int = 0,
    ) -> None:
        """Show the final counters (no ETA), then stop the view."""
        if self.enabled:
            self.history.append((self.clock(), opt_steps, samples))
            self.counters = (buffer_size, actors_alive, restarts)
            if self.live is not None:
                self.live.update(self.task, completed=opt_steps)
        self.close()

    def _log_line(self, opt_steps: int) -> None:
        eta = self.eta(opt_steps)
        log.info(
            "progress: opt %d/%d (%.0f%%) | %s%s",
            opt_steps,
            self.max_opts,
            100 * opt_steps / self.max_opts,
            SEPARATOR.join(text for _, text in self.stat_parts()),
            f" | ETA {_clock(eta)}" if math.isfinite(eta) else "",
        )

    def rates(self) -> tuple[float, float]:
        """(opt steps/s, samples/s) over the last few refreshes."""
        if len(self.history) < 2:
            return 0.0, 0.0
        (t0, o0, s0), (t1, o1, s1) = self.history[0], self.history[-1]
        seconds = max(t1 - t0, 1e-9)
        return (o1 - o0) / seconds, (s1 - s0) / seconds

    def eta(self, opt_steps: int) -> float:
        """Seconds to ``max_opts`` at the current opt-step rate; inf while the rate is not known
        yet (before :data:`ETA_AFTER_SECONDS` of optimizing, measured over optimizing time only)."""
        since = self.optimizing_since
        if since is None:
            return math.inf
        optimizing = [point for point in self.history if point[0] >= since]
        if len(optimizing) < 2 or optimizing[-1][0] - optimizing[0][0] < ETA_AFTER_SECONDS:
            return math.inf
        (t0, o0, _), (t1, o1, _) = optimizing[0], optimizing[-1]
        rate = (o1 - o0) / (t1 - t0)
        return (self.max_opts - opt_steps) / rate if rate > 0 else math.inf

    def stat_parts(self) -> list[tuple[int, str]]:
        """The stats next to the bar as ``(priority, text)``, in display order; a lower priority
        number is more important (kept longer on a narrow terminal)."""
        buffer_size, actors_alive, restarts = self.counters
        opt_rate, sample_rate = self.rates()
        parts = [(3, f"{_rate(sample_rate)} samples/s"), (2, f"{_rate(opt_rate)} opt/s")]
        if self.latest_eval is not None:
            evaluation = f"eval {format_number(self.latest_eval)}"
            parts.append((1, f"{evaluation} (best {format_number(self.best_eval)})"))
        parts.append((5, f"buffer {100 * buffer_size / self.capacity:.0f}%"))
        if self.n_actors is not None:
            trouble = actors_alive != self.n_actors or restarts > 0
            restarted = f", {restarts} restarts" if restarts else ""
            parts.append((1 if trouble else 4, f"actors {actors_alive}/{self.n_actors}{restarted}"))
        return parts

    def tail(self, opt_steps: int | None = None) -> str:
        """What follows the bar, count and percentage on a terminal: the ETA (once known; none
        without ``opt_steps``), then the stats that fit in the console's width. Sizes the bar."""
        eta = math.inf if opt_steps is None else self.eta(opt_steps)
        head = f"ETA {_clock(eta)}" if math.isfinite(eta) else ""
        width = console().width
        self.bar.bar_width = _bar_width()
        count = 2 * len(str(self.max_opts)) + 1
        fixed = len("opt") + self.bar.bar_width + count + len("100%") + 4  # 4 gaps between columns
        budget = width - fixed - 1 - (len(head) + len(SEPARATOR) if head else 0)
        return SEPARATOR.join(part for part in (head, _fit(self.stat_parts(), budget)) if part)

    def close(self) -> None:
        """Stop the live view with its last counters and no ETA (idempotent)."""
        if self.live is not None:
            self.live.update(self.task, tail=self.tail())
            self.live.stop()
            self.live = None


def _count(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _inline(value: Any) -> str:
    """A summary value on one line: numbers with separators, nested mappings labelled."""
    if isinstance(value, Mapping):
        flat = all(not isinstance(v, Mapping) for v in value.values())
        joiner = " · " if flat else "; "
        sep = " " if flat else ": "
        return joiner.join(f"{k}{sep}{_inline(v)}" for k, v in value.items())
    if isinstance(value, float):
        return format_number(value)
    return _count(value)


SUMMARY_KEYS = {
    "objective",
    "best_return",
    "final_return",
    "mean_return",
    "opt_steps",
    "env_steps",
    "samples",
    "opt_steps_per_sec",
    "seconds",
    "solved_at",
    "interrupted",
    "stopped_by_callback",
    "accounting",
    "restarts",
}


def summary_table(summary: Mapping[str, Any]) -> str:
    """A run summary (what ``train`` returns) as a short aligned table for the log.

    Rows: returns (best, final, mean, the objective), steps (opt with their rate, env, samples),
    time and how the run ended, when the target was reached, the actors' transition accounting
    and restarts; keys absent from ``summary`` (the serial trainer has no samples or actors) are
    left out, and unknown keys get a row of their own.
    """
    rows: list[tuple[str, str]] = []
    returns = [
        f"{name} {format_number(summary.get(f'{name}_return'))}"
        for name in ("best", "final", "mean")
        if f"{name}_return" in summary
    ]
    if "objective" in summary:
        returns.append(f"objective {format_number(summary['objective'])}")
    if returns:
        rows.append(("returns", " · ".join(returns)))
    steps = []
    if "opt_steps" in summary:
        rate = summary.get("opt_steps_per_sec")
        steps.append(
            f"{_count(summary['opt_steps'])} opt" + (f" ({format_number(rate)}/s)" if rate else "")
        )
    if "env_steps" in summary:
        steps.append(f"{_count(summary['env_steps'])} env")
    if "samples" in summary:
        steps.append(f"{_count(summary['samples'])} samples")
    if steps:
        rows.append(("steps", " · ".join(steps)))
    if summary.get("interrupted"):
        ended = "interrupted (final checkpoint saved)"
    elif summary.get("stopped_by_callback"):
        ended = "stopped early by the on_eval callback"
    elif summary.get("solved_at"):
        ended = "target return reached"
    else:
        ended = "completed"
    rows.append(
        ("time", f"{_clock(summary['seconds'])} · {ended}" if "seconds" in summary else ended)
    )
    solved = summary.get("solved_at")
    if solved:
        at = [f"opt {_count(solved.get('opt_steps'))}", f"env {_count(solved.get('env_steps'))}"]
        if "seconds" in solved:
            at.append(_clock(solved["seconds"]))
        rows.append(("solved at", " · ".join(at)))
    if "accounting" in summary:
        rows.append(("transitions", _inline(summary["accounting"])))
    if "restarts" in summary:
        rows.append(("restarts", _count(summary["restarts"])))
    rows += [(key, _inline(value)) for key, value in summary.items() if key not in SUMMARY_KEYS]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
