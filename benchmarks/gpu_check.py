"""One command for a machine with a GPU: is border-py right there, and how fast is it?

    python benchmarks/gpu_check.py                          # --device cuda, under 8 minutes
    python benchmarks/gpu_check.py --device cpu --tiny      # the same code on CPU (CI), < 2 min

Five parts, printed as they finish and written to ``--out`` (JSON), then one ``RESULT {json}``:

1. **gpu_tests**: ``pytest -m gpu`` (tests/gpu/: an update of each agent on the device equals the
   CPU's, ``check_agent`` there, prefetch through pinned memory, bfloat16 acting) with
   ``--device`` as the only CUDA device the tests see: each test's outcome and the figures it
   records (the parity tests' ``loss_rel`` and ``update_rel``). Every test is skipped on CPU.
2. **learner**: Nature-CNN DQN opt/s from a prioritized replay of Atari frames at batch 32, 64
   and 256, with ``trainer.prefetch`` on and off, over a bare loop of updates on batches already
   on the device.
3. **h2d**: milliseconds to copy one batch of 64 stacked frames (obs and next_obs) to the device
   from pageable and from pinned memory.
4. **utilisation**: ``nvidia-smi``'s GPU utilisation sampled every second while part 5 trains.
5. **pong**: ``border train experiment=dqn_pong_async`` with all cores but two as actors for
   ``--minutes``, then a Ctrl-C: frames/s (4 per env step), opt/s and the evaluation returns over
   time. The actors act in ``--policy-dtype`` (``auto``: bfloat16 where the CPU has AMX, else
   float32; ``actor_manager.policy_dtype``).
6. **bounds**: part 5's layout taken apart as ``benchmarks/pixel_bounds.py`` does it, with the
   learner on ``--device``: the bare and the fed (``learn_step``) learner's opt/s, one actor's
   microseconds per env step on the CPU (policy, exploration, env, n-step) and the raw env rate,
   the learner-bound and actor-bound env steps/s they imply, which binds, and part 5's figures
   against them: where the time of the first run on a GPU machine goes.

Exit status 1 when a gpu test fails or the training run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.inference import native_bfloat16

REPO = Path(__file__).resolve().parents[1]
ATARI_OBS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
FRAME_SKIP = 4  # ALE frames per env step in env=atari


# -- 1. the gpu tests ---------------------------------------------------------------------------


def gpu_tests(device: str, out: Path) -> dict[str, Any]:
    """Part 1: ``pytest -m gpu`` (tests/gpu/ and every test marked ``gpu``) with ``device`` as
    the only CUDA device it sees: each test's outcome and the figures it records (the parity
    tests' relative differences), with the counts, read from pytest's JUnit report (written
    beside ``out``). Without a CUDA device every test is skipped."""
    env = dict(os.environ)
    if device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = device.removeprefix("cuda:")
    elif not device.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = ""  # --device cpu: the tier's skips
    report = out.with_name(out.stem + "_pytest.xml")
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, f"--junitxml={report}", "tests"], cwd=REPO, env=env, capture_output=True
    )
    tests, counts = _junit(report) if report.exists() else ({}, {})
    return {"exit_code": done.returncode, **counts, "tests": tests}


def _junit(report: Path) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Each test case's outcome and recorded properties, and the counts, from a JUnit XML file."""
    tests: dict[str, dict[str, Any]] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
        properties = {p.get("name"): _number(p.get("value")) for p in case.iter("property")}
        tests[f"{case.get('classname')}::{case.get('name')}"] = {"outcome": outcome, **properties}
    outcomes = [t["outcome"] for t in tests.values()]
    counts = {k: outcomes.count(k) for k in ("passed", "failed", "error", "skipped")}
    return tests, counts


def _number(text: str | None) -> float | str | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return text


# -- 2. learner --------------------------------------------------------------------------------


def learner(device: str, tiny: bool) -> dict[str, dict[str, float]]:
    """Part 2: opt/s at each batch size: bare (updates on a batch already on the device), fed
    from the replay without and with prefetch (:mod:`learner_pipeline`'s phases)."""
    import learner_pipeline  # beside this file

    out = {}
    for batch_size in (32, 64, 256):
        args = argparse.Namespace(
            device=device,
            batch_size=batch_size,
            seconds=0.0 if tiny else 6.0,  # tiny: one timed step after one off the clock
            warmup=1 if tiny else 3,
            capacity=20_000 if tiny else 200_000,
            fill=2_000 if tiny else 50_000,
            replay_ratio=8.0,
            actor_batch=16,
        )
        buffer = learner_pipeline.filled(args)
        rates = {
            "bare": learner_pipeline.phase("bare", args, buffer),
            "no_prefetch": learner_pipeline.phase("fed_no_prefetch", args, buffer),
            "prefetch_2": learner_pipeline.phase("fed_depth_2", args, buffer, depth=2),
        }
        out[f"batch_{batch_size}"] = {f"{k}_opt_per_sec": round(v, 2) for k, v in rates.items()}
        out[f"batch_{batch_size}"] |= {
            "no_prefetch_vs_bare": round(rates["no_prefetch"] / rates["bare"], 3),
            "prefetch_vs_bare": round(rates["prefetch_2"] / rates["bare"], 3),
        }
    return out


