"""Finding the runs under a directory and reading what the report shows of each.

A run's curve and counters come from its TensorBoard event files (TensorBoard's own reader), its
status, error and exact returns from ``result.json``. Everything read is untrusted: text has its
control characters escaped (:func:`~border_py.errors.printable`) and only numbers reach the number
columns (a return, a std or a duration as a float: an int too large for one reads as infinite).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from border_py.config import is_number
from border_py.errors import ConfigError, number_text, printable
from border_py.files import read_json, read_record
from border_py.layout import BEST, CHECKPOINTS, CONFIG, HYDRA, HYDRA_CONFIG, RESULT, TENSORBOARD
from border_py.reports.bounds import return_range
from border_py.runs.compat import current_targets
from border_py.runs.links import refuse_links
from border_py.runs.results import read_result
from border_py.runs.resume import original_overrides

__all__ = [
    "COLUMNS",
    "X_AXES",
    "Evaluation",
    "FreshScore",
    "RunRow",
    "as_float",
    "collect",
    "find_runs",
    "override_key",
    "read_run",
    "shared",
    "shared_overrides",
]

log = logging.getLogger(__name__)

CURVE_TAG = "eval/return_mean"
EVAL_ENV_STEPS_TAG = "eval/env_steps"  # logged with each evaluation, at its opt step
ENV_STEPS_TAG = "perf/env_steps"  # logged every record_interval opt steps (older runs' fallback)
X_AXES = {"env_steps": "env steps", "opt_steps": "opt steps", "seconds": "wall time (s)"}
UNKNOWN = "?"  # a run whose config names no env id or agent (or that has no config)
COLUMNS = (
    "job",
    "env_id",
    "agent_class",
    "overrides",
    "status",
    "best_return",
    "final_return",
    "final_eval_return",
    "final_eval_std",
    "final_eval_episodes",
    "best_eval_return",
    "best_eval_std",
    "env_steps",
    "opt_steps",
    "seconds",
    "error",
)


@dataclass(frozen=True)
class Evaluation:
    """One point of a run's ``eval/return_mean`` curve, with the three x axes."""

    opt_steps: int
    env_steps: float | None
    seconds: float
    value: float

    def x(self, axis: str) -> float | None:
        """This point's position on ``axis`` (a key of :data:`X_AXES`)."""
        return {"env_steps": self.env_steps, "opt_steps": self.opt_steps, "seconds": self.seconds}[
            axis
        ]


@dataclass(frozen=True)
class FreshScore:
    """A final evaluation of ``result.json`` (``final_eval``, ``best_eval``): the mean and std of
    the returns of its episodes, on reset seeds no selection evaluation used."""

    mean: float
    std: float
    episodes: int

    @classmethod
    def read(cls, record: Any) -> FreshScore | None:
        """The score a summary's record holds (None: absent, or not numbers where numbers go)."""
        if not isinstance(record, dict):
            return None
        mean, std = _real(record.get("return_mean")), _real(record.get("return_std"))
        episodes = _number(record.get("episodes"))
        if mean is None or std is None or not isinstance(episodes, int):
            return None
        return cls(mean, std, episodes)

    def text(self) -> str:
        """``mean ± std (n)``, one decimal (see :func:`~border_py.errors.number_text`)."""
        return f"{number_text(self.mean)} ± {number_text(self.std)} ({number_text(self.episodes)})"


