"""Saved configs of earlier versions, read under this one: the components they name that moved,
and the keys added since.

A run's saved config (a checkpoint's ``config.json``) names its components by ``_target_``. When a
component moves or is renamed, the runs saved before keep its old name; :data:`MOVED_TARGETS` maps
each old name to the current one, and :func:`current_targets` applies it to a saved config as it
is loaded, before anything reads it (the trust gate of :mod:`border_py.runs.trust` included: an
old name is no shipped component's any more). A key added since the run was saved takes its
shipped value (:func:`complete`: ``train.yaml``'s for the run's own keys, the shipped option's of
the same ``_target_`` for a group's), as a fresh run composed today would have it: the YAML is the
one home of every default. :func:`current_config` does both. A run of an earlier version
therefore evaluates, loads and resumes as it was saved, and what it saves from then on names the
current classes and holds every current key.
"""

from __future__ import annotations

from typing import Any

from border_py.config import GROUPS
from border_py.shipped import keys_of_target, run_keys

__all__ = ["MOVED_TARGETS", "complete", "current_config", "current_targets"]

# old _target_ -> current one, for every component that moved (each maps to where it is now)
MOVED_TARGETS = {
    # 0.1 -> 0.2: the packages that became folders
    "border_py.envs.GymEnvFactory": "border_py.envs.factory.GymEnvFactory",
    "border_py.atari.AtariEnvFactory": "border_py.envs.atari.AtariEnvFactory",
    "border_py.actor_manager.ActorManager": "border_py.actors.local.LocalActorSettings",
    "border_py.replay.UniformReplayBuffer": "border_py.replay.uniform.UniformReplayBuffer",
    "border_py.replay.PrioritizedReplayBuffer": "border_py.replay.prioritized.PrioritizedReplayBuffer",
    # 0.2 -> 0.3: settings named settings, apart from the actors they configure
    "border_py.trainers.serial.SerialTrainer": "border_py.trainers.serial.SerialSettings",
    "border_py.trainers.async_trainer.AsyncTrainer": "border_py.trainers.async_trainer.AsyncSettings",
    "border_py.actors.local.ActorManager": "border_py.actors.local.LocalActorSettings",
    "border_py.actors.ray_backend.RayActors": "border_py.actors.ray.actors.RayActorSettings",
    "border_py.actors.ray.backend.RayActors": "border_py.actors.ray.actors.RayActorSettings",
    "border_py.actors.backend.ActorSettings": "border_py.actors.settings.ActorSettings",
}


def current_targets(node: Any) -> Any:
    """``node`` (a saved config, or any part of one) with every ``_target_`` that moved, at any
    depth, renamed to where it is now (:data:`MOVED_TARGETS`); the rest as it was."""
    if isinstance(node, dict):
        return {
            key: MOVED_TARGETS.get(value, value)
            if key == "_target_" and isinstance(value, str)
            else current_targets(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [current_targets(value) for value in node]
    return node


def complete(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every key it lacks given its shipped value: ``train.yaml``'s for the run's
    own keys, and in each group whose ``_target_`` one shipped option names (``trainer``'s
    ``AsyncSettings``: ``trainer=async``), that option's. What ``config`` holds stays as it is;
    a group of a class no shipped option names (a user's own) is left to its own defaults."""
    out = dict(config)
    for key, value in run_keys().items():
        out.setdefault(key, value)
    for group in GROUPS:
        section = out.get(group)
        if not isinstance(section, dict) or not isinstance(section.get("_target_"), str):
            continue
        shipped = keys_of_target(group, section["_target_"])
        if shipped is not None:
            out[group] = section | {k: v for k, v in shipped.items() if k not in section}
    return out


def current_config(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config as this version reads it: its moved ``_target_``s renamed
    (:func:`current_targets`), then completed with the keys added since (:func:`complete`)."""
    return complete(current_targets(saved))
