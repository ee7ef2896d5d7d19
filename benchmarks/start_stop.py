"""Start-up and the end of ``border train``, measured alternately in one invocation (medians of
``--repeats``).

Start-up: seconds from launching ``border train`` to its first env step, against importing torch
and gymnasium (the floor of any torch RL tool). The run trains CartPole-v1
(``first_step_env:FirstStep-v0``, CartPole that writes the wall-clock time of the first step any
process takes) with the default async trainer and 2 actors, so the figure covers composing and
checking the config, the forkserver, the actors' imports and their first weights.
``border train --cfg job`` (compose and check, build nothing) is timed too.

The end: the same run trains 500 opt steps; from its log line ``stopping at opt 500`` (the budget
reached) to the exit of border's own process (the forkserver it leaves goes a moment later), split
into stopping the actors and the final evaluation (up to the log line of its result), the final
checkpoint (its ``meta.json`` written), and the rest: the evaluator stopped, the recorders closed,
the summary, the interpreter's exit; then how long after border's exit the forkserver (which border
leaves to exit on its own, and which holds border's stdout and stderr) is gone, as a program reading
border's output through a pipe sees it.

    python benchmarks/start_stop.py [--repeats 5] [extra Hydra overrides...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPTS = 500  # the run's budget
BORDER = [sys.executable, "-m", "border_py.cli"]


def _wall(command: list[str], env: dict[str, str]) -> float:
    start = time.time()
    subprocess.run(command, env=env, check=True, capture_output=True)
    return time.time() - start


def _log_time(log: str, marker: str) -> float:
    """The wall-clock time of the last log line containing ``marker``."""
    line = [row for row in log.splitlines() if marker in row][-1]
    return datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _run(overrides: list[str], env: dict[str, str], tmp: Path, k: int) -> dict[str, float]:
    """One ``border train``: seconds to its first env step, and the stages of its end."""
    stamp, run = tmp / f"stamp_{k}", tmp / f"run_{k}"
    command = [
        *BORDER,
        "train",
        "env=gym",
        "env.id=first_step_env:FirstStep-v0",
        f"+env.kwargs.stamp={stamp}",
        f"trainer.max_opts={OPTS}",
        "trainer.warmup_period=500",
        f"trainer.eval_interval={OPTS}",
        "progress=false",
        f"run_dir={run}",
        *overrides,
    ]
    start = time.time()
    # the wait ends when border's own process exits; its stdout's EOF, when every process holding
    # it has (the forkserver, which border leaves to exit on its own, last)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    eof: list[float] = []
    reader = threading.Thread(target=lambda: (process.stdout.read(), eof.append(time.time())))
    reader.start()
    if process.wait() != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    exited = time.time()
    reader.join(60)
    log = (run / "train.log").read_text()
    stopping = _log_time(log, f"stopping at opt {OPTS}")
    evaluated = _log_time(log, f"opt {OPTS} | env steps")
    saved = max(p.stat().st_mtime for p in (run / "checkpoints").glob("*/meta.json"))
    return {
        "first_step": float(stamp.read_text()) - start,
        "end": exited - stopping,
        "final_eval": evaluated - stopping,
        "checkpoint": saved - evaluated,
        "rest": exited - saved,
        "forkserver": eof[0] - exited,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the run")
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    imports, cfg_job, runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):  # alternately, so drift hits all three alike
            imports.append(_wall([sys.executable, "-c", "import torch, gymnasium"], env))
            runs.append(_run(args.overrides, env, Path(tmp), k))
            cfg_job.append(_wall([*BORDER, "train", "--cfg", "job"], env))
    base = statistics.median(imports)
    n = len(runs)
    result: dict[str, float] = {}
    for key, name, values in (
        ("imports", "import torch, gymnasium", imports),
        ("first_step", "border train: first env step", [r["first_step"] for r in runs]),
        ("cfg_job", "border train --cfg job", cfg_job),
    ):
        median = statistics.median(values)
        result[f"{key}_vs_imports"] = round(median / base, 3)
        print(f"{name:32s} {median:5.2f} s (median of {n})  {median / base:4.2f}x imports")
    print(f"the end, from 'stopping at opt {OPTS}' to the exit (median of {n}):")
    for key, name in (
        ("end", "all of it"),
        ("final_eval", "stopping the actors + the final evaluation"),
        ("checkpoint", "the final checkpoint"),
        ("rest", "the rest (evaluator, recorders, summary, interpreter exit)"),
        ("forkserver", "then, after border's exit, the forkserver's (EOF of stdout)"),
    ):
        median = statistics.median(r[key] for r in runs)
        result[f"{key}_s"] = round(median, 3)
        print(f"  {name:58s} {median:5.2f} s")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
