"""The Ray backend under the name the shipped ``conf/actor_manager/ray.yaml`` gives its
``_target_``, as every saved Ray run's config does; it lives in :mod:`border_py.actors.ray`."""

from __future__ import annotations

from border_py.actors.ray.backend import RayActors

__all__ = ["RayActors"]