@dataclass
class RunRow:
    """One run's line in the report."""

    job: str
    path: Path
    overrides: list[str]
    status: str
    best_return: float | None = None
    final_return: float | None = None
    final_eval: FreshScore | None = None  # result.json's final_eval: the honest final score
    best_eval: FreshScore | None = None  # its best_eval: the best checkpoint played again
    env_steps: int | None = None
    opt_steps: int | None = None
    seconds: float | None = None
    error: str = ""
    evaluations: list[Evaluation] = field(default_factory=list)
    env_id: str = UNKNOWN
    agent: str = UNKNOWN
    return_range: tuple[float, float] | None = None  # the task's, when known (reports.bounds)

    def curve(self, axis: str) -> list[tuple[float, float]]:
        """(x, eval/return_mean) points on ``axis``; evaluations without that x are left out."""
        points = [(e.x(axis), e.value) for e in self.evaluations]
        return [(float(x), value) for x, value in points if x is not None]

    def values(self) -> dict[str, Any]:
        """The row as plain values, keyed by :data:`COLUMNS`."""
        return {
            "job": self.job,
            "env_id": self.env_id,
            "agent_class": self.agent,
            "overrides": " ".join(self.overrides),
            "status": self.status,
            "best_return": self.best_return,
            "final_return": self.final_return,
            "final_eval_return": self.final_eval and self.final_eval.mean,
            "final_eval_std": self.final_eval and self.final_eval.std,
            "final_eval_episodes": self.final_eval and self.final_eval.episodes,
            "best_eval_return": self.best_eval and self.best_eval.mean,
            "best_eval_std": self.best_eval and self.best_eval.std,
            "env_steps": self.env_steps,
            "opt_steps": self.opt_steps,
            "seconds": None if self.seconds is None else round(self.seconds, 1),
            "error": self.error,
        }


def is_run(path: Path) -> bool:
    """Whether ``path`` is a border-py run dir."""
    return any((path / name).exists() for name in (RESULT, TENSORBOARD, CHECKPOINTS))


