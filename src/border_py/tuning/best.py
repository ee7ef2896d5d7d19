"""What ``best.yaml`` says about a study: the best trial, the ``border train`` command that
composes exactly the config that trial ran, the count of trials per state and, once enough trials
have completed, how much each param mattered."""

from __future__ import annotations

import math
import re
import shlex
import warnings
from typing import Any

from border_py.secrets import redact_override, redact_text
from border_py.tuning.space import override

__all__ = ["MIN_TRIALS_FOR_IMPORTANCE", "best_record", "reproduce_command"]

MIN_TRIALS_FOR_IMPORTANCE = 5  # completed trials before best.yaml ranks the params


UNQUOTED = re.compile(r"[A-Za-z0-9_/.:@+%-]+")  # a value Hydra's grammar reads as it is, unquoted


def _hydra_string(text: str) -> str:
    """``text`` as a value of Hydra's override grammar: as it is, or quoted where it must be."""
    if UNQUOTED.fullmatch(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def reproduce_command(overrides: list[str], params: dict[str, Any], entries: list[str]) -> str:
    """The ``border train`` command line (shell-quoted) that composes the config of a trial run
    with ``overrides`` and ``params`` on the search path ``entries``.

    A trial composes exactly its overrides: no recipe is looked up for its agent and env. The
    command says ``experiment=none`` unless the overrides name an experiment, so that
    ``border train``'s lookup does not apply one; the search path (``--config-dir``) comes as
    ``hydra.searchpath=[...]``.
    """
    words = ["border", "train"]
    if entries:
        words.append(f"hydra.searchpath=[{','.join(_hydra_string(e) for e in entries)}]")
    if not any(o.split("=", 1)[0].lstrip("+~") == "experiment" for o in overrides):
        words.append("experiment=none")
    words += [redact_override(o) for o in overrides]
    words += [override(k, v) for k, v in params.items()]
    return shlex.join(words)


def param_importances(study: Any, completed: int) -> dict[str, float] | None:
    """Optuna's importance of each param (normalized, summing to 1), or None with fewer than
    :data:`MIN_TRIALS_FOR_IMPORTANCE` completed trials or when Optuna cannot rank them (e.g. a
    param that took one value only)."""
    import optuna

    if completed < MIN_TRIALS_FOR_IMPORTANCE:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # PED-ANOVA, Optuna 5's default, named for Optuna 4, whose default (fANOVA) needs sklearn
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            ranked = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError, ZeroDivisionError):
        return None
    if not ranked or not all(math.isfinite(v) for v in ranked.values()):
        return None
    return {str(name): round(float(value), 4) for name, value in ranked.items()}


def best_record(
    study: Any, storage: str, overrides: list[str], entries: list[str]
) -> dict[str, Any]:
    """``best.yaml``'s content: the study's name and storage (a password hidden), the count of
    trials per state and, once a trial has completed with a finite value, the best one (number,
    value, params, run dir, the ``border train`` command that reproduces its config, see
    :func:`reproduce_command`) and the params' importances (see :func:`param_importances`)."""
    import optuna

    states: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        states[trial.state.name] = states.get(trial.state.name, 0) + 1
    record: dict[str, Any] = {
        "study": study.study_name,
        "storage": redact_text(storage),
        "trials": states,
    }
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    finite = [t for t in complete if t.value is not None and math.isfinite(t.value)]
    if not finite:
        return record
    best = max(finite, key=lambda t: t.value)
    record |= {
        "best_trial": best.number,
        "best_value": best.value,
        "best_params": dict(best.params),
        "best_run_dir": best.user_attrs.get("run_dir"),
        "best_command": reproduce_command(overrides, best.params, entries),
    }
    importances = param_importances(study, len(finite))
    if importances is not None:
        record["param_importances"] = importances
    return record
