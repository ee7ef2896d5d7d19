"""Where Ray actors run: one placement-group bundle per actor, placed before any actor starts.

The cluster's CPUs are checked first (enough of them, and a strict strategy its nodes can meet),
so that a run that cannot be placed ends in one line instead of waiting for Ray.
"""

from __future__ import annotations

import contextlib
from typing import Any

from border_py.actors.runtime import ActorFailure
from border_py.config import require
from border_py.errors import ConfigError
from border_py.resources import actors_per_core

__all__ = ["STRATEGIES", "place", "unplace"]

STRATEGIES = ("SPREAD", "PACK", "STRICT_SPREAD", "STRICT_PACK")
PLACEMENT_SECONDS = 120.0  # how long the start waits for the placement group


def place(n_actors: int, cpu: float, strategy: str, enforce: bool) -> Any:
    """A placement group of ``n_actors`` bundles of ``cpu`` CPUs each, spread by ``strategy``
    (one of :data:`STRATEGIES`), placed; ``enforce``: whether actors beyond the cluster's CPUs
    are refused (see :func:`~border_py.resources.actors_per_core`).

    Raises:
        ConfigError: the cluster's CPUs cannot hold the bundles (too few, or a strict strategy
            its nodes cannot meet).
        ActorFailure: Ray could not place them within :data:`PLACEMENT_SECONDS` (busy CPUs).
    """
    import ray
    from ray.exceptions import GetTimeoutError
    from ray.util.placement_group import placement_group, remove_placement_group

    needed = n_actors * cpu
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    node_cpus = sorted((float(n["Resources"].get("CPU", 0)) for n in nodes), reverse=True)
    where = f"actor_manager.n_actors={n_actors} x num_cpus_per_actor={cpu:g}"
    if needed > sum(node_cpus):
        raise ConfigError(f"{where} = {needed:g} CPUs: the Ray cluster has {sum(node_cpus):g}")
    actors_per_core(n_actors, sum(node_cpus), "CPUs of the Ray cluster", enforce)
    check_strategy(n_actors, cpu, strategy, node_cpus)
    group = placement_group([{"CPU": cpu}] * n_actors, strategy=strategy)
    try:
        ray.get(group.ready(), timeout=PLACEMENT_SECONDS)
    except GetTimeoutError:
        remove_placement_group(group)
        raise ActorFailure(
            f"Ray could not place {where} ({strategy}) within {PLACEMENT_SECONDS:g} s: the"
            " cluster's CPUs are busy (ray status shows them)"
        ) from None
    return group


def unplace(group: Any) -> None:
    """Remove a placement group :func:`place` made (quietly: Ray may be gone already)."""
    from ray.util.placement_group import remove_placement_group

    with contextlib.suppress(Exception):
        remove_placement_group(group)


def check_strategy(n_actors: int, cpu: float, strategy: str, node_cpus: list[float]) -> None:
    """Refuse a strict placement ``strategy`` that nodes of ``node_cpus`` CPUs (largest first)
    cannot meet for ``n_actors`` bundles of ``cpu`` CPUs.

    Raises:
        ConfigError: one line naming ``actor_manager.placement_strategy``.
    """
    needed = n_actors * cpu
    if strategy == "STRICT_SPREAD":
        fitting = sum(1 for c in node_cpus if c >= cpu)
        require(
            "actor_manager.placement_strategy",
            fitting >= n_actors,
            f"SPREAD or PACK: STRICT_SPREAD needs one node per actor ({n_actors}), the"
            f" cluster has {fitting} with {cpu:g} CPU",
            strategy,
        )
    if strategy == "STRICT_PACK":
        require(
            "actor_manager.placement_strategy",
            bool(node_cpus) and node_cpus[0] >= needed,
            f"SPREAD or PACK: STRICT_PACK needs one node with {needed:g} CPUs, the largest"
            f" has {node_cpus[0] if node_cpus else 0:g}",
            strategy,
        )
