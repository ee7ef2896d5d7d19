"""``border eval <run dir | checkpoint dir> [overrides]``: evaluate a saved policy.

For a run dir the ``best`` checkpoint is used (the newest periodic one if there is no best).
Overrides (``key=value``) apply to the ``eval`` settings below and to the run's ``env`` config,
e.g. ``eval.n_episodes=20 eval.seed=7 eval.video=true env.kwargs.render_mode=...``; ``trust=[my_pkg]``
lets the saved config import the user's own code (see :mod:`border_py.runs.trust`);
``check_resources=false`` builds networks larger than the memory available anyway.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from rich.console import Console
from rich.table import Table
from rich.text import Text

from border_py.cli.errors import OneLineParser, fail
from border_py.config import closest, count, flag, fraction, is_number, null_or, positive, require
from border_py.deploy.load import build_policy_agent
from border_py.errors import ConfigError, RunError, number_text, printable
from border_py.evaluation.evaluator import EvalResult, Evaluator
from border_py.evaluation.seeds import selection_seed
from border_py.evaluation.video import check_video
from border_py.files import make_dir, write_file
from border_py.layout import CONFIG
from border_py.overrides import parse_overrides, set_key, to_plain
from border_py.resources import MAX_EVAL_EPISODES
from border_py.runs.checkpoint import Checkpoint, pick_checkpoint
from border_py.runs.settings import RunSettings
from border_py.runs.trust import Trust, literal
from border_py.secrets import redact

__all__ = ["eval_command", "evaluate_checkpoint"]

EVAL_DEFAULTS: dict[str, Any] = {
    "n_episodes": 10,  # episodes to play
    "seed": None,  # base reset seed (None: the run's evaluation seed)
    "max_steps": 10000,  # step cap per episode
    "epsilon": None,  # probability of a random action per step (None: the env's default, 0.001 on Atari)
    "video": False,  # record mp4 videos next to the checkpoint (needs the [video] extra)
    "out": None,  # the dir eval_<timestamp>.json and videos go to (None: the checkpoint's dir)
}

EVAL_USAGE = f"""\
usage: border eval <run dir | checkpoint dir> [overrides]

