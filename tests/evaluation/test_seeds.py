"""evaluation/seeds.py: the seeds of a run's selection evaluations, and fresh ones that miss them."""

from __future__ import annotations

import pytest

from border_py.evaluation.seeds import disjoint_start, fresh_seeds, run_eval_seeds, selection_seed
from border_py.resources import MAX_EVAL_EPISODES
from border_py.seeding import derive_seed


def test_a_colliding_start_moves_past_the_runs_window():
    used = range(1000, 1000 + MAX_EVAL_EPISODES)
    assert disjoint_start(5000, used, 100) == used.stop  # inside the window
    assert disjoint_start(950, used, 100) == used.stop  # overlapping its start
    assert disjoint_start(900, used, 100) == 900  # ends right before it
    assert disjoint_start(used.stop, used, 100) == used.stop  # right after it


@pytest.mark.parametrize("root", [0, 7, 2**31 - 1])
def test_each_stream_of_fresh_seeds_misses_the_selection_window(root):
    used = run_eval_seeds(root)
    assert used.start == selection_seed(root) == derive_seed(root, "eval")
    final, card = fresh_seeds(root, 100, "final"), fresh_seeds(root, 100, "hub")
    assert final != card  # a stream each: a model card's score is not the run's own final one
    for fresh in (final, card):
        assert len(fresh) == 100 and not set(fresh) & set(used)
    assert fresh_seeds(root, 100, "final") == final  # a function of the run's seed
