"""Starting the run's children and ending them, and in every child, hygiene and death with the
learner.

The learner handles SIGINT/SIGTERM (:mod:`border_py.processes.signals`); its children never do. A
child is started with SIGINT ignored (:func:`start_process`; an ignored signal stays ignored across
fork and exec, and Python keeps it so), so it cannot be interrupted at any moment of its life,
startup included. With the forkserver, the server is started that way (SIGTERM ignored too: a
SIGTERM to the process group must not end it, and with it its children) and its children inherit
it; with spawn, the learner ignores SIGINT for the few milliseconds of each child's start (a Ctrl-C
that lands exactly then is lost: press it again). A child dies with the learner whoever its parent
is (with the forkserver, its parent is the server): a thread waits on the learner's end of the pipe
``multiprocessing`` gives every child (it reaches EOF when the learner is gone) and ends the
process; the kernel's parent-death signal covers the immediate parent (a child whose parent died
before it armed that signal exits as it starts). A forkserver that dies takes its children with
it: the learner tells them apart from children that failed (:func:`lost_with_forkserver`) and
starts the next ones from a new server.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing import forkserver
from multiprocessing.context import BaseContext, ForkServerContext, SpawnContext
from types import FrameType
from typing import Any, cast

from border_py.errors import TextFormatter

__all__ = [
    "Context",
    "die_with_parent",
    "end_in_stages",
    "forkserver_context",
    "init_child",
    "lost_with_forkserver",
    "lower_priority",
    "show_name",
    "signals_ignored",
    "start_process",
    "warm_forkserver",
    "worker_cpu",
]

log = logging.getLogger(__name__)

# the start methods border-py runs its children with (typeshed's BaseContext has no Process)
Context = SpawnContext | ForkServerContext

LEARNER_GONE_EXIT = 3  # exit status of a child whose learner died
PARENT_GONE_EXIT = 4  # exit status of a child whose parent died before it armed its death signal
FORKSERVER_LOST_EXIT = 255  # what multiprocessing reads for a child whose forkserver died
TERMINATE_SECONDS = 5.0  # how long a child may take to exit after SIGTERM before it is killed
SERVER_EXIT_SECONDS = 1.0  # how long a lost forkserver's exit may take to show (see below)


@contextlib.contextmanager
def signals_ignored(*signums: int) -> Iterator[None]:
    """Ignore ``signums`` in this process for the duration (main thread only; elsewhere a no-op):
    a child started meanwhile inherits the ignored dispositions."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def start_process(ctx: BaseContext, process: Any) -> int | None:
    """Start ``process`` (of context ``ctx``) with SIGINT ignored from its first instruction on;
    return the pid of the forkserver that forked it (None: another start method).

    With the forkserver only the server's own start needs it (:func:`_ensure_forkserver`): the
    children it forks take the server's dispositions. A server that died meanwhile is replaced
    by a new one first.
    """
    with _own_start_method(ctx):
        if ctx.get_start_method() == "forkserver":
            _ensure_forkserver()
            process.start()
            return cast(int, vars(forkserver)["_forkserver"]._forkserver_pid)
        with signals_ignored(signal.SIGINT):
            process.start()
        return None


