"""The intervals of the mean and of the IQM over seeds, on samples worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from border_py.reports.aggregate import estimate
from border_py.reports.intervals import (
    BCA_BOOTSTRAP,
    BOOTSTRAP_FROM,
    NO_INTERVAL,
    PERCENTILE_BOOTSTRAP,
    T_INTERVAL,
    iqm_interval,
    mean_interval,
)

T_975_2 = 4.302652729911275  # Student's t, 97.5th percentile, 2 degrees of freedom (tables)


def test_the_t_interval_of_1_2_3_by_hand():
    # mean 2, sample sd 1, standard error 1/sqrt(3): 2 -/+ 4.3027 / sqrt(3) = 2 -/+ 2.48414
    found = estimate([1.0, 2.0, 3.0])
    assert found.method == T_INTERVAL
    assert found.low == pytest.approx(2 - T_975_2 / math.sqrt(3), abs=1e-9)
    assert found.high == pytest.approx(2 + T_975_2 / math.sqrt(3), abs=1e-9)
    assert found.low == pytest.approx(-0.484138, abs=1e-6)  # wider than the seeds' range
    two = estimate([0.0, 10.0])  # sd 7.0711, se 5, t(0.975, 1) = 12.7062
    assert (two.low, two.high) == pytest.approx((5 - 63.531, 5 + 63.531), abs=1e-3)


def test_one_seed_has_no_interval_and_says_so():
    one = estimate([5.0])
    assert (one.mean, one.iqm, one.n) == (5.0, 5.0, 1)
    assert (one.low, one.high, one.iqm_low, one.iqm_high) == (None, None, None, None)
    assert one.method == one.iqm_method == NO_INTERVAL == "none (1 seed)"


def test_seeds_that_agree_give_a_zero_width_interval():
    same = estimate([7.0, 7.0, 7.0])
    assert (same.low, same.high, same.iqm_low, same.iqm_high) == (7.0, 7.0, 7.0, 7.0)
    many = mean_interval(np.full((BOOTSTRAP_FROM, 2), 3.0))  # BCa is undefined there
    assert many.low.tolist() == many.high.tolist() == [3.0, 3.0]


def test_the_mean_is_bootstrapped_from_50_seeds_and_the_iqm_always():
    rng = np.random.default_rng(0)
    assert mean_interval(rng.normal(size=BOOTSTRAP_FROM - 1)).method == T_INTERVAL
    scores = rng.normal(size=BOOTSTRAP_FROM)
    found = mean_interval(scores)
    assert found.method == BCA_BOOTSTRAP == "95% BCa bootstrap"
    assert found.low[0] < scores.mean() < found.high[0]
    assert mean_interval(scores).low[0] == found.low[0]  # seeded: the same scores, the same band
    assert iqm_interval(scores[:5]).method == PERCENTILE_BOOTSTRAP == "95% percentile bootstrap"


def test_the_iqm_and_its_interval_by_hand():
    eight = estimate([1, 2, 3, 4, 5, 6, 7, 100])
    assert eight.mean == 16.0 and eight.iqm == 4.5  # the middle half: 3, 4, 5, 6
    assert eight.iqm_low is not None and eight.iqm_high is not None
    assert 1.0 <= eight.iqm_low < 4.5 < eight.iqm_high <= 100.0
    # 3 seeds: nothing is cut, the IQM is the mean, and its resampled means stay within the seeds;
    # each resample is a mean of 3 draws from {1, 2, 6}: P(1, 1, 1) = P(6, 6, 6) = 1/27 > 2.5%,
    # so the percentile interval is the seeds' whole range, narrower than the t-interval
    three = estimate([1.0, 2.0, 6.0])
    assert three.iqm == three.mean == 3.0
    assert (three.iqm_low, three.iqm_high) == (1.0, 6.0)
    assert three.low is not None and three.low < 1.0 and three.high is not None and three.high > 6.0