def find_runs(root: Path) -> list[Path]:
    """Run dirs at or under ``root`` (never inside another run, never through a symlinked dir), in
    natural order (2 before 10)."""
    if is_run(root):
        return [root]
    found: list[Path] = []
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink() and not child.name.startswith("."):
            found += find_runs(child)
    return sorted(found, key=lambda p: _natural(str(p.relative_to(root))))


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _events(run_dir: Path) -> tuple[dict[str, list[tuple[int, float, float]]], float | None]:
    """(step, value, wall time) per tag the report uses, and the wall time of the first event."""
    log_dir = run_dir / TENSORBOARD
    if not log_dir.is_dir():
        return {}, None
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    scalars = {
        tag: [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        for tag in (CURVE_TAG, EVAL_ENV_STEPS_TAG, ENV_STEPS_TAG)
        if tag in tags
    }
    try:
        first = acc.FirstEventTimestamp()
    except ValueError:  # no event at all
        first = None
    return scalars, first


def evaluations(
    scalars: dict[str, list[tuple[int, float, float]]], started: float | None
) -> list[Evaluation]:
    """The run's evaluations with their env steps (``eval/env_steps`` at the same opt step, else
    ``perf/env_steps`` interpolated at it) and seconds since the run's first event."""
    at_eval = {step: value for step, value, _ in scalars.get(EVAL_ENV_STEPS_TAG, [])}
    perf = scalars.get(ENV_STEPS_TAG, [])
    out = []
    for step, value, wall in scalars.get(CURVE_TAG, []):
        env_steps: float | None = at_eval.get(step)
        if env_steps is None and perf:
            env_steps = float(np.interp(step, [s for s, _, _ in perf], [v for _, v, _ in perf]))
        seconds = wall - started if started is not None else 0.0
        out.append(Evaluation(step, env_steps, seconds, value))
    return out


def _config(run_dir: Path) -> dict[str, Any]:
    """The run's config as plain data: Hydra's ``.hydra/config.yaml`` (safe YAML), else its best
    checkpoint's ``config.json``, its moved ``_target_`` values renamed
    (:func:`~border_py.runs.compat.current_targets`); empty when neither can be read. Nothing in
    it is imported."""
    with contextlib.suppress(OSError, yaml.YAMLError, RecursionError):
        saved = yaml.safe_load(read_record(run_dir / HYDRA / HYDRA_CONFIG))
        if isinstance(saved, dict):
            return current_targets(saved)
    with contextlib.suppress(OSError, ValueError):
        saved = read_json(run_dir / CHECKPOINTS / BEST / CONFIG)
        if isinstance(saved, dict):
            return current_targets(saved)
    return {}


def task_of(config: dict[str, Any]) -> tuple[str, str]:
    """The env id and agent (the class name its ``agent._target_`` names) of a run's config, as
    text: :data:`UNKNOWN` for what it does not say (or holds as an interpolation)."""
    found = []
    for group, key in (("env", "id"), ("agent", "_target_")):
        section = config.get(group)
        value = section.get(key) if isinstance(section, dict) else None
        ok = isinstance(value, str) and value and "${" not in value
        found.append(printable(value) if ok else UNKNOWN)  # type: ignore[arg-type]
    return found[0], found[1].rsplit(".", 1)[-1]


def read_run(run_dir: Path, root: Path) -> RunRow:
    """Everything the report shows about one run (text from its files with control characters
    escaped, numbers only where numbers go)."""
    result = read_result(run_dir) or {}
    scalars, started = _events(run_dir)
    summary = result.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    row = RunRow(
        job=printable(str(run_dir.relative_to(root)) if run_dir != root else run_dir.name),
        path=run_dir,
        overrides=[printable(o) for o in original_overrides(run_dir)],
        status=printable(str(result["status"])) if "status" in result else "unfinished",
        evaluations=evaluations(scalars, started),
    )
    config = _config(run_dir)
    row.env_id, row.agent = task_of(config)
    row.return_range = return_range(config)
    curve = row.curve("opt_steps")
    if "final_return" in summary:  # exact; TensorBoard keeps float32
        row.best_return = _real(summary.get("best_return"))
        row.final_return = _real(summary["final_return"])
    elif curve:
        row.best_return = max(v for _, v in curve)
        row.final_return = curve[-1][1]
    row.final_eval = FreshScore.read(summary.get("final_eval"))
    row.best_eval = FreshScore.read(summary.get("best_eval"))
    env = scalars.get(ENV_STEPS_TAG, [])
    row.env_steps = _number(summary.get("env_steps", int(env[-1][1]) if env else None))
    steps = [s for tag in scalars.values() for s, _, _ in tag]
    row.opt_steps = _number(summary.get("opt_steps", max(steps) if steps else None))
    walls = [w for tag in scalars.values() for _, _, w in tag]
    row.seconds = _real(summary.get("seconds", max(walls) - min(walls) if walls else None))
    error = result.get("error")
    if isinstance(error, dict):
        row.error = printable(f"{error.get('type')}: {error.get('message')}")
    return row


def _number(value: Any) -> Any:
    """``value`` if it is a number, else None (a crafted ``result.json`` may hold anything)."""
    return value if is_number(value) else None


def _real(value: Any) -> float | None:
    """``value`` as a float if it is a number (an int too large for a float: infinite), else
    None."""
    number = _number(value)
    return None if number is None else as_float(number)


def as_float(value: float) -> float:
    """``value`` as a float; an int too large for one (JSON allows 4300 digits) is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def collect(path: str | Path) -> tuple[Path, list[RunRow]]:
    """The report's root and its runs; one :class:`ConfigError` line when there is nothing."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{root}: no such directory")
    runs = find_runs(root)
    if not runs:
        raise ConfigError(
            f"{root}: no border-py runs here (no result.json, tensorboard/ or checkpoints/)"
        )
    rows = []
    for run in runs:
        try:
            refuse_links(run)  # a link would be read through, a FIFO would block the report
        except ConfigError as exc:
            log.warning("skipped %s: %s", printable(str(run)), printable(str(exc)))
            continue
        rows.append(read_run(run, root))
    if not rows:
        raise ConfigError(f"{root}: no run here that border can read (each was skipped)")
    return root, rows


def override_key(override: str) -> str:
    """The key an override sets (``+agent.lr=1`` -> ``agent.lr``)."""
    return override.split("=", 1)[0].lstrip("+~")


def shared(overrides: Iterable[list[str]] | Iterable[tuple[str, ...]]) -> list[str]:
    """Overrides every one of several lists has (shown once, under the table)."""
    lists = [list(o) for o in overrides]
    if len(lists) < 2:
        return []
    common = set(lists[0]).intersection(*lists[1:])
    return [o for o in lists[0] if o in common]


def shared_overrides(rows: list[RunRow]) -> list[str]:
    """Overrides every run has (shown once, under the table, when there are several runs)."""
    return shared(row.overrides for row in rows)