def lost_with_forkserver(server: int | None, exitcode: int | None) -> bool:
    """Whether a child of the forkserver ``server`` whose exit code reads ``exitcode`` died because
    that server did (it was killed from outside: a restart can help).

    The server is the one process that learns its children's exit statuses; once it is gone,
    ``multiprocessing`` reads each of them as :data:`FORKSERVER_LOST_EXIT`, and the children die
    by their parent-death signal (:func:`die_with_parent`). A child that exits with that status
    itself under a live server did fail. The server's exit is looked at without reaping it (the
    next :func:`start_process` does, when it starts a new server), waiting up to
    :data:`SERVER_EXIT_SECONDS` for it to show (the server's end of the child's status pipe closes
    just before it does); a server reaped already is gone too. Where ``os.waitid`` is missing
    (macOS), always False.
    """
    if server is None or exitcode != FORKSERVER_LOST_EXIT or not hasattr(os, "waitid"):
        return False
    deadline = time.monotonic() + SERVER_EXIT_SECONDS
    while True:
        try:
            if os.waitid(os.P_PID, server, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already: a new server was started since
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def _ensure_forkserver() -> None:
    """Start the forkserver unless it runs, with SIGINT and SIGTERM ignored.

    A stop signal sent to the process group (a terminal's Ctrl-C, ``timeout``'s SIGTERM) is the
    learner's to handle. The server ignores SIGINT itself, but not SIGTERM, and its death would
    kill the children it forked (their parent-death signal) in the middle of the graceful stop.
    Its children take both dispositions; :func:`init_child` then installs their SIGTERM handler.
    """
    with signals_ignored(signal.SIGINT, signal.SIGTERM):
        forkserver.ensure_running()


# the process that imported this module: in a child the forkserver forked, that server
_IMPORTED_BY = os.getpid()

STDLIB_METHODS = ("fork", "spawn", "forkserver")
# what the forkserver imports once, so that each child it forks starts with them loaded; then
# the objects loaded so far are frozen (border_py.frozen_heap: a faster exit of the server)
FORKSERVER_PRELOAD = [
    "border_py.actors.process",
    "border_py.evaluation.process",
    "border_py.frozen_heap",
]


def forkserver_context() -> ForkServerContext:
    """The forkserver context of the run's children, its server preloading their modules."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    return ctx


def warm_forkserver() -> None:
    """Start the forkserver now (see :func:`_ensure_forkserver`), so that it imports torch and
    the children's modules on another core while the learner imports its own."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        forkserver_context()
        _ensure_forkserver()


def end_in_stages(processes: list[Any], grace: float) -> None:
    """End ``processes`` (started children, each asked to stop): wait ``grace`` seconds in all
    for them to exit, then SIGTERM those left and wait :data:`TERMINATE_SECONDS`, then SIGKILL
    those that ignored it; every one that exited is reaped."""
    _join_all(processes, grace)
    for p in processes:
        if p.is_alive():
            log.warning("%s did not exit: terminating", p.name)
            p.terminate()
    _join_all(processes, TERMINATE_SECONDS)
    for p in processes:
        if p.is_alive():
            log.error("%s ignored SIGTERM: killing", p.name)
            p.kill()
            p.join(timeout=5)


def _join_all(processes: list[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds in total for every process to exit (and reap those that did)."""
    deadline = time.monotonic() + timeout
    while True:
        sentinels = [p.sentinel for p in processes if p.is_alive()]
        left = deadline - time.monotonic()
        if not sentinels or left <= 0:
            break
        multiprocessing.connection.wait(sentinels, timeout=left)
    for p in processes:
        if not p.is_alive():
            p.join(timeout=0)


@contextlib.contextmanager
def _own_start_method(ctx: BaseContext) -> Iterator[None]:
    """Tell a child to use ``ctx``'s start method, not a foreign global one.

    A child process takes the global start method of its parent from the data it is started
    with and sets it first thing; inside a worker of joblib's loky (Hydra's joblib launcher) that
    method is ``loky``, which a fresh child does not know ("cannot find context for 'loky'"). In
    that case only, the global method is ``ctx``'s for the duration of the start, then restored.
    """
    current = multiprocessing.get_start_method(allow_none=True)
    if current is None or current in STDLIB_METHODS:
        yield
        return
    multiprocessing.set_start_method(ctx.get_start_method(), force=True)
    try:
        yield
    finally:
        multiprocessing.set_start_method(current, force=True)


def init_child(name: str, stopping: Any = None) -> None:
    """Set up a child process; call it first thing in the child's entry point.

    Ignores SIGINT (as it already did since its start, see :func:`start_process`), obeys SIGTERM only once
    ``stopping.value`` is set (the learner's shutdown has begun: a SIGTERM to the whole process
    group is the learner's to handle), dies with the learner and with its immediate parent, uses
    one thread for torch and for numpy's BLAS and flushes float denormals (:func:`worker_cpu`),
    and logs with a ``name`` prefix. The process takes its ``multiprocessing`` name (``border-actor-0``,
    ``border-evaluator``) as the name ``ps``, ``top`` and ``psutil`` show (:func:`show_name`).
    """
    show_name(multiprocessing.current_process().name)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if stopping is not None and stopping.value:
            os._exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    die_with_parent()
    _release_forkserver()
    _watch_learner()
    worker_cpu()
    handler = logging.StreamHandler()  # plain text: a record's every argument escaped
    handler.setFormatter(TextFormatter(f"[%(asctime)s][{name}][%(levelname)s] - %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def show_name(name: str) -> None:
    """Name this process ``name`` in ``/proc/<pid>/comm`` (what ``ps``, ``top`` and
    ``psutil.Process.name`` show; its first 15 bytes, the kernel's limit), so that a child of the
    forkserver, whose command line is the server's, is told apart from the others (Linux; elsewhere
    a no-op). Threads started after it take the name too."""
    if sys.platform.startswith("linux"):
        pr_set_name = 15
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_name, name.encode()[:15])


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux's
    parent-death signal; elsewhere a no-op); exit at once if its parent is already gone (it died
    before the signal was armed, which then never comes: a forkserver killed while its children
    start)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        parent = _started_by()
        if parent is not None and os.getppid() != parent:
            os._exit(PARENT_GONE_EXIT)


def _started_by() -> int | None:
    """The pid of the process that started this one (None: not known): the forkserver that
    forked it (which imported this module, preloading it: :data:`FORKSERVER_PRELOAD`), else the
    parent ``multiprocessing`` names."""
    if vars(forkserver)["_forkserver"].get_inherited_fds() is not None:  # a forkserver child
        return _IMPORTED_BY if os.getpid() != _IMPORTED_BY else None
    parent = multiprocessing.parent_process()
    return None if parent is None else parent.pid


def worker_cpu() -> None:
    """Run torch and numpy's BLAS on one thread in this process, and flush float denormals to
    zero, for the rest of its life.

    A worker shares the cores with the learner and the other workers; a BLAS that spreads a
    matmul over every core (OpenBLAS does above a size threshold: a policy call of 64 rows through
    a 128x128 layer) spins its threads on cores another process needs: actors of many envs
    deliver far fewer transitions with numpy's default threads than with one
    (``benchmarks/async_throughput.py``; the figures: docs/04-scaling/performance.md). Denormals
    are flushed as in the learner (:func:`border_py.trainers.train.learner_cpu`): a value below
    float32's smallest normal number changes no action, and sends x86 arithmetic down a slow
    path.
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    threadpool_limits(limits=1, user_api="blas")


def _release_forkserver() -> None:
    """Close this child's copy of the fd that keeps the forkserver alive.

    The forkserver exits when every copy of that fd is closed; Python hands one to each child it
    forks, so children kept it (and, through their parent-death signal, themselves) alive after
    the learner died. A child of border-py never starts processes through the forkserver.
    """
    server = vars(forkserver)["_forkserver"]
    if server.get_inherited_fds() is None:  # not a forkserver child
        return
    fd = vars(server).get("_forkserver_alive_fd")
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
        vars(server)["_forkserver_alive_fd"] = None


def _watch_learner() -> None:
    """End this process (and the processes it started) as soon as the learner is gone.

    ``multiprocessing`` gives every child the read end of a pipe whose write end only the process
    that created it (the learner) holds: it reaches EOF exactly when the learner exits or dies.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    sentinel = parent.sentinel

    def watch() -> None:
        multiprocessing.connection.wait([sentinel])
        for child in multiprocessing.active_children():  # e.g. vector-env subprocesses
            with contextlib.suppress(Exception):
                child.kill()
        os._exit(LEARNER_GONE_EXIT)

    threading.Thread(target=watch, name="watch-learner", daemon=True).start()


def learner_alive() -> bool:
    """Whether the learner (the process that started this one) is still running."""
    parent = multiprocessing.parent_process()
    return parent is None or parent.is_alive()


def lower_priority(pid: int, nice: int) -> None:
    """Give process ``pid`` the niceness ``nice`` (from its parent, right after the start, so that
    its imports already run at the lower priority). A no-op where unsupported."""
    if nice and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
        except OSError as exc:
            log.debug("could not lower the priority of %d: %s", pid, exc)
