"""Time to solve CartPole-v1 with plain ``border train`` (the looked-up ``dqn_cartpole`` recipe), per
seed, optionally back to back with Stable-Baselines3's tuned DQN.

Each seed runs ``border train seed=<k>`` as a whole process, as a user types it, and reports its
wall time (start-up, training, the final evaluation and checkpoint, the exit) and, from its
``result.json``, the env steps and seconds of training to the first 10-episode greedy evaluation
with ``eval/return_mean >= 475``. With ``--sb3`` (this Python: ``pip install -e ".[bench]"``) or
``--sb3-python PYTHON`` (a venv of its own) each seed is followed at once by
``benchmarks/sb3_dqn_cartpole.py`` (RL Zoo's tuned CartPole DQN, stopped at the first evaluation >=
475), and the last line is the ratio of the median whole-process times. This machine's speed
drifts: only figures taken in one invocation compare.

    python benchmarks/time_to_solve.py --seeds 0 1 2 3 4 --sb3
    python benchmarks/time_to_solve.py --seeds 0 1 2 trainer=serial   # extra Hydra overrides
    python benchmarks/time_to_solve.py --seeds 0 1 2 --target -200 agent=sac env=pendulum
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cli_args import parse_with_overrides

HERE = Path(__file__).resolve().parent


def run_border(seed: int, overrides: list[str], tmp: Path) -> dict:
    """One whole ``border train`` process: its wall time and the summary it recorded."""
    run = tmp / f"border_{seed}"
    command = [sys.executable, "-m", "border_py.cli", "train", f"seed={seed}", "progress=false"]
    start = time.perf_counter()
    subprocess.run([*command, f"run_dir={run}", *overrides], check=True, capture_output=True)
    wall = time.perf_counter() - start
    summary = json.loads((run / "result.json").read_text())["summary"]
    hit = summary.get("solved_at") or {}
    return {
        "wall": wall,
        "env_steps": hit.get("env_steps"),
        "opt_steps": hit.get("opt_steps"),
        "seconds": hit.get("seconds"),
    }


def run_sb3(seed: int, python: str) -> dict:
    """One whole SB3 process: its wall time and the JSON line it printed."""
    start = time.perf_counter()
    out = subprocess.run(
        [python, str(HERE / "sb3_dqn_cartpole.py"), str(seed)],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    last = out.stdout.strip().splitlines()[-1]
    return {"wall": wall, **json.loads(last.removeprefix("RESULT "))}


def _row(name: str, seed: int, r: dict) -> str:
    if r["seconds"] is None:
        return f"{name:6s} seed {seed}: not solved, whole process {r['wall']:6.1f} s"
    opts = f" ({r['opt_steps']} opt steps)" if r.get("opt_steps") is not None else ""
    return (
        f"{name:6s} seed {seed}: {r['env_steps']:>7d} env steps{opts}, {r['seconds']:6.1f} s of"
        f" training, whole process {r['wall']:6.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    sb3 = parser.add_mutually_exclusive_group()
    sb3.add_argument("--sb3", dest="sb3_python", action="store_const", const=sys.executable)
    sb3.add_argument("--sb3-python", default=None, help="another Python with stable-baselines3")
    parser.add_argument("--target", type=float, default=None, help="(default: the recipe's)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. trainer=serial")
    args = parse_with_overrides(parser)
    if args.target is not None:
        args.overrides.append(f"trainer.target_return={args.target}")
    ours: list[dict] = []
    theirs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            ours.append(run_border(seed, args.overrides, Path(tmp)))
            print(_row("border", seed, ours[-1]), flush=True)
            if args.sb3_python:
                theirs.append(run_sb3(seed, args.sb3_python))
                print(_row("SB3", seed, theirs[-1]), flush=True)
    result: dict[str, float | int] = {}
    for name, rows in (("border", ours), ("SB3", theirs)):
        if rows:
            solved = sum(r["seconds"] is not None for r in rows)
            wall = statistics.median(r["wall"] for r in rows)
            result[f"{name.lower()}_solved"] = solved
            result[f"{name.lower()}_median_wall_s"] = round(wall, 2)
            print(f"{name}: solved {solved}/{len(rows)}, median whole process {wall:.1f} s")
    if theirs:
        ratio = statistics.median(r["wall"] for r in ours) / statistics.median(
            r["wall"] for r in theirs
        )
        result["wall_ratio_border_vs_sb3"] = round(ratio, 3)
        print(f"median whole-process time, border / SB3: {ratio:.2f}x")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
