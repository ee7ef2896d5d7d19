"""The folder ``border push`` uploads, built from a run: exactly what the Hub repo will hold.

```
README.md            the model card (see border_py.hub.card)
checkpoint/          the policy's checkpoint: its weights, config and meta (no optimizer state,
                     target networks or replay buffer: acting needs none of them)
export/              the policy exported (numpy by default: it runs without torch)
learning_curve.png   the run's evaluation returns over env steps
replay.mp4           one episode of the fresh evaluation (when the env renders rgb_array frames)
results.json         the fresh evaluation, episode by episode, and the run's budget
```

The folder is built in a hidden dir beside where it goes and renamed into place once complete
(every file fsynced before): a folder that exists is complete. Nothing read from the run chooses
what is imported: the policy is loaded by :func:`~border_py.deploy.load.load_policy` through the
trust gate (:mod:`border_py.runs.trust`).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py._version import __version__
from border_py.agents.r2d2 import R2D2
from border_py.config import is_int, is_number
from border_py.deploy.export import export_policy
from border_py.deploy.load import load_policy
from border_py.deploy.recurrent_graph import step_names
from border_py.errors import ConfigError
from border_py.evaluation.seeds import run_eval_seeds
from border_py.files import (
    create_file,
    fsync_dir,
    make_dir,
    open_regular,
    write_file,
)
from border_py.hub.card import CardFacts, card, version
from border_py.hub.contents import (
    CARD,
    CHECKPOINT,
    CURVE,
    EXPORT,
    EXPORT_FILES,
    REPLAY,
    RESULTS,
)
from border_py.hub.media import draw_curve, record_replay
from border_py.hub.score import fresh_score
from border_py.hub.usage import export_usage
from border_py.layout import CHECKPOINTS, CONFIG, META, POLICY
from border_py.publishing import publish_dir
from border_py.resources import MAX_EVAL_EPISODES
from border_py.runs.checkpoint import Checkpoint, pick_checkpoint
from border_py.runs.results import read_result
from border_py.runs.settings import RunSettings
from border_py.secrets import redact

__all__ = ["FORMATS", "PushSettings", "build", "publish"]

log = logging.getLogger(__name__)

FORMATS = ("numpy", "torchscript", "onnx")
ENV_ID = re.compile(r"^[A-Za-z0-9_.:/-]{1,200}$")
ALGORITHM = re.compile(r"^[A-Za-z_]\w{0,99}$")


@dataclass(frozen=True)
class PushSettings:
    """What ``border push`` was asked for.

    Attributes:
        repo_id: the Hub repo, ``owner/name``.
        episodes: episodes of the fresh evaluation.
        fmt: the export's format (one of :data:`FORMATS`).
        trust: what the run's config may import beyond border-py's and gymnasium's components.
        check_resources: False: a size beyond a bound (the policy's networks, the saved
            ``trainer.eval_max_steps``) is a warning, not an error.
    """

    repo_id: str
    episodes: int = 100
    fmt: str = "numpy"
    trust: tuple[str, ...] = ()
    check_resources: bool = True

    def __post_init__(self) -> None:
        n = self.episodes
        ok = is_int(n) and 0 < n <= MAX_EVAL_EPISODES
        if not ok:
            raise ConfigError(
                f"--episodes {self.episodes}: must be an int from 1 to {MAX_EVAL_EPISODES:,}"
            )
        if self.fmt not in FORMATS:
            raise ConfigError(f"--format {self.fmt}: unknown format; one of {', '.join(FORMATS)}")


def run_of(path: str | Path, checkpoint: Checkpoint) -> Path:
    """The run dir a push reads its curve and budget from: ``path`` itself, or the run the
    checkpoint dir ``path`` belongs to.

    Raises:
        ConfigError: ``path`` is not a run dir nor a checkpoint of one.
    """
    given = Path(path).expanduser().absolute()
    if (given / CHECKPOINTS).is_dir():
        return given
    if checkpoint.path.parent.name == CHECKPOINTS:
        return checkpoint.path.parent.parent
    raise ConfigError(
        f"{given}: not a run dir (no {CHECKPOINTS}/ inside) nor one of its checkpoints; border"
        " push shares a run: its curve and budget come from the run dir"
    )


def names(checkpoint: Checkpoint) -> tuple[str, str]:
    """The env id and the algorithm (the agent class's name) of a checkpoint's config.

    Raises:
        ConfigError: either is not a plain name (a run's files are data: nothing odd reaches
            the card).
    """
    env_id = (
        checkpoint.config["env"].get("id") if isinstance(checkpoint.config["env"], dict) else None
    )
    if not (isinstance(env_id, str) and ENV_ID.match(env_id)):
        raise ConfigError(f"env.id={env_id!r} in {checkpoint.path / CONFIG}: not an env id")
    agent = checkpoint.config["agent"]
    target = agent.get("_target_") if isinstance(agent, dict) else None
    algorithm = target.rpartition(".")[2] if isinstance(target, str) else ""
    if not ALGORITHM.match(algorithm):
        raise ConfigError(f"agent._target_={target!r} in {checkpoint.path / CONFIG}: not a class")
    return env_id, algorithm


def copy_policy_files(checkpoint: Path, into: Path) -> None:
    """Copy the files acting needs (the weights and meta as they are, the config redacted again)
    from ``checkpoint`` into the new dir ``into``; read never through a link, written fsynced."""
    make_dir(into)
    for name in (POLICY, META):
        with open_regular(checkpoint / name) as source:
            create_file(into / name, functools.partial(shutil.copyfileobj, source))
    with open_regular(checkpoint / CONFIG) as source:
        config = json.load(source)
    create_file(into / CONFIG, json.dumps(redact(config), indent=2).encode())
    fsync_dir(into)


def _number(value: Any) -> int | float | None:
    return value if is_number(value) else None


def training_budget(run_dir: Path) -> dict[str, Any]:
    """The run's status, env steps, opt steps and wall time from its ``result.json`` (numbers
    only; None where the run wrote none: still running, or killed)."""
    result = read_result(run_dir) or {}
    summary = result.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    status = result.get("status")
    return {
        "status": status if status in ("completed", "interrupted", "failed") else None,
        "env_steps": _number(summary.get("env_steps")),
        "opt_steps": _number(summary.get("opt_steps")),
        "seconds": _number(summary.get("seconds")),
    }


def build(run: str | Path, folder: Path, settings: PushSettings) -> CardFacts:
    """Fill the empty dir ``folder`` with what a push of ``run`` uploads (see the module's
    docstring); return what the card says (the fresh evaluation's score included).

    Raises:
        ConfigError: one line: not a run, an untrusted config, a policy that does not fit.
    """
    checkpoint = pick_checkpoint(run)
    run_dir = run_of(run, checkpoint)
    env_id, algorithm = names(checkpoint)
    try:
        RunSettings.seed_of(checkpoint.config)  # before anything is loaded or written
    except ConfigError as exc:
        raise ConfigError(f"{checkpoint.path / CONFIG}: {exc} (a run's root seed)") from None
    trust, check = list(settings.trust), settings.check_resources
    policy = load_policy(checkpoint.path, trust=trust, check_resources=check)
    copy_policy_files(checkpoint.path, folder / CHECKPOINT)
    target = export_target(folder, settings.fmt)
    exported = export_policy(checkpoint.path, settings.fmt, target, trust, check_resources=check)
    log.info("fresh evaluation: %d episodes of %s", settings.episodes, env_id)
    score = fresh_score(
        policy.agent, policy.env_factory, checkpoint.config, settings.episodes, check
    )
    files = {
        CARD: "this card",
        f"{CHECKPOINT}/": "the policy's checkpoint: weights, config, meta (for `load_policy`)",
        f"{exported.relative_to(folder)}": f"the policy exported ({settings.fmt})",
        RESULTS: "the fresh evaluation, episode by episode, and the training budget",
    }
    if draw_curve(run_dir, f"{algorithm} on {env_id}", folder / CURVE):
        files[CURVE] = "the run's evaluation returns over env steps"
    if record_replay(policy, score, folder / REPLAY):
        files[REPLAY] = "the fresh evaluation's first episode"
    meta = checkpoint.meta
    inputs = step_names(policy.agent.q)[0] if isinstance(policy.agent, R2D2) else None
    facts = CardFacts(
        repo_id=settings.repo_id,
        env_id=env_id,
        algorithm=algorithm,
        score=score,
        checkpoint={
            "name": checkpoint.path.name,
            "opt_steps": _number(meta.get("opt_steps")),
            "env_steps": _number(meta.get("env_steps")),
        },
        training=training_budget(run_dir),
        config=checkpoint.config,
        files=files,
        versions={"pushed": __version__, "trained": version(meta.get("border_py"))},
        export=export_usage(settings.fmt, exported.relative_to(folder), settings.repo_id, inputs),
        recurrent=inputs is not None,
    )
    write_file(folder / RESULTS, json.dumps(results(facts), indent=2).encode())
    write_file(folder / CARD, card(facts).encode())
    return facts


def results(facts: CardFacts) -> dict[str, Any]:
    """``results.json``: the fresh evaluation, the checkpoint, the run's budget and versions."""
    return {
        "repo_id": facts.repo_id,
        "env_id": facts.env_id,
        "algorithm": facts.algorithm,
        "evaluation": facts.score.record(run_eval_seeds(RunSettings.seed_of(facts.config))),
        "checkpoint": facts.checkpoint,
        "training": facts.training,
        "border_py": facts.versions,
        "evaluated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def check_destination(dest: Path, option: str) -> None:
    """Refuse a destination that is a link, a file, or a dir with anything in it.

    Raises:
        ConfigError: one line naming ``option`` and ``dest``.
    """
    if dest.is_symlink():
        raise ConfigError(f"{option} {dest}: is a symbolic link; name a new or empty dir")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(
            f"{option} {dest}: exists and is not an empty dir; name a new or empty dir (border"
            " never writes over your files)"
        )


def publish(fill: Any, dest: Path, option: str) -> Any:
    """Publish ``dest`` (new, or an empty dir) filled by ``fill(dir)`` (see
    :func:`border_py.publishing.publish_dir`); return what ``fill`` returns. Nothing is left behind
    when ``fill`` fails.

    Raises:
        ConfigError: ``dest`` is not new or empty (checked before and at the rename), or its
            dir cannot be written.
    """
    dest = dest.expanduser().absolute()
    check_destination(dest, option)
    make_dir(dest.parent)
    try:
        return publish_dir(dest, fill)
    except OSError as exc:
        if exc.filename != str(dest):  # fill's own
            raise
        check_destination(dest, option)
        raise ConfigError(f"{option} {dest}: cannot write there ({exc.strerror or exc})") from None


def export_target(folder: Path, fmt: str) -> Path:
    """Where the export goes in the folder: the numpy export's dir, or the model file (its
    ``preprocessing.json`` beside it) in :data:`EXPORT`."""
    if fmt == "numpy":
        return folder / EXPORT
    return make_dir(folder / EXPORT) / EXPORT_FILES[fmt]
