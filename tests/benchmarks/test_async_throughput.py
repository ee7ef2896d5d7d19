"""benchmarks/async_throughput.py --atari measures the Pong recipe's own layout: its envs per
actor and the precision its ``actor_manager.policy_dtype`` resolves to on this machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from border_py.agents.inference import native_bfloat16

from ..conftest import REPO, make_config

pytest.importorskip("ale_py")
pytest.importorskip("cv2")


@pytest.mark.slow
def test_the_atari_table_measures_the_recipes_envs_per_actor_and_precision(tmp_path):
    command = ["benchmarks/async_throughput.py", "--atari", "--seconds", "1", "--atari-actors", "1"]
    done = subprocess.run(
        [sys.executable, *command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    result = json.loads(last.removeprefix("RESULT "))
    recipe = make_config(tmp_path, "experiment=dqn_pong_async").actor_manager
    assert recipe.n_envs_per_actor == 16 and recipe.policy_dtype == "auto"
    assert result["envs_per_actor"] == recipe.n_envs_per_actor
    assert result["policy_dtype"] == ("bfloat16" if native_bfloat16() else "float32")
    assert result["frames_per_sec_1_actors"] > 0
