"""border-py's recipes next to RL Zoo's published scores, seed by seed.

For each recipe (``conf/experiment/<name>.yaml``) and seed, it trains with ``border train
experiment=<name>`` (async trainer, 2 actors) for RL Zoo's env-step budget, stopping early at RL
Zoo's score, then prints a Markdown table: env steps to the Zoo's score (the first evaluation at or
above it), the best evaluation within the Zoo's budget (the maximum of noisy 10-episode
estimates: optimistic), the honest final score (the final weights on ``trainer.final_eval_episodes``
fresh episodes, ``result.json``'s ``final_eval``) and the best checkpoint played on those same
episodes (``best_eval``), and wall-clock seconds (from the start of training, evaluations
included), next to the Zoo's score and budget; above it, a line with the machine (CPU model,
cores, OS), torch's version and the dates the runs finished; below it, ``RESULT {json}``: per
recipe the seeds, those that reached the Zoo's score, those whose ``best_eval`` holds it, and the
mean fresh scores. Seeds 0-4 unless ``--seeds`` says. Runs land in
``<out>/<recipe>/seed_<k>``; a run that already has a ``result.json`` is read, not trained again
(``--force`` retrains), so the table can be extended seed by seed or printed alone (``--table-only``).

``--default`` makes the other table: plain ``border train seed=<k>`` (the recipe that the lookup
applies: ``dqn_cartpole``) with its own budget and target (475), env steps, opt steps and seconds
to the target per seed.

    python benchmarks/zoo_table.py --recipes dqn_cartpole dqn_acrobot --seeds 0 1 2
    python benchmarks/zoo_table.py --table-only
    python benchmarks/zoo_table.py --default --seeds 0 1 2 3 4 5 6 7 8 9
    python benchmarks/zoo_table.py --recipes dqn_acrobot -- trainer.eval_episodes=20
    python benchmarks/zoo_table.py --recipes sac_lunarlandercontinuous --seeds 0 --max-env-steps 30000

``--max-env-steps`` cuts the runs short of the Zoo's budget (when that is hours of CPU time); the
table then marks the budget actually trained. Extra arguments are Hydra overrides for every run. The machine's load changes wall time: run it
alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from cli_args import parse_with_overrides

from border_py.reports.collect import Evaluation, FreshScore, read_run
from border_py.runs.results import read_result


@dataclass(frozen=True)
class Zoo:
    """RL Zoo's published result for one task (rl-baselines3-zoo's benchmark.md)."""

    env_id: str
    score: float  # mean_reward of the trained agent
    budget: int  # n_timesteps: env steps of its training


ZOO = {
    "dqn_cartpole": Zoo("CartPole-v1", 500.0, 50_000),
    "dqn_acrobot": Zoo("Acrobot-v1", -76.639, 100_000),
    "dqn_mountaincar": Zoo("MountainCar-v0", -100.849, 120_000),
    "dqn_lunarlander": Zoo("LunarLander-v3", 154.382, 100_000),  # the Zoo's run: v2
    "sac_pendulum": Zoo("Pendulum-v1", -156.995, 20_000),
    "sac_mountaincarcontinuous": Zoo("MountainCarContinuous-v0", 94.679, 50_000),
    "sac_lunarlandercontinuous": Zoo("LunarLanderContinuous-v3", 260.390, 500_000),  # v2
}
DEFAULT_TARGET = 475.0  # conf/experiment/dqn_cartpole.yaml's target_return
BORDER = [sys.executable, "-m", "border_py.cli", "train"]


def train_run(run_dir: Path, overrides: list[str], force: bool, log: Path) -> None:
    """Train into ``run_dir`` with ``border train <overrides>`` unless a finished run is there."""
    if not force and read_result(run_dir) is not None:
        return
    if run_dir.exists():
        run_dir.rename(run_dir.with_name(f"{run_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}"))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    command = [*BORDER, *overrides, f"run_dir={run_dir}", "progress=false"]
    print("$", " ".join(command[3:]), file=sys.stderr, flush=True)
    with log.open("a") as out:
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)


def first_at(evaluations: list[Evaluation], score: float, budget: int) -> Evaluation | None:
    """The first evaluation within ``budget`` env steps at or above ``score``."""
    for e in evaluations:
        if e.env_steps is not None and e.env_steps <= budget and e.value >= score:
            return e
    return None


def best_within(evaluations: list[Evaluation], budget: int) -> float | None:
    """The best evaluation within ``budget`` env steps."""
    values = [e.value for e in evaluations if e.env_steps is not None and e.env_steps <= budget]
    return max(values) if values else None


def _k(steps: float | None) -> str:
    return "-" if steps is None else f"{steps / 1000:.1f}k"


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.1f}" if values else "-"


def _fresh(score: FreshScore | None) -> str:
    """A final evaluation as ``mean ± std (episodes)``, or ``-``."""
    return "-" if score is None else score.text()


@dataclass
class SeedCells:
    """One table row's runs, seed by seed: the fresh final and best scores as text, the wall
    seconds, and the fresh scores' means (``final_eval``, ``best_eval``) of the runs there are."""

    finals: list[str]
    bests: list[str]
    seconds: list[str]
    fresh: dict[str, list[float]]
    env_steps: set[int]