Plays greedy episodes with a saved policy (a run dir: its best checkpoint; eval.epsilon: random
actions with that probability, by default the env's: 0.001 on Atari, else 0), prints a table and
writes eval_<timestamp>.json next to the checkpoint (eval.out=<dir>: there instead, videos too).
Overrides: eval.<key>=value (defaults:
{", ".join(f"{k}={v}" for k, v in EVAL_DEFAULTS.items())}), env.<key>=value, and
trust=[my_pkg]: the packages, modules or classes of your own that the run's config may import
(a run dir is data: border imports only its own and gymnasium's components unless you trust more);
check_resources=false: build the policy's networks even when they look larger than the memory
available.
"""


def eval_settings(checkpoint: Checkpoint, overrides: list[str]) -> dict[str, Any]:
    """``{"eval": ..., "env": ...}``: the defaults and the run's env config, with ``overrides``.

    Raises:
        ConfigError: a bad override, or a saved config importing what the command does not
            trust (see :mod:`border_py.runs.trust`).
    """
    env = literal(checkpoint.config["env"])
    settings = OmegaConf.create({"eval": EVAL_DEFAULTS, "env": env, "check_resources": True})
    typed = OmegaConf.create({})  # what this command names itself
    for ov in parse_overrides(overrides):
        key = ov.key_or_group
        top, _, rest = key.partition(".")
        if key == "trust":
            set_key(typed, key, ov.value(), add=True)
            continue
        if key == "check_resources":  # the command's own, never the saved config's
            set_key(settings, key, ov.value(), add=False)
            continue
        if top not in ("eval", "env") or not rest:
            raise ConfigError(
                f"{key}: border eval takes eval.*, env.*, trust and check_resources overrides only"
            )
        if top == "eval" and rest not in EVAL_DEFAULTS:
            raise ConfigError(
                f"{key}: unknown key{closest(rest, EVAL_DEFAULTS)}; valid: {', '.join(EVAL_DEFAULTS)}"
            )
        set_key(settings, key, ov.value(), add=top == "env")
        if top == "env":
            set_key(typed, key, ov.value(), add=True)
    plain = to_plain(settings)
    saved = {k: v for k, v in checkpoint.config.items() if k != "env"} | {"env": plain["env"]}
    Trust.of(to_plain(typed)).check_imports(saved, checkpoint.path / CONFIG)
    flag("check_resources", plain["check_resources"])
    asked = plain["eval"]
    positive("eval.n_episodes", asked["n_episodes"], int)
    many = asked["n_episodes"] <= MAX_EVAL_EPISODES
    require("eval.n_episodes", many, f"at most {MAX_EVAL_EPISODES:,}", asked["n_episodes"])
    positive("eval.max_steps", asked["max_steps"], int)
    null_or(count)("eval.seed", asked["seed"])
    flag("eval.video", asked["video"])
    out = asked["out"]
    require("eval.out", out is None or (isinstance(out, str) and out != ""), "null or a dir", out)
    if asked["epsilon"] is not None:
        fraction("eval.epsilon", asked["epsilon"])
    return plain


def evaluate_checkpoint(
    path: str, overrides: list[str]
) -> tuple[Checkpoint, dict[str, Any], EvalResult, Path, dict[str, Any]]:
    """Run the evaluation; return the checkpoint, the settings, the result, where its record
    goes (``eval_<timestamp>.json``, see :func:`write_record`) and the record.

    Raises:
        RunError: the video dir could not be made (said before any episode is played).
    """
    checkpoint = pick_checkpoint(path)
    settings = eval_settings(checkpoint, overrides)
    asked = settings["eval"]
    config = checkpoint.config | {"env": settings["env"]}
    env_factory, _, agent = build_policy_agent(
        checkpoint, config, enforce=settings["check_resources"]
    )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = Path(asked["out"]).expanduser().absolute() if asked["out"] else checkpoint.path
    video_dir = out_dir / f"videos_{stamp}" if asked["video"] else None
    if video_dir is not None:
        check_video(env_factory, "eval.video=true")
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            make_dir(video_dir)
        except OSError as exc:
            raise RunError(
                f"{out_dir}: cannot record videos there ({exc.strerror or exc}); choose where"
                " border eval writes with eval.out=<dir>"
            ) from None
    seed = (
        asked["seed"] if asked["seed"] is not None else selection_seed(RunSettings.seed_of(config))
    )
    epsilon = asked["epsilon"] if asked["epsilon"] is not None else env_factory.eval_epsilon
    try:
        with warnings.catch_warnings():  # the video dir is new: made just above
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
            evaluator = Evaluator(
                env_factory, asked["n_episodes"], seed, asked["max_steps"], video_dir, epsilon
            )
    except ConfigError as exc:
        raise ConfigError(f"eval.{exc}") from None
    try:
        result = evaluator.evaluate(agent)
    finally:
        evaluator.close()
    record = {
        "checkpoint": str(checkpoint.path),
        "opt_steps": checkpoint.meta.get("opt_steps"),
        "env": redact(settings["env"]),
        "eval": asked | {"seed": seed, "epsilon": epsilon},
        "result": result.scalars(),
        "episode_returns": result.episode_returns,
        "videos": str(video_dir) if video_dir else None,
    }
    return checkpoint, settings, result, out_dir / f"eval_{stamp}.json", record


def write_record(out: Path, record: dict[str, Any]) -> Path:
    """Write the evaluation's ``record`` to ``out`` (see :func:`~border_py.files.write_file`),
    creating its dir; return it.

    Raises:
        RunError: it could not be written (one line naming the dir, and ``eval.out``).
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return write_file(out, json.dumps(record, indent=2).encode())
    except OSError as exc:
        raise RunError(
            f"{out.parent}: cannot write {out.name} there ({exc.strerror or exc}); the result is"
            " printed above: write it elsewhere with eval.out=<dir>"
        ) from None


def shown(value: Any) -> str:
    """A value read from a file as plain text: a number within
    :data:`~border_py.errors.NUMBER_WIDTH` characters, anything else with its control and
    invisible characters escaped."""
    if is_number(value):
        return number_text(value, 2)
    return printable(str(value))


def print_result(checkpoint: Checkpoint, settings: dict[str, Any], result: EvalResult) -> None:
    """The result as a rich table (its title from the checkpoint's files: plain text, never
    rich markup)."""
    opt_steps, env_id = checkpoint.meta.get("opt_steps"), settings["env"]["id"]
    table = Table(
        title=Text(f"{shown(checkpoint.path)} (opt step {shown(opt_steps)}, {shown(env_id)})")
    )
    for column in ("episodes", "return (mean ± std)", "min", "max", "mean length"):
        table.add_column(column, justify="right")
    table.add_row(
        str(settings["eval"]["n_episodes"]),
        f"{number_text(result.return_mean, 2)} ± {number_text(result.return_std, 2)}",
        number_text(result.return_min, 2),
        number_text(result.return_max, 2),
        number_text(result.length_mean),
    )
    Console().print(table)


def eval_command(args: list[str]) -> int:
    """``border eval``: evaluate a checkpoint, print a table and where the videos went (with
    ``eval.video=true``), then write the record (a write that fails is one line after the table,
    exit status 1)."""
    if args[:1] in (["-h"], ["--help"]):
        print(EVAL_USAGE)
        return 0
    parser = OneLineParser(prog="border eval", add_help=False)
    parser.add_argument("path")
    parser.add_argument("overrides", nargs="*", default=[])
    try:
        parsed = parser.parse_args(args)
        checkpoint, settings, result, out, record = evaluate_checkpoint(
            parsed.path, parsed.overrides
        )
        print_result(checkpoint, settings, result)
        if record["videos"] is not None:
            print(f"videos: {printable(record['videos'])}", flush=True)
        print(f"written: {printable(str(write_record(out, record)))}", flush=True)
    except ConfigError as exc:
        return fail(str(exc))
    except RunError as exc:
        return fail(str(exc), 1)
    return 0
