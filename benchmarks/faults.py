"""Fault figures: how fast the runtime cleans up and recovers, measured on the real command.

    python benchmarks/faults.py                # all three measurements
    python benchmarks/faults.py --kills 20     # the stress test's number of kills

1. ``kill -9`` of the main ``border train`` process: seconds until its last descendant (actors,
   evaluator, forkserver, resource tracker) is gone, for both start methods.
2. A hung env (``step`` never returns) in one actor: seconds from the hang to the learner's
   "silent for" line, with ``actor_manager.heartbeat_timeout=2``.
3. Repeated ``kill -9`` of random actors (large ``n_buffer``): restarts, whether the run
   completed, and the transition accounting afterwards (sent must equal received: a batch is
   either announced whole or never).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
BORDER = [sys.executable, "-m", "border_py.cli", "train"]
SMALL = [
    "experiment=none",  # the runtime, not a recipe that stops once CartPole is solved
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_episodes=2",
    "progress=false",
]


def marked(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries ``BORDER_BENCH_MARKER=<marker>``."""
    found = []
    for p in psutil.process_iter():
        try:
            if (
                p.environ().get("BORDER_BENCH_MARKER") == marker
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def start(args: list[str], cwd: Path, marker: str) -> subprocess.Popen:
    env = {**os.environ, "BORDER_BENCH_MARKER": marker, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [*BORDER, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_log(run: Path, text: str, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        log = run / "train.log"
        if log.is_file() and text in log.read_text():
            return
        time.sleep(0.1)
    raise RuntimeError(f"no {text!r} in {run}/train.log")


def kill_main(start_method: str, tmp: Path) -> float:
    marker, run = uuid.uuid4().hex, tmp / f"kill-{start_method}-{uuid.uuid4().hex[:6]}"
    proc = start(
        [
            *SMALL,
            "trainer.max_opts=1000000",
            "trainer.eval_interval=100",
            "actor_manager.n_actors=3",
            f"actor_manager.start_method={start_method}",
            f"run_dir={run}",
        ],
        tmp,
        marker,
    )
    wait_log(run, "opt 100 |")
    proc.kill()
    proc.wait()
    began = time.monotonic()
    while marked(marker) and time.monotonic() - began < 30:
        time.sleep(0.01)
    return time.monotonic() - began


def hang_detection(tmp: Path) -> float:
    marker, run, flag = (
        uuid.uuid4().hex,
        tmp / f"hang-{uuid.uuid4().hex[:6]}",
        tmp / f"flag-{uuid.uuid4().hex[:6]}",
    )
    proc = start(
        [
            *SMALL,
            "env=gym",
            "env.id=tests.hang_env:HangOnce-v0",
            "+env.kwargs.hang_after=150",
            f"+env.kwargs.flag={flag}",
            "actor_manager.n_actors=1",  # the learner waits for the restart: the run outlasts the hang
            "actor_manager.heartbeat_timeout=2",
            "trainer.max_opts=600",
            "trainer.eval_interval=300",
            f"run_dir={run}",
        ],
        tmp,
        marker,
    )
    proc.wait(timeout=300)
    line = next(x for x in (run / "train.log").read_text().splitlines() if "silent for" in x)
    stamp = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return stamp - flag.stat().st_mtime


def kill_stress(kills: int, tmp: Path) -> dict:
    marker, run = uuid.uuid4().hex, tmp / f"stress-{uuid.uuid4().hex[:6]}"
    proc = start(
        [
            *SMALL,
            "trainer.max_opts=100000",
            "trainer.eval_interval=1000",
            "actor_manager.n_actors=4",
            "actor_manager.n_buffer=2000",
            "actor_manager.queue_size=2",
            f"actor_manager.max_restarts={kills}",
            f"run_dir={run}",
        ],
        tmp,
        marker,
    )
    wait_log(run, "opt 1000 |")
    main = psutil.Process(proc.pid)
    (server,) = [c for c in main.children() if "forkserver" in " ".join(c.cmdline())]
    evaluator = min(server.children(), key=lambda p: p.create_time())
    rng = random.Random(0)
    for _ in range(kills):
        actors = [p for p in server.children() if p.pid != evaluator.pid]
        rng.choice(actors).kill()
        time.sleep(rng.uniform(0.3, 1.2))
    proc.wait(timeout=900)
    exited = time.monotonic()
    while marked(marker) and time.monotonic() - exited < 10:  # the forkserver exits last
        time.sleep(0.01)
    gone = time.monotonic() - exited
    result = json.loads((run / "result.json").read_text())
    log = (run / "train.log").read_text()
    return {
        "status": result["status"],
        "exit": proc.returncode,
        "restarts": result["summary"]["restarts"],
        "accounting": result["summary"]["accounting"],
        "killed lines": len(re.findall(r"actor \d died \(exit code -9\)", log)),
        "left after 10 s": len(marked(marker)),
        "all gone after s": round(gone, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    args = parser.parse_args()
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        for method in ("forkserver", "spawn"):
            times = [kill_main(method, tmp) for _ in range(args.repeats)]
            result[f"kill_main_{method}_gone_after_s"] = [round(t, 2) for t in times]
            print(
                f"kill -9 of main ({method}): last descendant gone after "
                + ", ".join(f"{t:.2f}" for t in times)
                + " s"
            )
        hangs = [hang_detection(tmp) for _ in range(args.repeats)]
        result["hang_detected_after_s"] = [round(t, 2) for t in hangs]
        print(
            "hung env, heartbeat_timeout=2: detected after "
            + ", ".join(f"{t:.2f}" for t in hangs)
            + " s"
        )
        stress = kill_stress(args.kills, tmp)
        print(f"{args.kills} kill -9 of random actors (n_buffer 2000):", stress)
        result["actor_kills"] = {"kills": args.kills, **stress}
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