# -- 3. host to device -------------------------------------------------------------------------


def h2d(device: str, batch_size: int = 64, repeats: int = 50) -> dict[str, float]:
    """Part 3: milliseconds per batch of stacked frames (obs and next_obs) copied to ``device``,
    from pageable memory and from pinned memory (asynchronously, one synchronisation a batch)."""
    frames = torch.randint(0, 256, (2, batch_size, *ATARI_OBS.shape), dtype=torch.uint8)
    target = torch.device(device)
    out = {"batch_mb": frames.numel() / 2**20}
    sources = {"pageable": frames}
    if target.type == "cuda":
        sources["pinned"] = frames.pin_memory()
    for name, source in sources.items():
        _sync(target)
        start = time.perf_counter()
        for _ in range(repeats):
            source.to(target, non_blocking=name == "pinned")
            _sync(target)
        out[f"{name}_ms"] = (time.perf_counter() - start) / repeats * 1e3
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- 4. utilisation ----------------------------------------------------------------------------


class Utilisation:
    """``nvidia-smi``'s utilisation (percent) of GPU ``gpu`` sampled every ``every`` seconds in a
    thread (nothing when ``nvidia-smi`` is missing)."""

    def __init__(self, gpu: int = 0, every: float = 1.0) -> None:
        self.gpu, self.every, self.samples = gpu, every, []  # type: list[float]
        self.smi = shutil.which("nvidia-smi")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Utilisation:
        if self.smi:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _sample(self) -> None:
        query = [
            self.smi,
            "--query-gpu=utilization.gpu",
            "--format=csv,noheader,nounits",
            "-i",
            "0",
        ]
        while not self._stop.wait(self.every):
            try:
                line = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
                self.samples.append(float(line.split()[0]))
            except (OSError, subprocess.SubprocessError, ValueError, IndexError):
                continue

    def summary(self) -> dict[str, float | int | None]:
        """Mean and median utilisation over the samples taken."""
        if not self.samples:
            return {"samples": 0, "mean_pct": None, "median_pct": None}
        return {
            "samples": len(self.samples),
            "mean_pct": float(np.mean(self.samples)),
            "median_pct": float(np.median(self.samples)),
        }


# -- 5. pong -----------------------------------------------------------------------------------

TINY_PONG = [  # a smoke run on CPU: the same code path at a size CI can afford
    "debug=tiny",
    "agent.batch_size=32",
    "replay_buffer.capacity=20000",
    "actor_manager.n_envs_per_actor=1",
    "trainer.warmup_period=500",
    "trainer.eval_interval=100",
    "trainer.eval_episodes=1",
    "trainer.eval_max_steps=300",
    "trainer.max_opts=200",  # two evaluations
]


def pong_actors(tiny: bool) -> int:
    """Part 5's actor processes: all cores but two (one when tiny)."""
    return 1 if tiny else max(1, (os.cpu_count() or 4) - 2)


def pong_layout(device: str, tiny: bool, policy_dtype: str) -> list[str]:
    """Part 5's overrides: the Pong recipe on ``device`` with :func:`pong_actors` actors acting in
    ``policy_dtype``."""
    actors = pong_actors(tiny)
    return [
        *("experiment=dqn_pong_async", f"device={device}", f"actor_manager.n_actors={actors}"),
        f"actor_manager.policy_dtype={policy_dtype}",
        *(TINY_PONG if tiny else []),
    ]


def pong(
    device: str, seconds: float, tiny: bool, run_dir: Path, policy_dtype: str
) -> dict[str, Any]:
    """Part 5 (with part 4): train ``experiment=dqn_pong_async`` for ``seconds`` with actors
    acting in ``policy_dtype``, then stop it as a Ctrl-C does; its throughput, evaluations and
    GPU utilisation."""
    actors = pong_actors(tiny)
    args = [*pong_layout(device, tiny, policy_dtype), f"run_dir={run_dir}", "progress=false"]
    command = [sys.executable, "-m", "border_py.cli", "train", *args]
    log = (run_dir.parent / "pong.log").open("w")
    gpu = (torch.device(device).index or 0) if device.startswith("cuda") else 0
    with Utilisation(gpu) as utilisation:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _stop_after(child, seconds)
        finally:  # never leave the run behind (its actors die with it)
            if child.poll() is None:
                child.kill()
                child.wait()
    log.close()
    summary = {"actors": actors, "policy_dtype": policy_dtype, "exit_code": child.returncode}
    return summary | _throughput(run_dir) | {"gpu_utilisation": utilisation.summary()}


