"""``torch.compile`` of an update's pure tensor part, opt-in (``agent.compile``).

An agent hands :func:`compiled` the function of its update that maps a batch to its losses (no
optimizer step, no Python state changed): forward and backward of that part then run as
generated kernels. ``mode`` is ``torch.compile``'s: ``default``, ``reduce-overhead`` (CUDA
graphs, for small networks on a GPU whose update is dominated by kernel launches) or
``max-autotune``. ``torch._dynamo`` is imported only when compiling (its import is a large share
of a learner's start-up, :mod:`border_py.agents.optim`). The first calls compile (seconds to
minutes); the results equal the eager ones to float rounding, not bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from border_py.config import require

__all__ = ["check_mode", "compiled"]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")

Fn = TypeVar("Fn", bound=Callable[..., Any])


def check_mode(key: str, value: Any) -> None:
    """The rule of ``agent.compile_mode``: one of :data:`COMPILE_MODES`."""
    require(key, value in COMPILE_MODES, " | ".join(repr(m) for m in COMPILE_MODES), value)


def compiled(fn: Fn, enabled: bool, mode: str) -> Fn:
    """``fn`` itself, or (``enabled``) ``torch.compile(fn, mode=mode)`` with static shapes (a
    learner's batches all have one shape), made at the first call: actors and the evaluator,
    whose agents never update, never import ``torch._dynamo``."""
    if not enabled:
        return fn
    made: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not made:
            made.append(torch.compile(fn, mode=mode, dynamic=False))
        return made[0](*args, **kwargs)

    return call  # type: ignore[return-value]
