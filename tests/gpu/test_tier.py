"""The ``gpu`` tier itself (not a gpu test: it runs in the fast tier): ``pytest -m gpu`` collects
the CUDA tests and, where there is no CUDA device, skips each with a reason instead of failing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from ..conftest import NO_CUDA, REPO

GPU_FILES = ["tests/gpu", "tests/agents/test_networks.py"]


def test_pytest_m_gpu_collects_the_cuda_tests_and_skips_them_without_a_device():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            *GPU_FILES,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},  # no device, even on a GPU machine
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (\w+)", summary))
    assert counts.get("skipped", 0) >= 15 and set(counts) == {"skipped", "deselected"}, summary
    assert NO_CUDA in done.stdout
    for module in ("test_agents.py", "test_prefetch.py", "test_acting.py", "test_networks.py"):
        assert f"{module}" in done.stdout  # each file's skips reported with their reason
