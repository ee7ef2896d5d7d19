"""The reset seeds of a run's evaluations, and fresh ones that none of them can have used.

A run selects its ``best`` checkpoint on its own evaluations: episode ``i`` of each resets with
seed ``selection_seed(seed) + i`` (the serial and async trainers, and ``border eval`` by default),
``i`` below ``trainer.eval_episodes``, which is at most
:data:`~border_py.resources.MAX_EVAL_EPISODES`. A score measured on those episodes is the maximum
of noisy estimates, hence optimistic. A fresh evaluation (the run's final one, a model card's)
starts from a seed of a stream of its own, moved past that window when the two would overlap, so
that it is measured on episodes the run was never selected on.
"""

from __future__ import annotations

from border_py.resources import MAX_EVAL_EPISODES
from border_py.seeding import derive_seed

__all__ = ["disjoint_start", "fresh_seeds", "run_eval_seeds", "selection_seed"]


def selection_seed(root_seed: int) -> int:
    """The first reset seed of every selection evaluation of a run with ``root_seed``."""
    return derive_seed(root_seed, "eval")


def run_eval_seeds(root_seed: int) -> range:
    """Every reset seed the selection evaluations of a run with ``root_seed`` can have used."""
    first = selection_seed(root_seed)
    return range(first, first + MAX_EVAL_EPISODES)


def disjoint_start(candidate: int, used: range, n: int) -> int:
    """``candidate`` if ``range(candidate, candidate + n)`` misses ``used``, else ``used.stop``."""
    overlaps = candidate < used.stop and used.start < candidate + n
    return used.stop if overlaps else candidate


def fresh_seeds(root_seed: int, n: int, *stream: str) -> range:
    """``n`` consecutive reset seeds from the stream named ``stream`` (e.g. ``"final"``), none of
    them in :func:`run_eval_seeds` of the run; the same arguments always give the same seeds."""
    start = derive_seed(root_seed, *stream, "eval")
    start = disjoint_start(start, run_eval_seeds(root_seed), n)
    return range(start, start + n)
