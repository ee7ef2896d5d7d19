"""The run's own settings: ``train.yaml``'s top-level keys, typed and checked in one place.

``conf/train.yaml`` is the one home of their values and docs; nothing in Python holds a second
default for them. A config that lacks one (a saved config of an earlier version, a config written
by hand) is completed with ``train.yaml``'s value before anything reads it
(:func:`border_py.runs.compat.complete`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from border_py.agents.networks import resolve_device
from border_py.config import count, flag, positive, require
from border_py.errors import ConfigError
from border_py.runs.results import OBJECTIVES
from border_py.runs.trust import check_trust_list

__all__ = ["RunSettings"]


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """``train.yaml``'s own keys, as :meth:`of` reads and checks them from a config."""

    seed: int
    """The root seed; every other seed (networks, replay sampling, envs, evaluation) derives
    from it."""
    device: str
    """The learner's device: ``cpu``, ``cuda`` or ``cuda:<index>``."""
    run_dir: str | None
    """Where the run's files go (None: the launcher's, Hydra's, dir of the job)."""
    resume: str | None
    """The run dir or checkpoint dir the run continues (``auto``: its own dir's, if any)."""
    trust: tuple[str, ...]
    """Packages, modules or classes of the user's own that a saved config may import."""
    objective: str
    """What the run returns to a sweeper: ``best``, ``final`` or ``mean`` eval/return_mean."""
    progress: bool
    """The live progress view on a terminal (elsewhere a plain line)."""
    progress_interval: float
    """Seconds between plain progress lines."""
    check_resources: bool
    """Whether a setting beyond this machine or border's ranges is refused (False: a warning)."""
    callbacks: tuple[Any, ...]
    """The hooks into the run: component specs of :class:`~border_py.callbacks.Callback`
    subclasses, built by :func:`~border_py.callbacks.build_callbacks`."""

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> RunSettings:
        """The run's settings of a complete config (every key of ``train.yaml`` present).

        Raises:
            ConfigError: one line naming a missing or bad key and what it must be.
        """
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in config]
        if missing:
            raise ConfigError(
                f"{missing[0]}: missing from the config (conf/train.yaml's keys: "
                f"{', '.join(f.name for f in dataclasses.fields(cls))})"
            )
        count("seed", config["seed"])
        resolve_device(str(config["device"]))
        objective = config["objective"]
        require("objective", objective in OBJECTIVES, f"one of {', '.join(OBJECTIVES)}", objective)
        flag("progress", config["progress"])
        positive("progress_interval", config["progress_interval"])
        flag("check_resources", config["check_resources"])
        hooks = config["callbacks"]
        require(
            "callbacks",
            hooks is None or isinstance(hooks, list),
            "a list of components, e.g. [{_target_: my_pkg.MyCallback}]",
            hooks,
        )
        return cls(
            seed=config["seed"],
            device=str(config["device"]),
            run_dir=_path_or_none(config["run_dir"]),
            resume=_path_or_none(config["resume"]),
            trust=check_trust_list(config["trust"]),
            objective=objective,
            progress=config["progress"],
            progress_interval=float(config["progress_interval"]),
            check_resources=config["check_resources"],
            callbacks=tuple(hooks or ()),
        )

    @staticmethod
    def seed_of(saved: Mapping[str, Any]) -> int:
        """The root seed of a saved run's config (``border eval``, a hub card, a deployed policy),
        its other keys unread: a saved run's ``device`` may be one this machine lacks.

        Raises:
            ConfigError: one line: the saved ``seed`` is not a root seed.
        """
        seed: Any = saved.get("seed")
        count("seed", seed)
        return int(seed)


def _path_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
