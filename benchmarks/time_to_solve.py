"""Time to solve CartPole-v1 with plain ``border train`` (the looked-up ``dqn_cartpole`` recipe), per
seed, optionally back to back with Stable-Baselines3's DQN; MinAtar Breakout's recipe too.

Each seed runs ``border train seed=<k>`` as a whole process, as a user types it, and reports its
wall time (start-up, training, the final evaluation and checkpoint, the exit) and, from its
``result.json``, the env steps and seconds of training to the first greedy evaluation with
``eval/return_mean`` at the target (CartPole's recipe: 10 episodes, 475). With ``--sb3`` (this
Python: ``pip install -e ".[bench]"``) or ``--sb3-python PYTHON`` (a venv of its own) each seed is
followed at once by SB3's run as a whole process: ``benchmarks/sb3_dqn_cartpole.py`` (RL Zoo's
tuned CartPole DQN, stopped at the first evaluation >= 475) by default, and for
``experiment=dqn_minatar_breakout`` ``benchmarks/sb3_dqn_minatar.py``, SB3's DQN given the recipe
as composed with the same overrides (its network, batch, replay, warm-up, update and target
periods, exploration, optimizer, evaluation, target and budget; that Python needs border-py and
its ``[minatar]`` extra too), whose settings are printed first. Each seed's whole-process ratio,
border / SB3, follows its two rows (where both reached the target); the last lines are the
largest of them and the ratio of the median whole-process times. This machine's speed drifts:
only figures taken in one invocation compare.

    python benchmarks/time_to_solve.py --seeds 0 1 2 3 4 --sb3
    python benchmarks/time_to_solve.py --seeds 0 1 2 trainer=serial   # extra Hydra overrides
    python benchmarks/time_to_solve.py --seeds 0 1 2 --target -200 agent=sac env=pendulum
    python benchmarks/time_to_solve.py --seeds 3 4 5 --sb3 --target 5 experiment=dqn_minatar_breakout
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


# The recipes (experiment=, none: CartPole's looked up) of each SB3 baseline: RL Zoo's CartPole DQN,
# or one that reads the recipe (``--prepare`` it once, ``--config`` each seed)
CARTPOLE_RECIPES = (None, "dqn_cartpole", "iqn_cartpole")
RECIPE_BASELINES = {"dqn_minatar_breakout": "sb3_dqn_minatar.py"}


def sb3_command(python: str, overrides: list[str], tmp: Path) -> list[str]:
    """The SB3 baseline's command, less the seed: RL Zoo's CartPole DQN for the CartPole recipes
    (:data:`CARTPOLE_RECIPES`), else the recipe's own (:data:`RECIPE_BASELINES`) given the recipe
    as ``overrides`` compose it, prepared here once (its SB3 settings printed).

    Raises:
        SystemExit: no baseline for the experiment (2), or the baseline refused the recipe (its
            one-line error, its exit status).
    """
    name = next((w.partition("=")[2] for w in overrides if w.startswith("experiment=")), None)
    if name in CARTPOLE_RECIPES:
        return [python, str(HERE / "sb3_dqn_cartpole.py")]
    if name not in RECIPE_BASELINES:
        known = ", ".join([*CARTPOLE_RECIPES[1:], *RECIPE_BASELINES])
        print(
            f"--sb3: no SB3 baseline for experiment={name} (only for none, {known})",
            file=sys.stderr,
        )
        raise SystemExit(2)
    script, config = str(HERE / RECIPE_BASELINES[name]), str(tmp / "sb3_recipe.json")
    done = subprocess.run(
        [python, script, "--prepare", config, *overrides], capture_output=True, text=True
    )
    if done.returncode:
        print((done.stderr.strip().splitlines() or ["failed"])[-1], file=sys.stderr)
        raise SystemExit(done.returncode)
    print(done.stdout.strip().splitlines()[-1], flush=True)
    return [python, script, "--config", config]


def run_sb3(seed: int, command: list[str]) -> dict:
    """One whole SB3 process: its wall time and the JSON line it printed."""
    start = time.perf_counter()
    out = subprocess.run([*command, str(seed)], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    last = out.stdout.strip().splitlines()[-1]
    return {"wall": wall, **json.loads(last.removeprefix("RESULT "))}


def wall_ratio(ours: dict, theirs: dict) -> float | None:
    """border's whole-process time over SB3's for one seed, where both reached the target."""
    if ours["seconds"] is None or theirs["seconds"] is None:
        return None
    return ours["wall"] / theirs["wall"]


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
    ratios: dict[str, float | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sb3 = sb3_command(args.sb3_python, args.overrides, Path(tmp)) if args.sb3_python else None
        for seed in args.seeds:
            ours.append(run_border(seed, args.overrides, Path(tmp)))
            print(_row("border", seed, ours[-1]), flush=True)
            if sb3:
                theirs.append(run_sb3(seed, sb3))
                print(_row("SB3", seed, theirs[-1]), flush=True)
                ratio = ratios[str(seed)] = wall_ratio(ours[-1], theirs[-1])
                shown = "not both solved" if ratio is None else f"{ratio:.2f}x"
                print(f"seed {seed}: whole process, border / SB3: {shown}", flush=True)
    result: dict[str, object] = {}
    for name, rows in (("border", ours), ("SB3", theirs)):
        if rows:
            solved = sum(r["seconds"] is not None for r in rows)
            wall = statistics.median(r["wall"] for r in rows)
            result[f"{name.lower()}_solved"] = solved
            result[f"{name.lower()}_median_wall_s"] = round(wall, 2)
            print(f"{name}: solved {solved}/{len(rows)}, median whole process {wall:.1f} s")
    if theirs:
        both = [round(r, 3) for r in ratios.values() if r is not None]
        largest = max(both) if len(both) == len(ratios) else None
        result["wall_ratio_by_seed"] = {k: r and round(r, 3) for k, r in ratios.items()}
        result["wall_ratio_max"] = largest
        shown = "a seed not solved by both" if largest is None else f"{largest:.2f}x"
        print(f"largest per-seed whole-process ratio, border / SB3: {shown}")
        ratio = statistics.median(r["wall"] for r in ours) / statistics.median(
            r["wall"] for r in theirs
        )
        result["wall_ratio_border_vs_sb3"] = round(ratio, 3)
        print(f"median whole-process time, border / SB3: {ratio:.2f}x")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
