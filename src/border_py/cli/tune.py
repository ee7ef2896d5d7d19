"""``border tune <space>``: hyper-parameter search with Optuna, trials in parallel, pruned early.

A search space is a YAML file, ``tune/<name>.yaml`` in a ``--config-dir`` (or a ``pkg://`` config
package) or in border-py's own configs, found through Hydra's search path like any config: the
Optuna sampler and pruner (``_target_`` specs), the ``border train`` overrides every trial shares,
and ``params``, each a ``Trial.suggest_<type>`` call. The study lives in SQLite (``<study dir>/study.db``), so a search can be continued, watched
(``optuna-dashboard``) or joined by another ``border tune`` on the same study dir.

Each trial is one process (``spawn``) running :func:`border_py.train` with its sampled overrides,
in ``<study dir>/trials/<number>/``; up to ``n_jobs`` run at once. After each evaluation the trial
reports the objective so far (``objective``: the best, last or mean ``eval/return_mean``) at the
opt step; when the pruner says so, the run stops gracefully and the trial is marked PRUNED.
``<study dir>/best.yaml`` holds the best trial's value, parameters and overrides.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import math
import multiprocessing
import uuid
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import yaml

from border_py.cli.errors import fail
from border_py.config import build, closest, config_dir, positive, require
from border_py.errors import ConfigError
from border_py.files import LogFile, make_dir, write_file
from border_py.processes.signals import StopSignals
from border_py.resources import usable_cores
from border_py.secrets import RedactingFormatter, redact_override

log = logging.getLogger("border_py.tune")

TYPES = ("float", "int", "categorical")  # a param's Trial.suggest_<type>
SPACE_KEYS = ("study_name", "n_trials", "n_jobs", "sampler", "pruner", "overrides", "params")
STORAGE_FILE = "study.db"
BEST_FILE = "best.yaml"
HEARTBEAT_SECONDS = 30  # a trial process that stops beating this long (+ grace) is marked FAIL
GRACE_SECONDS = 120
SQLITE_TIMEOUT_SECONDS = 60  # how long a process waits for another one's write lock
STOP_SECONDS = 60  # after a second Ctrl-C: how long a terminated trial gets to stop gracefully
INTERRUPTED = 130  # exit status of a trial (and of border tune) stopped by a signal
POLL_SECONDS = 1.0


@dataclass
class SearchSpace:
    """A checked search space (see the module docstring and ``conf/tune/dqn_cartpole.yaml``)."""

    name: str
    study_name: str
    n_trials: int = 20
    n_jobs: int | str = "auto"
    sampler: dict[str, Any] | None = None
    pruner: dict[str, Any] | None = None
    overrides: list[str] = field(default_factory=list)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)


def search_path(config_dirs: list[str]) -> list[str]:
    """Hydra search-path entries for ``--config-dir`` values (``pkg://...`` kept as is)."""
    entries = []
    for entry in config_dirs:
        if entry.startswith(("pkg://", "file://")):
            entries.append(entry)
            continue
        path = Path(entry).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"--config-dir {entry}: no such directory")
        entries.append(f"file://{path}")
    return entries


def compose_train(overrides: list[str], entries: list[str]) -> Any:
    """The ``train`` config with ``overrides`` and the extra search path; one-line errors."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    extra = [f"hydra.searchpath=[{','.join(entries)}]"] if entries else []
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir()), job_name="tune"):
        try:
            return compose("train", overrides=[*extra, *overrides])
        except MissingConfigException as exc:
            missing = exc.missing_cfg_file or ""
            group, _, option = missing.rpartition("/")
            options = list(exc.options or [])
            raise ConfigError(
                f"{group}={option}: no such option{closest(option, options)}; choose from:"
                f" {', '.join(options) or 'none'}"
            ) from None
        except (HydraException, OmegaConfBaseException) as exc:
            raise ConfigError(str(exc).splitlines()[0]) from None


def load_space(name: str, entries: list[str]) -> SearchSpace:
    """Find ``tune/<name>.yaml`` on the search path (border-py's configs, then your
    ``--config-dir`` entries: give yours their own names) and check it: one
    :class:`ConfigError` line per mistake."""
    from border_py.overrides import to_plain

    raw = to_plain(compose_train([f"+tune={name}"], entries)).get("tune")
    where = f"tune/{name}.yaml"
    require(where, isinstance(raw, dict), "a mapping of search settings", raw)
    assert isinstance(raw, dict)
    for key in raw:
        if key not in SPACE_KEYS:
            raise ConfigError(
                f"{where}: unknown key {key!r}{closest(str(key), SPACE_KEYS)}; keys:"
                f" {', '.join(SPACE_KEYS)}"
            )
    space = SearchSpace(name=where, study_name=str(raw.get("study_name") or name))
    space.n_trials = raw.get("n_trials", space.n_trials)
    positive(f"{where}: n_trials", space.n_trials, int)
    space.n_jobs = raw.get("n_jobs", space.n_jobs)
    check_n_jobs(f"{where}: n_jobs", space.n_jobs)
    for key in ("sampler", "pruner"):
        spec = raw.get(key)
        ok = spec is None or (isinstance(spec, dict) and "_target_" in spec)
        require(f"{where}: {key}", ok, "null or a mapping with a '_target_'", spec)
        setattr(space, key, spec)
    overrides = raw.get("overrides") or []
    ok = isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)
    require(f"{where}: overrides", ok, "a list of key=value strings", overrides)
    space.overrides = list(overrides)
    params = raw.get("params") or {}
    require(
        f"{where}: params", isinstance(params, dict) and bool(params), "a non-empty mapping", params
    )
    for key, spec in params.items():
        space.params[str(key)] = check_param(f"{where}: params.{key}", spec)
    return space


def last_wins(overrides: list[str]) -> list[str]:
    """``overrides`` with one entry per key, the last one given (as Hydra would apply them)."""
    last = {o.split("=", 1)[0]: i for i, o in enumerate(overrides)}
    return [o for i, o in enumerate(overrides) if last[o.split("=", 1)[0]] == i]


def check_n_jobs(key: str, value: Any) -> None:
    """``n_jobs``: a positive int or ``auto``."""
    ok = value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0)
    require(key, ok, "a positive int or 'auto'", value)


def check_param(key: str, spec: Any) -> dict[str, Any]:
    """One param: ``{type: float|int|categorical, <arguments of Trial.suggest_<type>>}``."""
    import optuna

    require(
        key, isinstance(spec, dict), "a mapping like {type: float, low: 1e-4, high: 1e-2}", spec
    )
    kind = spec.get("type")
    require(f"{key}.type", kind in TYPES, f"one of {', '.join(TYPES)}", kind)
    method = getattr(optuna.trial.Trial, f"suggest_{kind}")
    params = [p for p in inspect.signature(method).parameters if p not in ("self", "name")]
    arguments = {k: v for k, v in spec.items() if k != "type"}
    for name in arguments:
        if name not in params:
            raise ConfigError(
                f"{key}.{name} is not an argument of Trial.suggest_{kind}{closest(name, params)};"
                f" arguments: {', '.join(params)}"
            )
    try:  # Optuna checks the ranges (low <= high, log needs low > 0, ...)
        getattr(optuna.create_study().ask(), f"suggest_{kind}")("x", **arguments)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {str(exc).splitlines()[0]}") from None
    return dict(spec)


def corners(spec: dict[str, Any]) -> list[Any]:
    """The values of a param that a check of the search space tries: its bounds or choices."""
    if spec["type"] == "categorical":
        return list(spec["choices"])
    return [spec["low"], spec["high"]]


def override(key: str, value: Any) -> str:
    """``key=value`` in Hydra's syntax (``true``/``false``/``null`` for Python's)."""
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    return f"{key}={'null' if value is None else value}"


def check_space(space: SearchSpace, overrides: list[str], entries: list[str]) -> dict[str, Any]:
    """Compose and validate a trial's config at each param's bounds or choices (the others at
    their first); build the sampler and pruner once. Returns the config at the first corner."""
    from border_py.overrides import to_plain
    from border_py.trainers.train import prepare

    first = {name: corners(spec)[0] for name, spec in space.params.items()}
    variants = [first] + [
        first | {name: value} for name, spec in space.params.items() for value in corners(spec)[1:]
    ]
    for values in variants:
        params = [override(k, v) for k, v in values.items()]
        try:
            prepare(compose_train([*overrides, *params], entries), overrides=[])
        except ConfigError as exc:
            raise ConfigError(f"with {' '.join(params)}: {exc}") from None
    if space.sampler is not None:
        build(f"{space.name}: sampler", space.sampler)
    if space.pruner is not None:
        build(f"{space.name}: pruner", space.pruner)
    return to_plain(
        compose_train([*overrides, *(override(k, v) for k, v in first.items())], entries)
    )


def cores_per_trial(config: dict[str, Any]) -> int:
    """CPU cores one trial keeps busy: the learner, plus one per actor with the async trainer
    (the evaluator process is idle between evaluations)."""
    if config["trainer"]["_target_"].endswith("SerialTrainer"):
        return 1
    return 1 + int(config["actor_manager"]["n_actors"])


def storage(url: str) -> Any:
    """Optuna's SQLite storage with heartbeats (a killed trial process is marked FAIL)."""
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # heartbeat
    return optuna.storages.RDBStorage(
        url,
        engine_kwargs={"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}},
        heartbeat_interval=HEARTBEAT_SECONDS,
        grace_period=GRACE_SECONDS,
    )


@dataclass
class TrialTask:
    """What a trial process needs (plain data: it crosses a process boundary)."""

    launch: str
    seed_offset: int
    url: str
    study_name: str
    study_dir: str
    sampler: dict[str, Any] | None
    pruner: dict[str, Any] | None
    overrides: list[str]
    params: dict[str, dict[str, Any]]
    entries: list[str]


def sampler_of(spec: dict[str, Any] | None, seed_offset: int) -> Any:
    """The trial's sampler: the spec's ``seed`` plus the trial's offset, so that parallel
    processes, each with its own sampler, do not draw the same values."""
    if spec is None:
        return None
    spec = dict(spec)
    if spec.get("seed") is not None:
        spec["seed"] = int(spec["seed"]) + seed_offset
    return build("sampler", spec)


def objective_so_far(objective: str, returns: list[float]) -> float:
    """What a trial reports after each evaluation: the run's objective if it ended now."""
    if objective == "final":
        return returns[-1]
    if objective == "mean":
        return sum(returns) / len(returns)
    return max(returns)


class TrialInterrupted(Exception):
    """A trial's run was stopped by a signal (the trial is marked FAIL)."""


def run_trial(task: TrialTask) -> None:
    """A trial process: sample the params, train with them, report each evaluation to the study
    (stopping when the pruner says so), and record the outcome in the study. Exits with 130 when
    a signal stopped the run."""
    import optuna

    from border_py import train
    from border_py.overrides import to_plain
    from border_py.recorders.console import PLAIN_FORMAT

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the trial's own log says what happened
    study = optuna.load_study(
        study_name=task.study_name,
        storage=storage(task.url),
        sampler=sampler_of(task.sampler, task.seed_offset),
        pruner=build("pruner", task.pruner) if task.pruner else optuna.pruners.NopPruner(),
    )

    interrupted = False

    def objective(trial: optuna.Trial) -> float:
        nonlocal interrupted
        trial.set_user_attr("launch", task.launch)
        run_dir = Path(task.study_dir) / "trials" / str(trial.number)
        make_dir(run_dir)  # never a symlink
        trial.set_user_attr("run_dir", str(run_dir))
        handler = LogFile(run_dir / "train.log")
        handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.INFO)
        values = {
            name: getattr(trial, f"suggest_{spec['type']}")(
                name, **{k: v for k, v in spec.items() if k != "type"}
            )
            for name, spec in task.params.items()
        }
        given = [*task.overrides, *(override(k, v) for k, v in values.items())]
        returns: list[float] = []

        def on_eval(opt_steps: int, env_steps: int, return_mean: float) -> bool:
            returns.append(return_mean)
            trial.report(objective_so_far(kind, returns), opt_steps)
            return trial.should_prune()

        try:
            cfg = compose_train([*given, f"run_dir={run_dir}", "progress=false"], task.entries)
            kind = to_plain(cfg).get("objective", "best")
            summary = train(cfg, overrides=given, on_eval=on_eval)
        except Exception:
            log.exception("trial %d failed", trial.number)
            raise
        if summary["interrupted"]:
            interrupted = True
            raise TrialInterrupted(f"stopped by a signal at opt step {summary['opt_steps']}")
        if summary["stopped_by_callback"]:
            raise optuna.TrialPruned(f"pruned at opt step {summary['opt_steps']}")
        return float(summary["objective"])

    try:
        study.optimize(objective, n_trials=1, catch=(Exception,))
    except KeyboardInterrupt:  # before the run started, or a second signal
        raise SystemExit(INTERRUPTED) from None
    if interrupted:
        raise SystemExit(INTERRUPTED)


class Tuner:
    """Runs a study's trials, ``n_jobs`` processes at a time, and keeps ``best.yaml`` current.

    Args:
        space: the search space.
        study_dir: where the study (``study.db``), the trials' run dirs and ``best.yaml`` go.
        overrides: ``border train`` overrides for every trial (after the space's own).
        entries: Hydra search-path entries (``--config-dir``) for the trials' configs.
        n_trials: trials to run now (null: the space's ``n_trials``).
        n_jobs: trials at once (null: the space's ``n_jobs``; ``auto``: as cores allow).
    """

    def __init__(
        self,
        space: SearchSpace,
        study_dir: Path,
        overrides: list[str],
        entries: list[str],
        n_trials: int | None = None,
        n_jobs: int | str | None = None,
    ) -> None:
        self.space, self.study_dir, self.entries = space, study_dir, entries
        self.overrides = last_wins([*space.overrides, *overrides])
        self.n_trials = space.n_trials if n_trials is None else n_trials
        positive("--n-trials", self.n_trials, int)
        jobs = space.n_jobs if n_jobs is None else n_jobs
        check_n_jobs("--n-jobs", jobs)
        config = check_space(space, self.overrides, entries)
        per_trial = cores_per_trial(config)
        auto = max(1, usable_cores() // per_trial)
        self.n_jobs = min(self.n_trials, auto if jobs == "auto" else int(jobs))
        if self.n_jobs > auto:
            log.warning(
                "%d trials at once x %d busy processes each on %d cores: trials will be slower",
                self.n_jobs,
                per_trial,
                usable_cores(),
            )
        self.url = f"sqlite:///{study_dir / STORAGE_FILE}"

    def run(self) -> int:
        """Run the trials; return the exit status (0, or 130 when stopped by a signal).

        The first Ctrl-C (or SIGTERM) starts no new trial and waits for the running ones (a
        Ctrl-C reaches them too: each stops gracefully, its trial is marked FAIL); a second one
        terminates them.
        """
        import optuna

        self.study_dir.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=self.space.study_name,
            storage=storage(self.url),
            direction="maximize",
            load_if_exists=True,
        )
        before = len(study.trials)
        log.info(
            "study %s (%d trials so far) in %s: %d trials, %d at once",
            self.space.study_name,
            before,
            self.study_dir,
            self.n_trials,
            self.n_jobs,
        )
        ctx = multiprocessing.get_context("spawn")
        tag = uuid.uuid4().hex[:8]
        running: dict[str, Any] = {}
        launched, stopping = 0, False
        with StopSignals() as signals:
            try:
                while running or (launched < self.n_trials and not stopping):
                    stopping = stopping or signals.requested
                    while not stopping and launched < self.n_trials and len(running) < self.n_jobs:
                        launch = f"{tag}-{launched}"
                        process = ctx.Process(
                            target=run_trial,
                            args=(self.task(launch, before + launched),),
                            name=f"trial-{launch}",
                        )
                        process.start()
                        running[launch] = process
                        launched += 1
                    wait([p.sentinel for p in running.values()], timeout=POLL_SECONDS)
                    for launch, process in list(running.items()):
                        if process.exitcode is not None:
                            del running[launch]
                            self.finished(study, launch, process.exitcode)
                            stopping = stopping or process.exitcode == INTERRUPTED
            except KeyboardInterrupt:  # the second signal
                log.warning("stopping now: terminating %d running trials", len(running))
                self.terminate(study, running)
                stopping = True
        self.write_best(study)
        if stopping:
            log.warning("stopped after %d of %d trials", launched, self.n_trials)
            return INTERRUPTED
        return 0

    def task(self, launch: str, seed_offset: int) -> TrialTask:
        """The trial process's instructions."""
        return TrialTask(
            launch=launch,
            seed_offset=seed_offset,
            url=self.url,
            study_name=self.space.study_name,
            study_dir=str(self.study_dir),
            sampler=self.space.sampler,
            pruner=self.space.pruner,
            overrides=self.overrides,
            params=self.space.params,
            entries=self.entries,
        )

    def terminate(self, study: Any, running: dict[str, Any]) -> None:
        """Stop the running trial processes (SIGTERM: a graceful stop, then SIGKILL)."""
        for process in running.values():
            process.terminate()
        for launch, process in running.items():
            process.join(timeout=STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)
            self.finished(study, launch, process.exitcode)

    def finished(self, study: Any, launch: str, exitcode: int | None) -> None:
        """Log a trial's outcome; a trial left RUNNING by a crashed process is marked FAIL."""
        import optuna

        trials = [
            t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("launch") == launch
        ]
        if not trials:
            log.error("trial process %s exited (%s) before its trial started", launch, exitcode)
            return
        trial = trials[0]
        if trial.state == optuna.trial.TrialState.RUNNING:
            trial = study.tell(
                trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True
            )
        params = " ".join(override(k, v) for k, v in trial.params.items())
        run_dir = trial.user_attrs.get("run_dir", "?")
        state = trial.state.name
        if state == "COMPLETE":
            best = study.best_trial.number == trial.number
            log.info(
                "trial %d complete: %.2f%s | %s",
                trial.number,
                trial.value,
                " (best)" if best else "",
                params,
            )
        elif state == "PRUNED":
            step = trial.last_step
            log.info("trial %d pruned at opt step %s | %s", trial.number, step, params)
        else:
            why = "stopped by a signal" if exitcode == INTERRUPTED else f"failed (exit {exitcode})"
            log.warning(
                "trial %d %s, marked FAIL: see %s/train.log | %s",
                trial.number,
                why,
                run_dir,
                params,
            )
        self.write_best(study)

    def write_best(self, study: Any) -> None:
        """``best.yaml``: the best trial (value, params, run dir, the overrides that reproduce it)
        and how many trials ended in each state."""
        import optuna

        states: dict[str, int] = {}
        for trial in study.get_trials(deepcopy=False):
            states[trial.state.name] = states.get(trial.state.name, 0) + 1
        record: dict[str, Any] = {
            "study": self.space.study_name,
            "storage": self.url,
            "trials": states,
        }
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        finite = [t for t in complete if t.value is not None and math.isfinite(t.value)]
        if finite:
            best = max(finite, key=lambda t: t.value)
            params = [override(k, v) for k, v in best.params.items()]
            record |= {
                "best_trial": best.number,
                "best_value": best.value,
                "best_params": dict(best.params),
                "best_run_dir": best.user_attrs.get("run_dir"),
                "best_command": " ".join(
                    ["border train", *map(redact_override, self.overrides), *params]
                ),
            }
        write_file(self.study_dir / BEST_FILE, yaml.safe_dump(record, sort_keys=False).encode())


def tune(
    space_name: str,
    overrides: list[str],
    config_dirs: list[str],
    study_dir: Path | None = None,
    n_trials: int | None = None,
    n_jobs: int | str | None = None,
) -> int:
    """Run (or continue) a search; return the exit status."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    entries = search_path(config_dirs)
    space = load_space(space_name, entries)
    where = (study_dir or Path("outputs") / "tune" / space.study_name).expanduser().resolve()
    return Tuner(space, where, overrides, entries, n_trials, n_jobs).run()


def _n_jobs(value: str) -> int | str:
    return value if value == "auto" else int(value)


def tune_command(args: list[str]) -> int:
    """``border tune``: parse the command line, set up the console log, run the search."""
    parser = argparse.ArgumentParser(
        prog="border tune",
        description="Tune hyper-parameters with Optuna: parallel trials, pruning on the eval"
        " curve, a persistent SQLite study.",
        epilog="examples: border tune dqn_cartpole | border tune my_space --config-dir my_conf"
        " --n-trials 50 trainer=serial",
    )
    parser.add_argument("space", help="a search space: tune/<space>.yaml on the config path")
    parser.add_argument("overrides", nargs="*", help="border train overrides for every trial")
    parser.add_argument(
        "--config-dir",
        action="append",
        default=[],
        help="a directory with your own configs (tune/, agent/, env/, ...); repeatable",
    )
    parser.add_argument("--study-dir", type=Path, help="default: outputs/tune/<study_name>")
    parser.add_argument("--n-trials", type=int, help="trials to run now (default: the space's)")
    parser.add_argument(
        "--n-jobs", type=_n_jobs, help="trials at once, or 'auto' (default: the space's)"
    )
    parsed = parser.parse_intermixed_args(args)  # overrides may come before or after options
    from border_py.recorders.console import log_handler

    root = logging.getLogger("border_py")
    root.addHandler(log_handler())
    root.setLevel(logging.INFO)
    try:
        return tune(
            parsed.space,
            parsed.overrides,
            parsed.config_dir,
            parsed.study_dir,
            parsed.n_trials,
            parsed.n_jobs,
        )
    except ConfigError as exc:
        return fail(str(exc))
    except ImportError as exc:
        return fail(f"border tune needs Optuna ({exc}): pip install 'border-py[tune]'")
    except KeyboardInterrupt:
        return 130
