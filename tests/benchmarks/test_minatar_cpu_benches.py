"""benchmarks/denormals_bench.py and benchmarks/minatar_startup.py run at a tiny size so that they
never rot: each ends with its figures, and the ratios are those of the figures beside them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from ..conftest import REPO

needs_minatar = pytest.mark.skipif(
    importlib.util.find_spec("minatar") is None, reason="the [minatar] extra"
)


def result_of(*command: str) -> dict:
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT ")
    return json.loads(last.removeprefix("RESULT "))


@pytest.mark.slow
@needs_minatar
def test_denormals_bench_learns_counts_and_times_both_ways():
    result = result_of(
        "benchmarks/denormals_bench.py", "--train", "40", "--calls", "3", "--repeats", "1"
    )
    # the recipe's warm-up, then 64 env steps per update, played 16 at a time
    assert 5000 + 39 * 64 <= result["env_steps"] <= 5000 + 41 * 64
    for share in ("denormal_share_first_moments", "denormal_share_second_moments"):
        assert 0 <= result[share] <= 1
    for what in ("adam_step", "update"):
        kept, flushed = result[f"{what}_kept_us"], result[f"{what}_flushed_us"]
        assert kept > 0 and flushed > 0
        assert result[f"{what}_kept_vs_flushed"] == pytest.approx(kept / flushed, rel=1e-3)


@needs_minatar
def test_minatar_startup_defers_pandas_and_reports_the_ratio():
    result = result_of("benchmarks/minatar_startup.py", "--repeats", "1")
    assert result["deferred_s"] > 0 and result["imported_s"] > 0
    ratio = result["deferred_s"] / result["imported_s"]
    assert result["deferred_vs_imported"] == pytest.approx(ratio, rel=1e-3)
    assert result["pandas_loaded_deferred"] is False and result["pandas_loaded_imported"] is True
