"""``env.backend``: what steps an actor's envs (every backend hands the actor the same
:class:`~border_py.envs.vector.VectorStep`).

- ``gymnasium``: the envs one after another in the actor's process (:class:`VectorEnv`);
- ``gymnasium_async``: one subprocess per env (gymnasium's ``AsyncVectorEnv``): for slow
  simulators, whose steps then overlap (:mod:`border_py.envs.async_vector`);
- ``envpool``, ``ale_vector``: Atari in C++ vector envs, envpool's and ale-py's
  (:mod:`border_py.envs.pools`, :mod:`border_py.envs.batched`);
- ``vector``: a gymnasium ``VectorEnv`` of the user's, ``env.vector``
  (:mod:`border_py.envs.user_vector`).
"""

from __future__ import annotations

import importlib

from border_py.errors import ConfigError

__all__ = ["ATARI_ONLY", "check_backend"]

BACKENDS = ("gymnasium", "gymnasium_async", "vector", "envpool", "ale_vector")
ATARI_ONLY = ("envpool", "ale_vector")
PACKAGES = {
    "envpool": ("envpool", "border-py[envpool]"),
    "ale_vector": ("ale_py", "border-py[atari]"),
}


def check_backend(backend: object, atari: bool) -> str:
    """``backend`` if this kind of env can use it.

    Args:
        backend: the ``env.backend`` value.
        atari: whether the env is ``env=atari`` (the C++ backends are Atari only).

    Raises:
        ConfigError: one line naming ``backend`` and what is allowed.
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r}: must be one of {', '.join(BACKENDS)}")
    assert isinstance(backend, str)
    if backend in ATARI_ONLY and not atari:
        raise ConfigError(
            f"backend={backend}: Atari only (env=atari); this env can use gymnasium,"
            " gymnasium_async or vector"
        )
    if backend in PACKAGES:
        module, extra = PACKAGES[backend]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(
                f"backend={backend}: needs the {module} package ({exc}); pip install '{extra}'"
            ) from None
    return backend