def _stop_after(child: subprocess.Popen, seconds: float) -> None:
    """Let ``child`` (``border train``) run ``seconds``, then stop it as a Ctrl-C does (the final
    checkpoint, exit 130), and as a second one does if the first takes over 5 minutes."""
    try:
        child.wait(timeout=seconds)
        return
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=300)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)


def _throughput(run_dir: Path) -> dict[str, Any]:
    """Frames/s and opt/s (medians of the recorded windows) and the evaluations over time."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])

    def values(tag: str) -> list[Any]:
        return list(events.Scalars(tag)) if tag in tags else []

    env_rate, opt_rate = values("perf/env_steps_per_sec"), values("perf/opt_steps_per_sec")
    started = events.FirstEventTimestamp() if tags else 0.0
    return {
        "frames_per_sec": _median([e.value * FRAME_SKIP for e in env_rate]),
        "opt_per_sec": _median([e.value for e in opt_rate if e.value > 0]),
        "evaluations": [
            {"seconds": round(e.wall_time - started, 1), "opt_steps": e.step, "return": e.value}
            for e in values("eval/return_mean")
        ],
    }


def _median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


# -- 6. bounds ---------------------------------------------------------------------------------


def bounds(device: str, tiny: bool, policy_dtype: str, run: dict[str, Any]) -> dict[str, Any]:
    """Part 6: part 5's layout taken apart by :func:`pixel_bounds.stages` (the learner on
    ``device``, the actors' parts on this CPU), and part 5's ``run`` against those bounds."""
    from async_throughput import load_config  # benchmarks/: this script's folder
    from pixel_bounds import stages

    config = load_config(pong_layout(device, tiny, policy_dtype))
    sizes = argparse.Namespace(seconds=0.3 if tiny else 5.0, fill=2000 if tiny else 20_000)
    f, _ = stages(config, sizes)  # (the bare rate measured once: part 5 ran before)
    figures = {
        k: f[k]
        for k in (
            "actor_cores",
            "n_envs_per_actor",
            "policy_dtype",
            "bare_opt_per_sec",
            "learner_opt_per_sec",
            "raw_env_steps_per_sec",
            "actor_us_per_step",
            "learner_bound_env_steps_per_sec",
            "actor_bound_env_steps_per_sec",
            "binding",
        )
    }
    frames, opts = run.get("frames_per_sec"), run.get("opt_per_sec")
    env = None if frames is None else frames / FRAME_SKIP
    figures["run_env_steps_per_sec"], figures["run_opt_per_sec"] = env, opts
    figures["run_opt_vs_bare"] = None if opts is None else opts / f["bare_opt_per_sec"]
    figures["run_env_vs_bound"] = None if env is None else env / f["bound_env_steps_per_sec"]
    return figures


# -- the command -------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="CI's size: seconds, not minutes")
    parser.add_argument("--minutes", type=float, default=4.0, help="of part 5's training")
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    parser.add_argument(
        "--policy-dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="part 5's actors (auto: bfloat16 on a CPU with AMX)",
    )
    args = parser.parse_args()
    if args.policy_dtype == "auto":
        args.policy_dtype = "bfloat16" if native_bfloat16() else "float32"
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    figures: dict[str, Any] = {"device": args.device, "tiny": args.tiny, "torch": torch.__version__}
    if args.device.startswith("cuda"):
        figures["gpu"] = torch.cuda.get_device_name(torch.device(args.device))

    def part(name: str, run: Callable[[], Any]) -> None:
        start = time.perf_counter()
        figures[name] = run()
        print(f"{name} ({time.perf_counter() - start:.0f} s): {json.dumps(figures[name])}")

    part("gpu_tests", lambda: gpu_tests(args.device, args.out))
    part("learner", lambda: learner(args.device, args.tiny))
    part("h2d", lambda: h2d(args.device))
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        seconds = 90.0 if args.tiny else args.minutes * 60  # tiny: its own budget ends it
        run_dir = Path(tmp) / "run"
        part("pong", lambda: pong(args.device, seconds, args.tiny, run_dir, args.policy_dtype))
    part("bounds", lambda: bounds(args.device, args.tiny, args.policy_dtype, figures["pong"]))
    figures["gpu_tests_ok"] = figures["gpu_tests"]["exit_code"] == 0
    figures["pong_ok"] = figures["pong"]["exit_code"] in (0, 130) and bool(
        figures["pong"]["opt_per_sec"]
    )
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print("RESULT " + json.dumps(figures))
    return 0 if figures["gpu_tests_ok"] and figures["pong_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
