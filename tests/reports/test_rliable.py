"""``border report --export-scores`` fed to rliable (Agarwal et al. 2021) gives the report's own
aggregates across tasks: the same IQM and mean, and stratified-bootstrap intervals within the
Monte Carlo error of two seeded bootstraps of 10,000 resamples each.

rliable is not one of border-py's dependencies. ``pip install rliable "pandas<3"`` installs a
working one (rliable 1.2 needs ``arch<8``, and arch 7 fails at import under pandas 3): this test
runs where it imports and is skipped elsewhere."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from border_py.cli.main import main

from .synthetic import make_sweep

try:
    from rliable import library as rly
    from rliable import metrics
except Exception as exc:  # absent, or arch 7 under pandas 3: a TypeError at import
    pytest.skip(f"rliable does not import here: {exc}", allow_module_level=True)

RNG = np.random.default_rng(7)
CELLS = {  # 2 configurations x 2 tasks x 6 seeds of spread-out returns
    (env_id, lr): [[float(r)] for r in RNG.uniform(low, high, size=6)]
    for env_id, low, high in (("CartPole-v1", 50, 500), ("Acrobot-v1", -500, -80))
    for lr in ("1e-3", "3e-3")
}


def test_rliables_interval_estimates_match_the_reports(tmp_path):
    sweep = make_sweep(tmp_path / "sweep", CELLS, "agent.lr")
    scores, groups = tmp_path / "scores.npz", tmp_path / "groups.csv"
    assert main(["report", str(sweep), "--export-scores", str(scores), "--csv", str(groups)]) == 0
    ours = {
        line["agent.lr"]: line
        for line in csv.DictReader(groups.open())
        if line["final_interval"] == "95% stratified bootstrap"
    }
    data = np.load(scores, allow_pickle=False)
    assert str(data["score"]) == "final_return"
    normalized = {str(name): data[f"normalized_{i}"] for i, name in enumerate(data["groups"])}
    assert all(np.isfinite(array).all() and array.shape == (6, 2) for array in normalized.values())

    def aggregates(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x)])

    point, interval = rly.get_interval_estimates(normalized, aggregates, reps=10_000)
    for label, line in ours.items():
        name = f"agent.lr={label}"
        for k, prefix in enumerate(("final_iqm", "final")):
            value = line["final_iqm" if k == 0 else "final_mean"]
            assert point[name][k] == pytest.approx(float(value), abs=1e-9)
            low, high = float(line[f"{prefix}_ci_low"]), float(line[f"{prefix}_ci_high"])
            assert interval[name][:, k] == pytest.approx(
                [low, high], abs=0.04 * (high - low) + 1e-3
            )
