"""Actors on a Ray cluster: the ``actor_manager=ray`` option (the ``[ray]`` extra).

One concept per module: :mod:`.worker` (the Ray actor that samples, in a Ray worker process),
:mod:`.session` (starting a local Ray or joining a cluster, and leaving it as it was found),
:mod:`.placement` (a placement-group bundle per actor), :mod:`.calls` (the calls in flight at
each actor, and its health) and :mod:`.actors` (:class:`~.actors.RayActorSettings`, the
settings, and :class:`~.actors.RayActors`, the runtime: start, restarts, staged stop). ``ray``
is imported only inside functions: nothing else in border-py needs it. This package imports
nothing itself, so that a Ray worker loads only the worker's module.
"""

__all__: list[str] = []
