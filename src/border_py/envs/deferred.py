"""Modules that a third-party env package imports at its top but uses only to draw: imported when
first used instead.

MinAtar's ``minatar`` package imports seaborn (and with it pandas and scipy.stats) and
``matplotlib.pyplot`` when it loads, for its ``human`` and ``rgb_array`` renderings only: over a
second of every actor's, evaluator's and learner's start-up, on the critical path of a run that
trains in seconds (``benchmarks/minatar_startup.py``). :func:`defer_imports` puts a stand-in into
``sys.modules`` for each such module that is installed and not imported yet; the first attribute
read from a stand-in imports the real module, which takes its place in ``sys.modules`` and answers
that read and every later one.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

__all__ = ["DeferredModule", "defer_imports"]


class DeferredModule(types.ModuleType):
    """Stands in ``sys.modules`` for the module of its name until an attribute of it is read.

    Its ``__spec__`` is None, so an ``import`` statement of the name binds it without loading
    anything; any other attribute read imports the real module (replacing this in
    ``sys.modules``) and reads the attribute there.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__spec__ = None

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def _load(self) -> types.ModuleType:
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        return importlib.import_module(name)


def defer_imports(*names: str) -> None:
    """Put a :class:`DeferredModule` in ``sys.modules`` for each of ``names`` that is installed
    and not imported yet (one that is not installed is left alone, to fail as it would have)."""
    for name in names:
        if name in sys.modules:
            continue
        parent = name.rpartition(".")[0]
        if parent and importlib.util.find_spec(parent) is None:
            continue
        if importlib.util.find_spec(name) is not None:
            sys.modules[name] = DeferredModule(name)
