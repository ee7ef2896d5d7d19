"""Resource bounds: what this machine offers a run, and the rule for a setting that asks for more.

Before anything starts, a run's estimated needs (replay bytes, the agent's networks and one update,
shared-memory slots, processes, open files, checkpoints on disk) are compared with what the machine
has, and a few settings with a range that makes sense (:data:`MAX_EVAL_EPISODES` and the others
below). Whatever exceeds a bound is refused in one line that states the estimate, the limit and
how to proceed (:func:`bound`); with the top-level ``check_resources=false`` (the command's own: a
resumed run never takes it from its saved config) the same line is only a warning and the run
starts anyway.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from border_py.errors import ConfigError

__all__ = [
    "MAX_ENVS_PER_ACTOR",
    "MAX_EPISODE_STEPS",
    "MAX_EVAL_EPISODES",
    "MAX_HIDDEN_LAYERS",
    "MAX_N_BUFFER",
    "MAX_N_STEP",
    "MAX_PREFETCH",
    "MAX_QUEUE_SIZE",
    "actors_per_core",
    "at_most",
    "available_memory",
    "bound",
    "disk",
    "free_shared_memory",
    "memory",
    "open_files",
    "open_files_limit",
    "shared_memory",
    "size_text",
    "usable_cores",
]

log = logging.getLogger(__name__)

# Actor processes per usable core. The shared-memory transport keeps extra actors cheap (8 actors
# on 2 cores deliver 0.96x the transitions of 2; tests and benchmarks run 4 per core), and envs
# that wait (I/O, a remote simulator) may want more; beyond 8 per core every actor only adds a
# forked Python with torch, its pipes and its share of the learner's polling.
ACTORS_PER_CORE = 8
# Open files the learner holds per local actor: its notices and credits pipes, its process
# sentinel, the forkserver's pipe, and the fds of its shared-memory slots (measured: 6 each).
FDS_PER_ACTOR = 6
RESERVED_FDS = 64  # the learner's own: the evaluator's pipes, logs, TensorBoard, imported libraries
# Episodes of one evaluation: they run one after another in one process, and the mean's standard
# error at 10,000 episodes is already 1% of the returns' spread.
MAX_EVAL_EPISODES = 10_000
# Batches in flight per actor. Each announces itself with a notice of ~360 B in the actor's pipe,
# which holds 64 KiB on Linux: above ~180 an actor can block writing a notice, and misses its
# heartbeats meanwhile. The default is 8.
MAX_QUEUE_SIZE = 128
# Transitions per batch: an actor samples a whole batch with one copy of the weights (Ape-X sends
# 50), the learner copies it into replay between two opt steps, and every slot holds one.
MAX_N_BUFFER = 100_000
# Envs one actor makes and steps one after another: 1024 CartPole envs take 14 ms per vector step
# here, 1024 Atari envs 0.4 s (and minutes to make), closing in on heartbeat_timeout.
MAX_ENVS_PER_ACTOR = 1024
# Steps of one episode (``env.max_episode_steps``, ``trainer.eval_max_steps``): an evaluation plays
# its episodes one after another, and a policy that never ends one (a balanced CartPole) plays to
# the cap. Atari's cap is 27,000 agent steps; 10^7 steps at 1 ms each take about three hours.
MAX_EPISODE_STEPS = 10_000_000
# Batches sampled ahead of the update (``trainer.prefetch``): each is a whole batch in memory (on
# the GPU when the learner has one); 2-4 already hide the sampling behind the update.
MAX_PREFETCH = 64

# Steps one n-step return sums (``agent.n_step``): Rainbow and Ape-X use 3, R2D2 5. Each env of an
# actor keeps that many pending rows of observations (Atari's 28 KiB frames: 28 MiB per env at
# 1000), and at gamma 0.99 the bootstrap's weight gamma^1000 is 4e-5: a longer return is a
# Monte-Carlo one, better had with a gamma nearer 1.
MAX_N_STEP = 1000
# Hidden layers of an agent's networks (the length of ``agent.hidden_sizes``): border's torsos
# and heads are plain MLPs, without the residual connections or normalization that let deeper
# ones train; the shipped configs use 1-3. The footprint builds the networks layer by layer before
# any memory bound (on the meta device, about 0.7 ms per layer: a million layers take minutes).
MAX_HIDDEN_LAYERS = 64

ANYWAY = "check_resources=false to run anyway"


def bound(line: str, enforce: bool) -> None:
    """Refuse a setting that exceeds a bound: raise :class:`ConfigError` with ``line`` (which says
    the estimate, the limit and how to proceed) when ``enforce``, else log it as a warning.

    Args:
        line: ``<key>=<value>: <estimate>, more than <limit>; <what to do>``.
        enforce: the run's ``check_resources``.
    """
    if enforce:
        raise ConfigError(f"{line} (or {ANYWAY})")
    log.warning("check_resources=false: %s; running anyway", line)


def at_most(key: str, value: int, limit: int, what: str, enforce: bool) -> None:
    """Bound a count: ``value`` above ``limit`` (``what``: its unit and why, e.g. "episodes per
    evaluation (...)") goes to :func:`bound`."""
    if value > limit:
        bound(f"{key}={value}: more than {limit:,} {what}; lower it", enforce)


def actors_per_core(n_actors: int, cores: float, where: str, enforce: bool) -> None:
    """Bound ``actor_manager.n_actors`` by :data:`ACTORS_PER_CORE` per core of ``cores``
    (``where``: whose cores, e.g. "usable CPU cores" or "CPUs in the Ray cluster")."""
    limit = int(ACTORS_PER_CORE * cores)
    if n_actors > limit:
        bound(
            f"actor_manager.n_actors={n_actors}: {n_actors} actors on {cores:g} {where}, more"
            f" than {limit} ({ACTORS_PER_CORE} per core); lower it",
            enforce,
        )


def open_files(n_actors: int, enforce: bool) -> None:
    """Bound the learner's open files with ``n_actors`` local actors by its soft limit."""
    limit = open_files_limit()
    need = RESERVED_FDS + FDS_PER_ACTOR * n_actors
    if limit is not None and need > limit:
        bound(
            f"actor_manager.n_actors={n_actors}: the learner needs ~{need} open files"
            f" ({FDS_PER_ACTOR} per actor), more than its limit of {limit} (ulimit -n); lower it"
            " or raise the limit",
            enforce,
        )


def memory(setting: str, what: str, need: int, enforce: bool, remedy: str = "lower it") -> None:
    """Bound ``need`` bytes of ``what`` (e.g. "the replay buffer") by the memory available;
    ``setting`` is the ``key=value`` the refusal starts with, ``remedy`` what to do."""
    available = available_memory()
    if available is not None and need > available[0]:
        bound(
            f"{setting}: {what} needs ~{size_text(need)}, more than the"
            f" {size_text(available[0])} {available[1]}; {remedy}",
            enforce,
        )


def shared_memory(setting: str, what: str, need: int, enforce: bool) -> None:
    """Bound ``need`` bytes of shared memory (``what``, e.g. "the actors' slots") by the room
    free in ``/dev/shm``; ``setting`` is the ``key=value`` the refusal starts with."""
    free = free_shared_memory()
    if free is not None and need > free:
        bound(
            f"{setting}: {what} need ~{size_text(need)} of shared memory, more than the"
            f" {size_text(free)} free in /dev/shm; lower them",
            enforce,
        )


def disk(setting: str, what: str, need: int, where: Path, enforce: bool) -> None:
    """Bound ``need`` bytes of ``what`` (e.g. "the run's checkpoints") by the disk space free where
    ``where`` is (its nearest existing dir); ``setting`` is the ``key=value`` the refusal starts
    with."""
    free = free_disk(where)
    if free is not None and need > free:
        bound(
            f"{setting}: {what} need ~{size_text(need)} of disk, more than the {size_text(free)}"
            f" free in {existing_dir(where)}; lower it",
            enforce,
        )


def size_text(n: float) -> str:
    """Bytes for a person: ``7.3 TiB``, ``21.3 GiB``, ``512 B``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def available_memory() -> tuple[int, str] | None:
    """(bytes, what they are) of memory a run may take: Linux's ``MemAvailable`` (free memory plus
    the caches the kernel can drop); elsewhere the machine's physical memory; None if unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "of memory available"
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "of memory in this machine"
    except (AttributeError, ValueError, OSError):
        return None


def free_shared_memory() -> int | None:
    """Bytes free in ``/dev/shm``, where ``multiprocessing`` puts shared memory (when it lacks room,
    Python silently uses a file in the temp dir instead, on disk); None without ``/dev/shm``."""
    try:
        stat = os.statvfs("/dev/shm")
    except (AttributeError, OSError):
        return None
    return stat.f_bavail * stat.f_frsize


def free_disk(path: Path) -> int | None:
    """Bytes free to this user on the file system of ``path`` (its nearest existing dir); None if
    unknown."""
    try:
        stat = os.statvfs(existing_dir(path))
    except (AttributeError, OSError):
        return None
    return stat.f_bavail * stat.f_frsize


def existing_dir(path: Path) -> Path:
    """``path`` if it exists, else its nearest existing parent (a run dir not made yet)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity, e.g. a Slurm or taskset allocation)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def open_files_limit() -> int | None:
    """The soft limit of open files of this process (``ulimit -n``); None if unlimited or unknown."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft
