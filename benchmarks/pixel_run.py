"""A real ``border train`` run, measured from outside for ``pixel_bounds.py``: its steady env steps/s
and opt steps/s, and the CPU time of each of its processes over the same stretch.

The run is a subprocess, as a user types it; its process tree is sampled every ``SAMPLE_SECONDS``
(:mod:`psutil`): the ``border train`` process is the learner, its descendants named
``border-actor-<i>`` the actors and ``border-evaluator`` the evaluator (the names the children take,
:func:`border_py.processes.children.show_name`), any other (the forkserver, multiprocessing's
resource tracker) "other". The steady stretch runs from the second training record (the first opt
steps and the warm-up are behind it) to the last: its rates come from the records' own counters
(``perf/env_steps`` at each opt step, ``trainer.log_step=opt_steps``) and wall times.

Where no process of its own evaluates (``trainer=serial``: the learner evaluates between its opt
steps), the evaluator's time is what the record windows an evaluation ends in took beyond the
median window without one.
"""

from __future__ import annotations

import itertools
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

SAMPLE_SECONDS = 0.2
ROLES = ("learner", "actors", "evaluator", "other")


@dataclass
class CpuSamples:
    """Each process's CPU seconds (user + system) at each sample, and its role."""

    times: list[float] = field(default_factory=list)  # time.time() of each sample
    cpu: list[dict[int, float]] = field(default_factory=list)  # pid -> CPU seconds
    roles: dict[int, str] = field(default_factory=dict)

    def take(self, root: psutil.Process) -> None:
        """Sample ``root`` and its descendants now (a process gone meanwhile is skipped)."""
        now, seen = time.time(), {}
        for process in [root, *root.children(recursive=True)]:
            try:
                with process.oneshot():
                    used = process.cpu_times()
                    name = process.name()
            except psutil.Error:
                continue
            seen[process.pid] = used.user + used.system
            self.roles[process.pid] = role_of(process.pid == root.pid, name)
        self.times.append(now)
        self.cpu.append(seen)

    def at(self, moment: float) -> dict[int, float]:
        """Each process's CPU seconds at its last sample at or before ``moment`` (0 before its
        first)."""
        last: dict[int, float] = {}
        for when, seen in zip(self.times, self.cpu, strict=True):
            if when > moment:
                break
            last |= seen
        return last

    def by_role(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each role used from ``start`` to ``end``."""
        before, after = self.at(start), self.at(end)
        used = dict.fromkeys(ROLES, 0.0)
        for pid, seconds in after.items():
            used[self.roles[pid]] += seconds - before.get(pid, 0.0)
        return used


def role_of(is_root: bool, name: str) -> str:
    """The role of a process of the run from whether it is ``border train``'s and its name."""
    if is_root:
        return "learner"
    if name.startswith("border-actor"):
        return "actors"
    if name.startswith("border-evaluat"):  # the kernel keeps 15 bytes of "border-evaluator"
        return "evaluator"
    return "other"


@dataclass(frozen=True)
class RunFigures:
    """What the steady stretch of a run achieved."""

    seconds: float
    env_steps_per_sec: float
    opt_steps_per_sec: float
    cpu: dict[str, float]  # cores each role used on average
    processes: dict[str, int]  # processes of each role the run had
    evaluator_seconds: float  # the evaluator's CPU seconds (serial: the learner's evaluation time)
    evaluations: int  # evaluations ended within the stretch


def run_train(overrides: list[str], run_dir: Path, log: Path) -> CpuSamples:
    """Run ``border train`` with ``overrides`` into ``run_dir`` (its output into ``log``),
    sampling its processes' CPU time until it exits.

    Raises:
        SystemExit: the run failed (the end of its output is printed).
    """
    command = [sys.executable, "-m", "border_py.cli", "train", "progress=false"]
    samples = CpuSamples()
    with log.open("wb") as out:
        child = subprocess.Popen(
            [*command, f"run_dir={run_dir}", *overrides], stdout=out, stderr=subprocess.STDOUT
        )
        root = psutil.Process(child.pid)
        while child.poll() is None:
            samples.take(root)
            time.sleep(SAMPLE_SECONDS)
    if child.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"border train failed (exit {child.returncode}):\n{tail}")
    return samples


def steady_figures(run_dir: Path, samples: CpuSamples) -> RunFigures:
    """The run's rates and CPU use from its second training record to its last.

    Raises:
        SystemExit: fewer than 3 training records (a longer run or a smaller
            ``trainer.record_interval`` is needed), or fewer than 2 CPU samples between the second
            and the last (a longer run is needed).
    """
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    records = acc.Scalars("perf/env_steps")  # step: opt steps (trainer.log_step=opt_steps)
    if len(records) < 3:
        raise SystemExit(
            f"pixel_bounds.py: the run made {len(records)} training records, 3 are needed:"
            " give it more --env-steps (or a smaller trainer.record_interval)"
        )
    first, last = records[1], records[-1]
    seconds = last.wall_time - first.wall_time
    inside = sum(first.wall_time <= t <= last.wall_time for t in samples.times)
    if inside < 2:
        raise SystemExit(
            f"pixel_bounds.py: the run's steady stretch ({seconds:.2f} s) holds {inside} CPU"
            f" sample(s), 2 are needed (one every {SAMPLE_SECONDS} s): give it more --env-steps"
        )
    tags = acc.Tags()["scalars"]
    ends = (
        [e.wall_time for e in acc.Scalars("eval/return_mean")] if "eval/return_mean" in tags else []
    )
    ends = [t for t in ends if first.wall_time < t <= last.wall_time]
    used = samples.by_role(first.wall_time, last.wall_time)
    evaluator = used["evaluator"]
    if not any(role == "evaluator" for role in samples.roles.values()):
        evaluator = in_process_evaluation([r.wall_time for r in records[1:]], ends)
    return RunFigures(
        seconds=seconds,
        env_steps_per_sec=(last.value - first.value) / seconds,
        opt_steps_per_sec=(last.step - first.step) / seconds,
        cpu={role: used[role] / seconds for role in ROLES},
        processes={role: list(samples.roles.values()).count(role) for role in ROLES},
        evaluator_seconds=evaluator,
        evaluations=len(ends),
    )


def in_process_evaluation(walls: list[float], ends: list[float]) -> float:
    """Seconds a learner that evaluates between its opt steps spent evaluating: the record
    windows (between consecutive ``walls``) in which an evaluation ended, less the median
    window without one."""
    windows = list(itertools.pairwise(walls))
    busy = [(a, b) for a, b in windows if any(a < t <= b for t in ends)]
    quiet = [b - a for a, b in windows if (a, b) not in busy]
    if not busy or not quiet:
        return 0.0
    usual = statistics.median(quiet)
    return sum(max(b - a - usual, 0.0) for a, b in busy)
