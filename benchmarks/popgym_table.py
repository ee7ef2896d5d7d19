"""R2D2's POPGym recipes beside DQN without memory, seed by seed, against the published figures.

For each task and seed it trains R2D2 with the recipe the lookup applies (``border train
agent=r2d2 env=popgym env.id=popgym-<Task>-v0 seed=<k>``: ``conf/experiment/r2d2_popgym_<task>.yaml``)
and DQN on the same env with the same budget (the recipe's env steps, envs per actor, discount,
evaluations and ``final_eval_episodes``; DQN's own network and defaults otherwise: one opt step of
128 transitions per 4 env steps, as the recipes' one opt step of 32 sequences), then prints a
Markdown table: per task and agent the honest final score (the final weights on the recipe's 100
fresh episodes, ``result.json``'s ``final_eval``) and the best checkpoint played on those episodes
(``best_eval``) per seed, the seeds at or above the bar (0.9) and wall-clock seconds per run, next
to the published DQN-with-memory score (Morad et al., NeurIPS 2024, read from its figure) and the
memoryless level. Above it, a line with the machine and the dates; below it, ``RESULT {json}``.

Runs land in ``<out>/<task>/<agent>/seed_<k>``; a run with a ``result.json`` is read, not trained
again (``--force`` retrains), so the table grows seed by seed or prints alone (``--table-only``).

    python benchmarks/popgym_table.py --seeds 0 1 2
    python benchmarks/popgym_table.py --tasks RepeatPreviousEasy --agents r2d2
    python benchmarks/popgym_table.py --table-only

Extra ``key=value`` arguments are Hydra overrides for every run. Seeds 0-2 by default (seed 0 is the
one the recipes were tuned on: say so beside the figures). The machine's load changes wall time.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml
from cli_args import parse_with_overrides
from zoo_table import caption, seed_cells, train_run

from border_py.config import config_dir

BAR = 0.9  # the bar for the recurrent agent, on each seed


@dataclass(frozen=True)
class Published:
    """The published scores of one POPGym task (r2d2.md section 2.2: memory-monoids' figure)."""

    memory: str  # DQN with memory, the best model
    memoryless: str  # a policy that cannot recall


TASKS = {
    "RepeatPreviousEasy": Published("1.0", "about -0.5"),
    "RepeatFirstEasy": Published("1.0", "about -0.5"),
    "PositionOnlyCartPoleEasy": Published("about 1.0", "not published"),
}
AGENTS = ("r2d2", "dqn")


def recipe(task: str) -> dict:
    """The shipped R2D2 recipe of ``task`` (its YAML), or {} when it has none."""
    path = config_dir() / "experiment" / f"r2d2_popgym_{task.lower()}.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {}


def overrides(task: str, agent: str, seed: int) -> list[str]:
    """The ``border train`` command line of one run: R2D2 by the lookup, DQN on its budget."""
    task_args = ["env=popgym", f"env.id=popgym-{task}-v0", f"seed={seed}"]
    if agent == "r2d2":
        return ["agent=r2d2", *task_args]
    spec = recipe(task)
    trainer, agent_spec = spec.get("trainer", {}), spec.get("agent", {})
    keys = ("max_env_steps", "warmup_period", "eval_env_interval", "eval_episodes")
    return [
        "agent=dqn",
        *task_args,
        "trainer=serial",
        "trainer.max_opts=null",
        "trainer.eval_interval=null",
        *(f"trainer.{key}={trainer[key]}" for key in keys if key in trainer),
        f"trainer.final_eval_episodes={trainer.get('final_eval_episodes', 100)}",
        f"agent.gamma={agent_spec.get('gamma', 0.99)}",
        f"actor_manager.n_envs_per_actor={spec.get('actor_manager', {}).get('n_envs_per_actor', 1)}",
    ]


def rows(
    out: Path, tasks: list[str], agents: list[str], seeds: list[int]
) -> tuple[list[str], dict]:
    """The table (Markdown lines) from the runs in ``out`` and the ``RESULT`` figures: per task and
    agent the seeds, those whose final (and best) weights reach :data:`BAR` on fresh episodes, the
    mean fresh scores and the mean wall seconds."""
    lines = [
        "| task | published: DQN + memory / memoryless | agent | env steps | final weights, fresh"
        " episodes (per seed) | best checkpoint, same episodes (per seed) | seeds >= 0.9"
        " final / best | wall s (per seed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    figures: dict[str, dict] = {}
    for task in tasks:
        for agent in agents:
            cells = seed_cells([out / task / agent / f"seed_{seed}" for seed in seeds], out)
            finals, bests, seconds, fresh = cells.finals, cells.bests, cells.seconds, cells.fresh
            steps = {f"{n / 1000:.0f}k" for n in cells.env_steps}
            at_bar = {key: sum(v >= BAR for v in values) for key, values in fresh.items()}
            published = TASKS[task]
            lines.append(
                f"| {task} | {published.memory} / {published.memoryless} | {agent}"
                f" | {', '.join(sorted(steps)) or '-'} | {' / '.join(finals)}"
                f" | {' / '.join(bests)} | {at_bar['final_eval']}/{len(seeds)}"
                f" / {at_bar['best_eval']}/{len(seeds)} | {' / '.join(seconds)} |"
            )
            figures.setdefault(task, {})[agent] = {
                "seeds": len(seeds),
                "runs": len(fresh["final_eval"]),
                "final_at_bar": at_bar["final_eval"],
                "best_at_bar": at_bar["best_eval"],
                **{f"{k}_mean": round(statistics.fmean(v), 3) for k, v in fresh.items() if v},
            }
    return lines, figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("outputs/popgym"))
    parser.add_argument("--table-only", action="store_true", help="read the runs, train none")
    parser.add_argument("--force", action="store_true", help="train again over finished runs")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run")
    args = parse_with_overrides(parser)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for task in args.tasks if not args.table_only else []:
        for agent in args.agents:
            for seed in args.seeds:
                run = overrides(task, agent, seed) + list(args.overrides)
                train_run(out / task / agent / f"seed_{seed}", run, args.force, out / "train.log")
    runs = [out / t / a / f"seed_{s}" for t in args.tasks for a in args.agents for s in args.seeds]
    print(caption(runs, "serial trainer, one process a run") + "\n")
    lines, figures = rows(out, args.tasks, args.agents, args.seeds)
    print("\n".join(lines))
    print("RESULT " + json.dumps(figures))


if __name__ == "__main__":
    main()
