"""Every child of a run computes on one thread: torch's and numpy's BLAS (actors act with numpy
matmuls; a BLAS spreading them over every core spins on cores the other processes need). Every
process of a run flushes float denormals to zero, the learner only while it trains.

The children start with ``OPENBLAS_NUM_THREADS=2`` in their environment, which OpenBLAS obeys
when it loads: only :func:`border_py.processes.children.worker_cpu` brings it back to one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from border_py.trainers.train import learner_cpu

CHILD = """
import json, sys
import multiprocessing

def report(conn):
    from border_py.processes.children import init_child
    from threadpoolctl import threadpool_info
    import torch
    init_child("test")
    blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    tiny = torch.tensor([1e-39])  # below float32's smallest normal number (1.2e-38)
    conn.send({"blas": blas, "torch": torch.get_num_threads(), "flushed": (tiny * 1.0).item()})

if __name__ == "__main__":
    from border_py.processes.children import forkserver_context
    method = sys.argv[1]
    ctx = forkserver_context() if method == "forkserver" else multiprocessing.get_context(method)
    parent, child = ctx.Pipe()
    process = ctx.Process(target=report, args=(child,))
    process.start()
    assert parent.poll(60), "the child never reported"
    print(json.dumps(parent.recv()))
    process.join(10)
"""


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_a_child_runs_torch_and_blas_on_one_thread(tmp_path: Path, method: str):
    script = tmp_path / "script.py"
    script.write_text(CHILD)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}
    out = subprocess.run(
        [sys.executable, script, method], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    threads = json.loads(out.stdout.strip().splitlines()[-1])
    assert threads["blas"], "numpy's BLAS was not found"
    assert threads == {"blas": [1] * len(threads["blas"]), "torch": 1, "flushed": 0.0}


def test_the_learner_flushes_denormals_while_it_trains_only():
    tiny = torch.tensor([1e-39])
    assert (tiny * 1.0).item() > 0  # torch's default: kept
    with learner_cpu():
        assert (tiny * 1.0).item() == 0.0 and torch.get_num_threads() == 1
    assert (tiny * 1.0).item() > 0
