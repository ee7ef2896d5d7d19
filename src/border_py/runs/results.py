"""A run's outcome in ``<run dir>/result.json``, and the objective a sweep optimizes.

Every run that started writes ``result.json`` when it ends: ``completed``, ``interrupted`` (a stop
signal), or ``failed`` (with the error). ``border report`` reads it; a sweeper optimizes the
``objective`` value that ``train`` returns.
"""

from __future__ import annotations

import json
import math
import traceback
from pathlib import Path
from typing import Any

from border_py.files import read_json, write_file
from border_py.layout import RESULT
from border_py.secrets import redact_override, redact_text

__all__ = ["OBJECTIVES", "objective_value", "read_result", "write_result"]

OBJECTIVES = ("best", "final", "mean")  # best | final (last evaluation) | mean of all evaluations


def objective_value(summary: dict[str, Any], objective: str) -> float:
    """The summary's ``<objective>_return`` as a float (NaN when no evaluation happened, which
    sweepers treat as a failed trial)."""
    value = summary.get(f"{objective}_return")
    return float("nan") if value is None else float(value)


def _plain(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_result(
    run_dir: Path,
    status: str,
    summary: dict[str, Any] | None = None,
    error: BaseException | None = None,
    overrides: list[str] | None = None,
) -> Path:
    """Write ``result.json`` atomically and durably (:func:`~border_py.files.write_file`: never
    through a link): status, the run summary, the error (type, message, traceback) and the
    command-line overrides, secrets redacted (:mod:`border_py.secrets`).

    Raises:
        OSError: it could not be written (e.g. a full disk); the earlier one, if any, is intact.
    """
    record: dict[str, Any] = {
        "status": status,
        "overrides": [redact_override(o) for o in overrides or []],
    }
    if summary is not None:
        record["summary"] = _plain(summary)
    if error is not None:
        lines = str(error).strip().splitlines()
        record["error"] = {
            "type": type(error).__name__,
            "message": redact_text(lines[0]) if lines else type(error).__name__,
            "traceback": redact_text("".join(traceback.format_exception(error))),
        }
    return write_file(Path(run_dir) / RESULT, json.dumps(record, indent=2, default=str).encode())


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``result.json``, or None if it has none (still running, or killed) or it is not
    one (not a JSON object; see :func:`~border_py.files.read_json`); its ``overrides`` are the
    strings among them."""
    try:
        record = read_json(Path(run_dir) / RESULT)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    overrides = record.get("overrides")
    record["overrides"] = (
        [o for o in overrides if isinstance(o, str)] if isinstance(overrides, list) else []
    )
    return record
