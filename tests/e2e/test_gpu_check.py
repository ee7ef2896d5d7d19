"""benchmarks/gpu_check.py, the one command for a GPU machine, runs on the CPU at its tiny size in
CI so that it never rots: every part reports, the gpu tier runs (its tests skipped here), and the
Pong run trains."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from border_py.agents.inference import native_bfloat16

from ..conftest import REPO


@pytest.mark.slow
def test_gpu_check_runs_on_cpu_at_its_tiny_size(tmp_path):
    out = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--device", "cpu", "--tiny", "--out", out],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT ")
    figures = json.loads(last.removeprefix("RESULT "))
    assert figures == json.loads(out.read_text())
    tests = figures["gpu_tests"]  # pytest -m gpu: on CPU, every gpu test skipped with a reason
    assert tests["exit_code"] == 0 and tests["failed"] == tests["error"] == 0
    assert tests["skipped"] == len(tests["tests"]) >= 15
    parity = [name for name in tests["tests"] if "test_one_update_on_cuda_equals_the_cpus" in name]
    assert len(parity) == 4
    assert figures["gpu_tests_ok"] and figures["pong_ok"]
    for batch in ("batch_32", "batch_64", "batch_256"):
        rates = figures["learner"][batch]
        assert rates["bare_opt_per_sec"] > 0 and rates["prefetch_2_opt_per_sec"] > 0
    pong = figures["pong"]
    assert pong["exit_code"] == 0 and pong["frames_per_sec"] > 0
    # --policy-dtype auto: bfloat16 actors where the CPU has AMX (this machine's has)
    assert pong["policy_dtype"] == ("bfloat16" if native_bfloat16() else "float32")
    assert [e["opt_steps"] for e in pong["evaluations"]][:2] == [100, 200]
    assert pong["gpu_utilisation"]["samples"] == 0  # no nvidia-smi here
    bounds = figures["bounds"]  # part 5's layout taken apart (pixel_bounds' stages)
    assert bounds["binding"] in ("learner", "actors") and bounds["actor_cores"] == 1
    assert bounds["policy_dtype"] == pong["policy_dtype"]
    for key in ("bare_opt_per_sec", "learner_opt_per_sec", "raw_env_steps_per_sec"):
        assert bounds[key] > 0
    assert bounds["run_env_steps_per_sec"] == pytest.approx(pong["frames_per_sec"] / 4)
    assert bounds["run_opt_vs_bare"] == pytest.approx(
        pong["opt_per_sec"] / bounds["bare_opt_per_sec"]
    )
