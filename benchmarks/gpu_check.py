"""One command for a machine with a GPU: is border-py right there, and how fast is it?

    python benchmarks/gpu_check.py                          # --device cuda, under 8 minutes
    python benchmarks/gpu_check.py --device cpu --tiny      # the same code on CPU (CI), < 2 min

Five parts, printed as they finish and written to ``--out`` (JSON), then one ``RESULT {json}``:

1. **parity**: one update of DQN (an MLP, and the dueling Nature CNN on Atari shapes), IQN and
   SAC from the same weights and batch, on the CPU and on ``--device`` (TF32 off, the same
   random draws): the relative difference of the loss and of the parameter update (norm of the
   difference over the norm of the CPU's update). Each must be <= 1e-4.
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

Exit status 1 when a parity figure is above its tolerance or the training run fails.
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

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.dqn import DQN
from border_py.agents.inference import native_bfloat16
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.transitions import Transitions

TOLERANCE = 1e-4
ATARI_OBS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
FRAME_SKIP = 4  # ALE frames per env step in env=atari


# -- 1. parity ---------------------------------------------------------------------------------


def _batch(obs_space: gym.Space, action_space: gym.Space, n: int = 32) -> Transitions:
    """A batch of ``n`` random transitions of the spaces' shapes (the same for every call)."""
    assert isinstance(obs_space, gym.spaces.Box)
    rng = np.random.default_rng(3)
    shape = (n, *obs_space.shape)

    def obs() -> np.ndarray:
        if obs_space.dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        return rng.normal(size=shape).astype(np.float32)

    if isinstance(action_space, gym.spaces.Discrete):
        action = rng.integers(0, int(action_space.n), n)
    else:
        action = rng.uniform(-1, 1, (n, *action_space.shape)).astype(np.float32)
    reward = rng.normal(size=n).astype(np.float32)
    return Transitions(obs(), action, reward, obs(), np.full(n, 0.97, np.float32))


def _learned(agent: Any) -> list[torch.Tensor]:
    """Every tensor the agent's update changes: its networks' parameters and SAC's log-alpha."""
    tensors = [
        p for m in vars(agent).values() if isinstance(m, torch.nn.Module) for p in m.parameters()
    ]
    return tensors + [t for t in vars(agent).values() if isinstance(t, torch.Tensor)]


def _same_draws(agent: Any, seed: int) -> None:
    """Make the update's random draws come from one CPU generator, whatever the device."""
    generator = torch.Generator().manual_seed(seed)
    device = agent.device
    if isinstance(agent, IQN):
        agent._sample_taus = lambda b, n: torch.rand(b, n, generator=generator).to(device)
    if isinstance(agent, SAC):
        agent.standard_normal = lambda shape, dtype: torch.randn(
            shape, generator=generator, dtype=dtype
        ).to(device)


def _one_update(make: Callable[[str], Any], batch: Transitions, device: str) -> tuple[float, list]:
    """The loss and the parameter update of one ``update(batch)`` of a fresh agent on ``device``."""
    agent = make(device)
    _same_draws(agent, 7)
    before = [t.detach().cpu().clone() for t in _learned(agent)]
    metrics = agent.update(batch)
    after = [t.detach().cpu() for t in _learned(agent)]
    loss = float(next(v for k, v in metrics.items() if "loss" in k))
    return loss, [a - b for a, b in zip(after, before, strict=True)]


def parity(device: str) -> dict[str, dict[str, float]]:
    """Part 1: the relative differences of each agent's loss and update, CPU against ``device``."""
    torch.backends.cuda.matmul.allow_tf32 = False  # full float32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    vector, two = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    six = gym.spaces.Discrete(6)
    pendulum = (gym.spaces.Box(-8, 8, (3,)), gym.spaces.Box(-2, 2, (1,)))
    cases: dict[str, tuple[Callable[[str], Any], Transitions]] = {
        "dqn_mlp": (lambda d: DQN(vector, two, d, hidden_sizes=[64, 64]), _batch(vector, two)),
        "dqn_nature_cnn": (
            lambda d: DQN(ATARI_OBS, six, d, hidden_sizes=[512], dueling=True),
            _batch(ATARI_OBS, six),
        ),
        "iqn": (lambda d: IQN(vector, two, d, hidden_sizes=[64]), _batch(vector, two)),
        "sac": (lambda d: SAC(*pendulum, d, hidden_sizes=[64, 64]), _batch(*pendulum)),
    }
    out = {}
    for name, (make, batch) in cases.items():
        loss_cpu, step_cpu = _one_update(make, batch, "cpu")
        loss_dev, step_dev = _one_update(make, batch, device)
        diff = sum(float((a - b).norm() ** 2) for a, b in zip(step_cpu, step_dev, strict=True))
        norm = sum(float(a.norm() ** 2) for a in step_cpu)
        out[name] = {
            "loss_rel": abs(loss_cpu - loss_dev) / max(abs(loss_cpu), 1e-12),
            "update_rel": (diff / max(norm, 1e-30)) ** 0.5,
        }
    return out


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
            seconds=1.0 if tiny else 6.0,
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
]


def pong(
    device: str, seconds: float, tiny: bool, run_dir: Path, policy_dtype: str
) -> dict[str, Any]:
    """Part 5 (with part 4): train ``experiment=dqn_pong_async`` for ``seconds`` with actors
    acting in ``policy_dtype``, then stop it as a Ctrl-C does; its throughput, evaluations and
    GPU utilisation."""
    actors = 1 if tiny else max(1, (os.cpu_count() or 4) - 2)
    args = [
        *("experiment=dqn_pong_async", f"device={device}", f"actor_manager.n_actors={actors}"),
        f"actor_manager.policy_dtype={policy_dtype}",
        *(f"run_dir={run_dir}", "progress=false", *(TINY_PONG if tiny else [])),
    ]
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

    part("parity", lambda: parity(args.device))
    part("learner", lambda: learner(args.device, args.tiny))
    part("h2d", lambda: h2d(args.device))
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        seconds = 90.0 if args.tiny else args.minutes * 60  # tiny: its own budget ends it
        run_dir = Path(tmp) / "run"
        part("pong", lambda: pong(args.device, seconds, args.tiny, run_dir, args.policy_dtype))
    worst = max(v for agent in figures["parity"].values() for v in agent.values())
    figures["parity_ok"] = worst <= TOLERANCE
    figures["pong_ok"] = figures["pong"]["exit_code"] in (0, 130) and bool(
        figures["pong"]["opt_per_sec"]
    )
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print("RESULT " + json.dumps(figures))
    return 0 if figures["parity_ok"] and figures["pong_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
