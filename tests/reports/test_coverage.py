"""The mean's 95% interval covers the true mean about 95% of the time at the seed counts RL uses,
where the percentile bootstrap it replaced did not (checked on seeded synthetic experiments)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from border_py.reports.intervals import bootstrap_interval, mean_interval

EXPERIMENTS = 4000  # coverage's standard error: sqrt(0.95 * 0.05 / 4000) = 0.34 points


def coverage(interval, distribution, n: int, experiments: int = EXPERIMENTS) -> float:
    """The share of ``experiments`` samples of ``n`` scores whose interval holds the true mean
    (one experiment per column: the intervals are computed per column)."""
    samples = distribution.rvs(size=(n, experiments), random_state=np.random.default_rng(n))
    found = interval(samples)
    truth = distribution.mean()
    return float(np.mean((found.low <= truth) & (truth <= found.high)))


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize(
    "distribution",
    [stats.norm(100.0, 30.0), stats.gamma(4.0, scale=25.0)],  # gamma(4): skewness 1
    ids=["normal", "skewed"],
)
def test_the_mean_interval_covers_within_3_points_of_95(distribution, n):
    assert coverage(mean_interval, distribution, n) == pytest.approx(0.95, abs=0.03)


def test_the_old_percentile_bootstrap_did_not_cover_at_3_seeds():
    def percentile(samples):
        return bootstrap_interval(samples, np.mean, "percentile")

    old = coverage(percentile, stats.norm(100.0, 30.0), 3, experiments=1000)
    assert old < 0.85  # ~76%: this test can tell a good interval from a bad one
