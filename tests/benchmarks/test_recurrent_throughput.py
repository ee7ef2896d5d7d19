"""benchmarks/recurrent_throughput.py runs at its tiny size so that it never rots: both tables
report, the ratios are those of the rates (and CPU times) beside them, each repeat's ratios come
with them, the machine and date too, and R2D2's numpy policy call is faster than its torch
step's."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys

import pytest

from ..conftest import REPO


@pytest.mark.slow
def test_recurrent_throughput_runs_at_its_tiny_size():
    done = subprocess.run(
        [sys.executable, "benchmarks/recurrent_throughput.py", "--tiny"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("Measured ") and "load average" in lines[0]
    assert lines[-1].startswith("RESULT ")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    machine = result["machine"]
    assert machine["cores"] >= 1 and len(machine["load"]) == 3 and machine["cpu"]
    when = datetime.datetime.strptime(machine["date"], "%Y-%m-%d %H:%M UTC")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert abs(now - when) < datetime.timedelta(days=1)
    assert set(result["acting"]) == {"RepeatPreviousEasy", "CartPole-v1"}
    for env, figures in result["acting"].items():
        rates = {k: figures[f"{k}_steps_per_sec"] for k in ("dqn", "r2d2", "r2d2_torch")}
        assert all(rate > 0 for rate in rates.values()), env
        assert figures["r2d2_vs_dqn"] == pytest.approx(rates["r2d2"] / rates["dqn"], abs=2e-3)
        calls = {k: figures[f"{k}_policy_us"] for k in ("dqn", "r2d2", "r2d2_torch")}
        assert figures["numpy_vs_torch_policy"] > 1.5, (env, calls)  # 8x here at --calls 300
    learning = result["learning"]
    assert learning["batch_size"] == 32 and learning["bare_seq_per_sec"] > 0
    for key in ("fed_vs_bare_no_prefetch", "fed_vs_bare_depth_1", "fed_vs_bare"):
        assert 0 < learning[key] < 3, key
    assert learning["fed_vs_bare"] == learning["fed_vs_bare_depth_1"]
    fed = ("fed_no_prefetch", "fed_depth_1")
    assert learning["fed_best"] in fed
    assert learning["fed_vs_bare_best"] == max(learning[f"fed_vs_bare_{k[4:]}"] for k in fed)
    assert {k: len(v) for k, v in learning["fed_vs_bare_by_repeat"].items()} == dict.fromkeys(
        fed, 1
    )
    medians = {k: v[0] for k, v in learning["fed_vs_bare_by_repeat"].items()}
    assert learning["fed_vs_bare_median"] == medians
    cpu = {k: learning[f"{k}_cpu_ms_per_opt"] for k in ("bare", *fed)}
    assert all(ms > 0 for ms in cpu.values()), cpu
    ratio = cpu["bare"] / cpu["fed_no_prefetch"]
    assert learning["fed_vs_bare_cpu_no_prefetch"] == pytest.approx(ratio, abs=2e-3)
