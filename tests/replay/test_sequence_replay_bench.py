"""benchmarks/sequence_replay_bench.py at a tiny size: it runs and ends with its RESULT line."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).parents[2] / "benchmarks" / "sequence_replay_bench.py"


def test_the_benchmark_prints_its_ratios_and_a_result_line(monkeypatch, capsys):
    argv = ["sequence_replay_bench.py", "--capacity", "60", "--envs", "2", "--samples", "3"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(BENCH), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("RESULT ")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    for kind in ("minatar", "vector"):
        for name in ("bytes_per_step", "insert", "sample"):
            assert result[f"{kind}_{name}_ratio"] > 0
    # the step ring (period + 1 steps a sequence) against T = 29 steps a sequence
    assert result["minatar_bytes_per_step_ratio"] < 0.5