def seed_cells(run_dirs: list[Path], out: Path) -> SeedCells:
    """The cells of ``run_dirs`` (one a seed; ``(no run)`` where one has no ``result.json``)."""
    cells = SeedCells([], [], [], {"final_eval": [], "best_eval": []}, set())
    for run_dir in run_dirs:
        if read_result(run_dir) is None:
            cells.finals.append("(no run)")
            cells.bests.append("-")
            cells.seconds.append("-")
            continue
        row = read_run(run_dir, out)
        cells.finals.append(_fresh(row.final_eval))
        cells.bests.append(_fresh(row.best_eval))
        for key, score in (("final_eval", row.final_eval), ("best_eval", row.best_eval)):
            if score is not None:
                cells.fresh[key].append(score.mean)
        cells.seconds.append("-" if row.seconds is None else f"{row.seconds:.0f}")
        if row.env_steps is not None:
            cells.env_steps.add(row.env_steps)
    return cells


def zoo_rows(out: Path, recipes: list[str], seeds: list[int]) -> tuple[list[str], dict]:
    """The recipes' table (Markdown lines) from the runs in ``out``: per seed, env steps to the
    Zoo's score, the best evaluation within the Zoo's budget (with the env steps trained when a
    run stopped short of both), the final score on fresh episodes, the best checkpoint on those
    episodes, and wall seconds; and per recipe, the figures of the ``RESULT`` line (seeds that
    reached the Zoo's score, seeds whose ``best/`` holds it on fresh episodes, the mean fresh
    scores)."""
    lines = [
        "| recipe | RL Zoo score @ budget | reached | env steps to the Zoo score (per seed)"
        " | best within the budget (per seed) | final score, fresh episodes (per seed)"
        " | best re-evaluated (per seed) | wall s (per seed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    figures = {}
    for name in recipes:
        zoo = ZOO[name]
        hits, bests, finals, rebests, seconds = [], [], [], [], []
        fresh: dict[str, list[float]] = {"final_eval": [], "best_eval": []}
        for seed in seeds:
            run_dir = out / name / f"seed_{seed}"
            if read_result(run_dir) is None:
                hits.append("(no run)")
                for column in (bests, finals, rebests, seconds):
                    column.append("-")
                continue
            row = read_run(run_dir, out)
            hit = first_at(row.evaluations, zoo.score, zoo.budget)
            best = best_within(row.evaluations, zoo.budget)
            hits.append(_k(hit.env_steps) if hit else "not reached")
            short = hit is None and (row.env_steps or 0) < zoo.budget
            trained = f" (at {_k(row.env_steps)})" if short else ""
            bests.append("-" if best is None else f"{best:.1f}{trained}")
            finals.append(_fresh(row.final_eval))
            rebests.append(_fresh(row.best_eval))
            for key, score in (("final_eval", row.final_eval), ("best_eval", row.best_eval)):
                if score is not None:
                    fresh[key].append(score.mean)
            seconds.append("-" if row.seconds is None else f"{row.seconds:.0f}")
        reached = sum(h.endswith("k") for h in hits)
        lines.append(
            f"| {name} ({zoo.env_id}) | {zoo.score:.1f} @ {_k(zoo.budget)} | {reached}/{len(seeds)}"
            f" | {' / '.join(hits)} | {' / '.join(bests)} | {' / '.join(finals)}"
            f" | {' / '.join(rebests)} | {' / '.join(seconds)} |"
        )
        figures[name] = {
            "seeds": len(seeds),
            "reached": reached,
            "best_eval_at_zoo_score": sum(v >= zoo.score for v in fresh["best_eval"]),
            **{f"{key}_mean": round(statistics.fmean(v), 2) for key, v in fresh.items() if v},
        }
    return lines, figures


def default_rows(out: Path, seeds: list[int]) -> tuple[list[str], dict]:
    """The 10-seed table of plain ``border train`` (Markdown lines) from the runs in ``out``, and
    the figures of its ``RESULT`` line (seeds, seeds that reached the target)."""
    lines = [
        "| seed | solved (>= 475) | env steps | opt steps | seconds | best (selection)"
        " | final score (fresh episodes) | best re-evaluated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    env, opt, secs = [], [], []
    for seed in seeds:
        result = read_result(out / f"seed_{seed}")
        summary = (result or {}).get("summary") or {}
        hit = summary.get("solved_at")
        best = summary.get("best_return")
        best_text = "-" if best is None or not math.isfinite(best) else f"{best:.1f}"
        fresh = [_fresh(FreshScore.read(summary.get(key))) for key in ("final_eval", "best_eval")]
        scores = f"{best_text} | {fresh[0]} | {fresh[1]}"
        if hit:
            env.append(hit["env_steps"])
            opt.append(hit["opt_steps"])
            secs.append(hit["seconds"])
            lines.append(
                f"| {seed} | yes | {hit['env_steps']} | {hit['opt_steps']} |"
                f" {hit['seconds']:.1f} | {scores} |"
            )
        else:
            status = "no run" if result is None else f"no ({result['status']})"
            lines.append(f"| {seed} | {status} | - | - | - | {scores} |")
    lines.append(
        f"| mean | {len(env)}/{len(seeds)} | {_mean(env)} | {_mean(opt)} | {_mean(secs)} | | | |"
    )
    return lines, {"seeds": len(seeds), "solved": len(env)}


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def caption(run_dirs: list[Path], setup: str) -> str:
    """Where and when the table's runs were measured: the machine (CPU model, cores, OS), torch's
    version, the dates the runs finished (their ``result.json``'s modification times), and
    ``setup`` (how they were trained)."""
    days = sorted(
        {
            datetime.date.fromtimestamp((d / "result.json").stat().st_mtime).isoformat()
            for d in run_dirs
            if (d / "result.json").is_file()
        }
    )
    when = "no runs yet" if not days else days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return (
        f"Measured {when} on {cpu_model()} ({os.cpu_count()} cores, {platform.system()}),"
        f" torch {torch.__version__}; {setup}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=list(ZOO), choices=list(ZOO))
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("outputs/zoo"))
    parser.add_argument("--default", action="store_true", help="the 10-seed CartPole table")
    parser.add_argument("--table-only", action="store_true", help="read the runs, train none")
    parser.add_argument("--force", action="store_true", help="train again over finished runs")
    parser.add_argument(
        "--max-env-steps", type=int, default=None, help="train fewer env steps than the Zoo"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = parse_with_overrides(parser)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "train.log"
    if args.default:
        seeds = args.seeds if args.seeds is not None else list(range(10))
        out = out / "default"
        for seed in seeds if not args.table_only else []:
            train_run(out / f"seed_{seed}", [f"seed={seed}", *args.overrides], args.force, log)
        print(caption([out / f"seed_{seed}" for seed in seeds], "plain `border train`") + "\n")
        lines, figures = default_rows(out, seeds)
        print("\n".join(lines))
        print("RESULT " + json.dumps(figures))
        return
    seeds = args.seeds if args.seeds is not None else [0, 1, 2, 3, 4]
    for name in args.recipes if not args.table_only else []:
        zoo = ZOO[name]
        for seed in seeds:
            overrides = [
                f"experiment={name}",
                f"seed={seed}",
                "trainer=async",
                "actor_manager.n_actors=2",
                "trainer.max_opts=null",
                f"trainer.max_env_steps={args.max_env_steps or zoo.budget}",
                f"trainer.target_return={zoo.score}",
                *args.overrides,
            ]
            train_run(out / name / f"seed_{seed}", overrides, args.force, log)
    runs = [out / name / f"seed_{seed}" for name in args.recipes for seed in seeds]
    print(caption(runs, "async trainer, 2 actors") + "\n")
    lines, figures = zoo_rows(out, args.recipes, seeds)
    print("\n".join(lines))
    print("RESULT " + json.dumps(figures))


if __name__ == "__main__":
    main()
