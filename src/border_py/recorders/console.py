"""The terminal during ``border train``: the console, rich logging and the run summary.

Log records and the live progress view (:mod:`border_py.recorders.progress`) share one rich
console on stderr, so they never garble each other. On a terminal the log goes through rich's
handler; elsewhere (CI, ``nohup``, a pipe) it is plain timestamped lines. At the end,
:func:`summary_table` renders the run's summary.

Numbers meant for people go through :func:`format_number` (significant digits, so that a return
of 0.952 does not print as 1.0 and one of 12345.6 does not print as 1.23e+04).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.logging import RichHandler

from border_py.config import is_int
from border_py.secrets import RedactingFormatter

__all__ = [
    "ACCOUNTING_LABELS",
    "PLAIN_FORMAT",
    "SUMMARY_KEYS",
    "console",
    "format_number",
    "log_handler",
    "summary_table",
]

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
    terminal, plain timestamped lines on stderr elsewhere (CI logs, ``nohup``, pipes). Either way
    a line is redacted and escaped (:class:`~border_py.secrets.RedactingFormatter`): text from a
    run's files never reaches the terminal as a terminal sequence, whatever logs it."""
    handler: logging.Handler
    if not console().is_terminal:
        handler = logging.StreamHandler()
        handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))  # lines kept in job logs
        return handler
    handler = RichHandler(
        console=console(),
        show_path=False,
        markup=False,
        rich_tracebacks=False,
        log_time_format="[%X]",
    )
    handler.setFormatter(RedactingFormatter("%(message)s"))  # rich adds the time and level
    return handler


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


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _count(value: Any) -> str:
    return f"{value:,}" if is_int(value) else str(value)


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
    "selection_episodes",
    "final_eval",
    "best_eval",
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
    "sample_unit",
    "policy_dtype",
}

# The actors' accounting (Actors.accounting) in words: of transitions, or of a recurrent agent's
# sequences (the summary's sample_unit)
ACCOUNTING_LABELS = {
    "sent": "sent",
    "received": "received",
    "dropped": "dropped at stop",
    "received_total": "received in all sessions",
}


def _accounting(accounting: Mapping[str, Any]) -> str:
    """The accounting row: its known counts labelled in words, any other key as it is."""
    return _inline({ACCOUNTING_LABELS.get(key, key): value for key, value in accounting.items()})


def _fresh(summary: Mapping[str, Any]) -> str:
    """The final evaluations' row: the final weights and the best checkpoint, each ``mean ± std``
    over the same fresh episodes ("" without a final evaluation)."""
    scores = [
        (label, summary[key])
        for key, label in (("final_eval", "final weights"), ("best_eval", "best checkpoint"))
        if isinstance(summary.get(key), Mapping)
    ]
    if not scores:
        return ""
    parts = [
        f"{label} {format_number(s.get('return_mean'))} ± {format_number(s.get('return_std'))}"
        for label, s in scores
    ]
    return " · ".join(parts) + f" ({_count(scores[0][1].get('episodes'))} fresh episodes)"


def _steps(summary: Mapping[str, Any], unit: str) -> str:
    """The steps row: opt steps with their rate, env steps, samples (a recurrent agent's run:
    ``unit``, sequences); "" without any."""
    steps = []
    if "opt_steps" in summary:
        rate = summary.get("opt_steps_per_sec")
        steps.append(
            f"{_count(summary['opt_steps'])} opt" + (f" ({format_number(rate)}/s)" if rate else "")
        )
    if "env_steps" in summary:
        steps.append(f"{_count(summary['env_steps'])} env")
    if "samples" in summary:
        samples = "samples" if unit == "transitions" else unit
        steps.append(f"{_count(summary['samples'])} {samples}")
    return " · ".join(steps)


def summary_table(summary: Mapping[str, Any]) -> str:
    """A run summary (what ``train`` returns) as a short aligned table for the log.

    Rows: returns of the selection evaluations (best, final, mean, the objective), the final
    evaluations on fresh episodes (``final_eval``, ``best_eval``), steps (opt with their rate,
    env, samples), time and how the run ended, when the target was reached, the actors'
    accounting, restarts and the precision they acted in (``policy_dtype``); keys absent from
    ``summary`` (the serial trainer has no samples or actors) are left out, and unknown keys get
    a row of their own. The samples and the accounting are
    transitions, or what ``sample_unit`` names (``sequences``: a recurrent agent's run), which
    then names them.
    """
    unit = summary.get("sample_unit", "transitions")
    rows: list[tuple[str, str]] = []
    returns = [
        f"{name} {format_number(summary.get(f'{name}_return'))}"
        for name in ("best", "final", "mean")
        if f"{name}_return" in summary
    ]
    if "objective" in summary:
        returns.append(f"objective {format_number(summary['objective'])}")
    if returns:
        episodes = summary.get("selection_episodes")
        each = f" (selection evaluations of {_count(episodes)} episodes)" if episodes else ""
        rows.append(("returns", " · ".join(returns) + each))
    fresh = _fresh(summary)
    if fresh:
        rows.append(("fresh eval", fresh))
    steps = _steps(summary, unit)
    if steps:
        rows.append(("steps", steps))
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
        rows.append((str(unit), _accounting(summary["accounting"])))
    if "restarts" in summary:
        rows.append(("restarts", _count(summary["restarts"])))
    if summary.get("policy_dtype"):
        rows.append(("acted in", str(summary["policy_dtype"])))
    rows += [(key, _inline(value)) for key, value in summary.items() if key not in SUMMARY_KEYS]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)
