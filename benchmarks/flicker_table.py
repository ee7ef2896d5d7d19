"""Flickering MinAtar Breakout: R2D2 against DQN on single frames and on a 4-frame stack, by seed.

The screen is blanked whole with probability 0.5 at each step (``env.flicker``, as DRQN's
flickering Atari). Each recipe (``conf/experiment/<recipe>.yaml``: 200k env steps, serial
trainer) is trained once per seed with ``border train experiment=<recipe> seed=<k>``; the table
gives per recipe and seed the honest final score (the final weights on 100 fresh episodes,
``result.json``'s ``final_eval``), the best checkpoint on those episodes (``best_eval``) and the
wall-clock seconds, then the mean over seeds of each. Above it, a line with the machine and the
dates; below it, ``RESULT {json}``.

Runs land in ``<out>/<recipe>/seed_<k>``; a run with a ``result.json`` is read, not trained again
(``--force`` retrains), so the table grows seed by seed or prints alone (``--table-only``).

    python benchmarks/flicker_table.py --seeds 0 1 2
    python benchmarks/flicker_table.py --recipes r2d2_minatar_flickering_breakout --seeds 0
    python benchmarks/flicker_table.py --table-only

Extra ``key=value`` arguments are Hydra overrides for every run. The R2D2 recipe was not tuned
(its first settings); seed 0 is the one its settings were first tried on. One run takes five to
fifteen minutes on two cores, longer on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from cli_args import parse_with_overrides
from zoo_table import caption, seed_cells, train_run

RECIPES = {
    "r2d2_minatar_flickering_breakout": "R2D2 (LSTM on the MinAtar torso)",
    "dqn_minatar_flickering_breakout_stacked": "DQN, 4-frame stack",
    "dqn_minatar_flickering_breakout": "DQN, single frames",
}


def _mean(values: list[float]) -> str:
    """The mean over seeds, with the seeds' standard deviation from two seeds on."""
    if not values:
        return "-"
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.2f}{spread}"


def rows(out: Path, recipes: list[str], seeds: list[int]) -> tuple[list[str], dict]:
    """The table (Markdown lines) from the runs in ``out`` and the ``RESULT`` figures: per recipe
    the fresh final and best scores by seed, their means over seeds and the wall seconds."""
    lines = [
        "| recipe | agent | final weights, fresh episodes (per seed) | best checkpoint, same"
        " episodes (per seed) | mean final / best over seeds | wall s (per seed) |",
        "|---|---|---|---|---|---|",
    ]
    figures: dict[str, dict] = {}
    for recipe in recipes:
        cells = seed_cells([out / recipe / f"seed_{seed}" for seed in seeds], out)
        finals, bests, seconds, fresh = cells.finals, cells.bests, cells.seconds, cells.fresh
        lines.append(
            f"| `{recipe}` | {RECIPES[recipe]} | {' / '.join(finals)} | {' / '.join(bests)}"
            f" | {_mean(fresh['final_eval'])} / {_mean(fresh['best_eval'])}"
            f" | {' / '.join(seconds)} |"
        )
        figures[recipe] = {
            "seeds": len(seeds),
            "runs": len(fresh["final_eval"]),
            **{f"{k}_mean": round(statistics.fmean(v), 3) for k, v in fresh.items() if v},
            **{f"{k}_per_seed": [round(x, 3) for x in v] for k, v in fresh.items()},
        }
    return lines, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("outputs/flicker"))
    parser.add_argument("--table-only", action="store_true", help="read the runs, train none")
    parser.add_argument("--force", action="store_true", help="train again over finished runs")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = parse_with_overrides(parser)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds if not args.table_only else []:
        for recipe in args.recipes:
            run = [f"experiment={recipe}", f"seed={seed}", *args.overrides]
            train_run(out / recipe / f"seed_{seed}", run, args.force, out / "train.log")
    runs = [out / r / f"seed_{s}" for r in args.recipes for s in args.seeds]
    print(caption(runs, "serial trainer, one process a run, 200k env steps") + "\n")
    lines, figures = rows(out, args.recipes, args.seeds)
    print("\n".join(lines))
    print("RESULT " + json.dumps(figures))


if __name__ == "__main__":
    main()
