"""The sum tree and the prioritization, sped up for the fed learner, against their code before the
change (kept here as the reference): the same leaves and nodes to the bit, the same draws, weights
and largest priority, and a fed R2D2 learner that samples and learns exactly as before."""

from __future__ import annotations

from itertools import pairwise

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.r2d2 import R2D2
from border_py.errors import RunError
from border_py.replay.prioritization import Prioritization, check_finite
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.replay.sum_tree import BRANCHING, MinTree, SumTree
from border_py.sequences import Sequences
from border_py.trainers.loop import learn_step
from tests.agents.sequence_data import random_sequences


def _reference_set(tree: SumTree | MinTree, index: np.ndarray, values: np.ndarray) -> None:
    """``_SegmentTree.set`` before the change."""
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    if index.size == 0:
        return
    values = np.broadcast_to(np.asarray(values, dtype=np.float64), index.shape)
    node, first = np.unique(index[::-1], return_index=True)
    tree.levels[0][node] = values[::-1][first]
    for child, parent in pairwise(tree.levels):
        node = np.unique(node // BRANCHING)
        parent[node] = tree._reduce(child.reshape(-1, BRANCHING)[node])


def _reference_find_prefix(tree: SumTree, values: np.ndarray) -> np.ndarray:
    """``SumTree.find_prefix`` before the change."""
    value = np.array(values, dtype=np.float64).reshape(-1)
    node = np.zeros(value.shape, dtype=np.int64)
    rows = np.arange(len(value))
    for level in reversed(tree.levels[:-1]):
        children = level.reshape(-1, BRANCHING)[node]
        running = np.cumsum(children, axis=1)
        last = BRANCHING - 1 - np.argmax(children[:, ::-1] > 0, axis=1)
        k = np.minimum(np.count_nonzero(running <= value[:, None], axis=1), last)
        value -= np.where(k > 0, running[rows, k - 1], 0.0)
        node = node * BRANCHING + k
    return node


class _Reference(Prioritization):
    """The prioritization with its tree updates, search and error check before the change."""

    def set(self, idx: np.ndarray, p: np.ndarray) -> None:
        _reference_set(self.sums, idx, p)
        _reference_set(self.mins, idx, np.where(p > 0, p, np.inf))

    def of_errors(self, errors: np.ndarray, what: str | None = None) -> np.ndarray:
        if what is not None:
            check_finite(errors, what)
        raw = np.abs(np.asarray(errors, np.float64)) + self.eps
        self.max_priority = max(self.max_priority, float(raw.max(initial=0.0)))
        return raw**self.alpha

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        total = self.sums.total
        values = (np.arange(n) + rng.random(n)) * (total / n)
        return _reference_find_prefix(self.sums, np.minimum(values, np.nextafter(total, 0)))

    def redraw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        total = self.sums.total
        values = np.minimum(rng.random(n) * total, np.nextafter(total, 0))
        return _reference_find_prefix(self.sums, values)


def _same_trees(a: Prioritization, b: Prioritization) -> None:
    for x, y in zip(a.sums.levels + a.mins.levels, b.sums.levels + b.mins.levels, strict=True):
        assert x.tobytes() == y.tobytes()
    assert a.max_priority == b.max_priority


@pytest.mark.parametrize("capacity", [1, 7, 33, 1025, 40_000])
def test_the_trees_draws_and_weights_equal_the_reference_to_the_bit(capacity):
    rng = np.random.default_rng(capacity)
    args = (capacity, 0.9, 0.6, 50, 1e-6, True)
    new, ref = Prioritization(*args), _Reference(*args)
    draw_new, draw_ref = np.random.default_rng(0), np.random.default_rng(0)
    for step in range(40):
        n = int(rng.integers(1, 48))
        rows = rng.integers(0, capacity, n)  # repeats: the last one wins
        errors = rng.standard_normal(n) * 10.0 ** rng.integers(-4, 4)
        if step % 5 == 0:
            errors[rng.random(n) < 0.3] = 0.0
        pushed = new.pushed(n, errors)
        assert pushed.tobytes() == ref.pushed(n, errors).tobytes()
        zero = np.where(rng.random(n) < 0.2, 0.0, pushed)  # a zero priority: never drawn
        new.set(rows, zero)
        ref.set(rows, zero)
        _same_trees(new, ref)
        if new.sums.total <= 0:
            continue
        drawn = new.draw(draw_new, 32)
        assert np.array_equal(drawn, ref.draw(draw_ref, 32))
        assert new.weigh(drawn).tobytes() == ref.weigh(drawn).tobytes()
        assert np.array_equal(new.redraw(draw_new, 5), ref.redraw(draw_ref, 5))
        td = rng.standard_normal(32) * 10.0 ** rng.integers(-3, 3)
        updated = new.updated(drawn, td)
        assert updated.tobytes() == ref.updated(drawn, td).tobytes()
        new.set(drawn, updated)
        ref.set(drawn, updated)
        _same_trees(new, ref)


def test_a_search_at_the_edges_of_each_leaf_equals_the_reference():
    tree = SumTree(3000)
    rng = np.random.default_rng(3)
    leaves = np.where(rng.random(3000) < 0.3, 0.0, rng.random(3000) * 10.0 ** rng.integers(-8, 8))
    tree.rebuild(leaves)
    edges = np.cumsum(leaves)  # float sums: some fall in a sliver past a node's children's sum
    values = np.concatenate([[0.0], edges, np.nextafter(edges, 0), rng.random(500) * tree.total])
    values = np.minimum(values, np.nextafter(tree.total, 0))
    found = tree.find_prefix(values)
    assert np.array_equal(found, _reference_find_prefix(tree, values))
    assert (leaves[found] > 0).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_error_is_refused_as_before_and_changes_nothing(bad):
    prio = Prioritization(8, 0.9, 0.6, 50, 1e-6, False)
    prio.set(np.arange(8), np.ones(8))
    td = np.array([0.5, bad, bad, 2.0])
    with pytest.raises(RunError, match="2 non-finite TD errors"):
        prio.updated(np.arange(4), td)
    assert prio.max_priority == 1.0


@pytest.mark.usefixtures("one_torch_thread")
def test_a_fed_r2d2_learner_samples_and_learns_as_before():
    """Pushes and prioritized learn steps on two identical learners, one with the reference
    prioritization: the same rows, weights and priorities at every step, the same weights after."""
    space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    small = {"hidden_sizes": [6], "core_size": 8, "burn_in": 3, "length": 4, "n_step": 2}
    rows = [(0, None), (1, None), (3, None), (3, 4), (2, 8), (0, 5), (3, 6), (3, None)]
    learners, sampled = [], []
    for prioritization in (Prioritization, _Reference):
        buffer = PrioritizedSequenceReplayBuffer(20, seed=0, priority_from_actors=True)
        buffer.prioritization = prioritization(20, 0.9, 0.6, 50, 1e-6, True)
        agent = R2D2(space, gym.spaces.Discrete(3), seed=0, batch_size=6, lr=1e-2, **small)
        drawn: list[Sequences] = []
        sample = buffer.sample
        buffer.sample = lambda n, sample=sample, drawn=drawn: drawn.append(sample(n)) or drawn[-1]
        learners.append((buffer, agent))
        sampled.append(drawn)
    for step in range(12):
        pushed = random_sequences(rows, seed=step)
        pushed.priority = np.random.default_rng(step).random(len(rows)) * 3
        for buffer, agent in learners:
            buffer.push(pushed)
            learn_step(agent, buffer)
        new, ref = sampled[0][-1], sampled[1][-1]
        for a, b in zip(new.arrays().values(), ref.arrays().values(), strict=True):
            assert a.tobytes() == b.tobytes()
        assert np.array_equal(new.index, ref.index)
        assert new.weight.tobytes() == ref.weight.tobytes()
        assert learners[0][0].priorities().tobytes() == learners[1][0].priorities().tobytes()
    (_, first), (_, second) = learners
    for a, b in zip(first.q.state_dict().values(), second.q.state_dict().values(), strict=True):
        assert torch.equal(a, b)
