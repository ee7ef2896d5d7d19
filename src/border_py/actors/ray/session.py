"""The learner's Ray session: starting a local Ray, joining a cluster, and leaving as it was found.

``address=null`` starts a local Ray that listens on the loopback interface only and keeps its files
in a private dir of its own (:func:`start_local_ray`), stopped (and the dir removed) again when the
actors stop; ``auto``, ``host:port`` or ``ray://host:port`` join a running cluster (its address is
probed first, :func:`check_address`; a warning without token authentication: the learner
unpickles what the cluster's actors send); a process already connected to Ray (``ray.init``
called before) keeps its connection. Ray replaces the SIGTERM handler when it connects: border's
stop-signal handlers are put back right after.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from border_py.config import require
from border_py.errors import ConfigError, first_line
from border_py.resources import usable_cores

__all__ = [
    "check_address",
    "connect",
    "leave",
    "loopback_ray",
    "private_temp_dir",
    "start_local_ray",
]

log = logging.getLogger(__name__)

PROBE_SECONDS = 3.0  # how long the check of a cluster address waits for a TCP connection
LOOPBACK = ("127.0.0.1", "::1")
TOKEN_AUTH = (2, 52)  # the first Ray with token authentication
# who owns the session, so who ends it: this process started Ray, joined a cluster, or its
# caller had connected before
LOCAL, CLUSTER, CALLER = "local", "cluster", "caller"
PRIVATE = 0o077  # the umask of a local Ray's processes: their files are the user's alone
# the longest socket path a local Ray makes under its temp dir (session_<date>_<time>_<us>_<pid>
# with a 7-digit pid, sockets/plasma_store), and the longest path a socket may have
SOCKET_TAIL = len("/session_2026-01-01_00-00-00_000000_1234567/sockets/plasma_store")
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107
_temp_dirs: list[Path] = []  # the private dir of the local Ray this process runs (see leave)


def check_address(address: str | None) -> None:
    """Refuse a malformed ``address``; for ``host:port`` and ``ray://host:port``, one whose port
    takes no TCP connection (Ray's own connect would retry for minutes)."""
    if address is None or address == "auto":
        return
    text = address if isinstance(address, str) else ""
    target = text.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    require(
        "address",
        bool(host) and port.isdigit(),
        "null (a local Ray), auto, host:port or ray://host:port",
        address,
    )
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise ConfigError(
            f"address={address!r}: no Ray cluster answers there ({exc.strerror or exc});"
            " start one with `ray start --head`, or set actor_manager.address=null for a local"
            " Ray"
        ) from None


def connect(
    address: str | None, n_actors: int, cpus_per_actor: float, object_store_memory: int | None
) -> str:
    """Join Ray as ``address`` says (or keep this process's connection) for ``n_actors`` actors
    of ``cpus_per_actor`` CPUs; return who owns the session (:data:`LOCAL`, :data:`CLUSTER` or
    :data:`CALLER`), for :func:`leave`."""
    import ray

    if ray.is_initialized():
        log.info("Ray: using this process's connection (ray.init was called before)")
        return CALLER
    with _signal_handlers_kept():
        try:
            if address is None:
                _start_for(n_actors, cpus_per_actor, object_store_memory)
                return LOCAL
            _join(address)
            return CLUSTER
        except ConnectionError as exc:
            token = ""
            if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
                token = " (one with token authentication needs RAY_AUTH_MODE=token here)"
            raise ConfigError(
                f"actor_manager.address={address!r}: no Ray cluster to join"
                f" ({first_line(exc)}){token}; start one with `ray start --head`, or set"
                " actor_manager.address=null for a local Ray"
            ) from None


def _start_for(n_actors: int, cpus_per_actor: float, object_store_memory: int | None) -> None:
    """Start a local Ray that advertises this machine's cores, or the actors' CPUs if more."""
    cpus = usable_cores()
    needed = math.ceil(n_actors * cpus_per_actor)
    if needed > cpus:
        log.warning(
            "%d actors x %g CPU on %d CPU cores: the local Ray advertises %d"
            " CPUs, so actors, learner and evaluator share the cores",
            n_actors,
            cpus_per_actor,
            cpus,
            needed,
        )
    start_local_ray(max(cpus, needed), object_store_memory)


def _join(address: str) -> None:
    """Join the running cluster at ``address``, warning when that is unauthenticated."""
    import ray

    unauthenticated = _without_token_auth()
    if unauthenticated:
        log.warning(
            "actor_manager.address=%r: joining a Ray cluster without token"
            " authentication (%s): whoever reaches its ports can run code on it,"
            " and in this learner, which unpickles what its actors send; use it on"
            ' a trusted network only (README, "Beyond one machine: Ray")',
            address,
            unauthenticated,
        )
    ray.init(address=address)


def leave(owner: str | None) -> None:
    """End the session as :func:`connect` found it: stop the local Ray it started (and remove its
    private dir, :func:`private_temp_dir`), leave the cluster it joined, keep the caller's
    connection."""
    import ray

    if owner == LOCAL:
        ray.shutdown(wait_for_processes=True)
        while _temp_dirs:  # its processes are gone: nothing of it is left to read its files
            shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)
        log.info("stopped the local Ray")
    elif owner == CLUSTER:
        ray.shutdown()


def start_local_ray(num_cpus: int, object_store_memory: int | None = None) -> None:
    """Start a Ray of this machine for this process, listening on the loopback interface only
    (no dashboard), its files in a private dir (:func:`private_temp_dir`, removed by
    :func:`leave`, or here when Ray does not start); a warning if Ray still chose another
    address.

    Args:
        num_cpus: CPUs the Ray node advertises.
        object_store_memory: bytes of its object store (None: Ray's default, a share of RAM).
    """
    import ray

    temp_dir = private_temp_dir()
    try:
        with loopback_ray(), own_sessions():
            ray.init(
                address="local",
                num_cpus=num_cpus,
                object_store_memory=object_store_memory,
                include_dashboard=False,
                _node_ip_address=LOOPBACK[0],
                _temp_dir=str(temp_dir / "ray"),
            )
    except BaseException:  # what it started is stopped, and its dir goes with it
        with contextlib.suppress(Exception):  # the error that stopped ray.init is the one said
            ray.shutdown(wait_for_processes=True)
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    _temp_dirs.append(temp_dir)
    ip = ray.util.get_node_ip_address()
    if ip not in LOOPBACK:
        log.warning("the local Ray took the address %s: it may listen beyond this machine", ip)


def private_temp_dir() -> Path:
    """A fresh dir (``border-ray-*``, mode 0700) for a local Ray's session files: its logs (the
    runtime env agent's holds ``runtime_env`` in clear, ``env_vars`` included), sockets and spilled
    objects. Ray makes its own dirs in it world-writable (``ray`` and below): the 0700 dir above
    them keeps every other user out.

    It is made where Ray's own temp dir would be (``RAY_TMPDIR``, else ``TMPDIR`` on Linux, else
    ``/tmp``), or in ``/tmp`` when Ray's socket paths would be too long for Linux under that.
    """
    root = os.environ.get("RAY_TMPDIR") or (
        os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None
    )
    longest = len(os.path.join(root or "/tmp", "border-ray-12345678", "ray")) + SOCKET_TAIL
    if root is None or longest > SOCKET_PATH_MAX:
        root = "/tmp"
    return Path(tempfile.mkdtemp(prefix="border-ray-", dir=root))


@contextlib.contextmanager
def own_sessions() -> Iterator[None]:
    """Within the block, the processes Ray starts for a local Ray (its servers; the workers its
    raylet forks) start in a session of their own, as the forkserver ignores stop signals: a
    SIGTERM to border's process group (``timeout``, ``kill -- -<pgid>``, a scheduler) then reaches
    border alone, whose graceful stop still needs them, instead of ending Ray under it (Ray blocks
    only SIGINT). They still die with border (Ray's fate sharing: the parent-death signal). Their
    umask is :data:`PRIVATE`: the files they write (logs) are readable by the user alone.
    """
    from ray._private import services

    popen = services.ConsolePopen

    class SessionPopen(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs, start_new_session=True, umask=PRIVATE)

    services.ConsolePopen = SessionPopen  # type: ignore[misc]
    try:
        yield
    finally:
        services.ConsolePopen = popen  # type: ignore[misc]


@contextlib.contextmanager
def loopback_ray() -> Iterator[None]:
    """Within the block, Ray keeps 127.0.0.1 as this machine's node address (a local Ray's node,
    or a loopback cluster address to join).

    Ray's servers listen on every interface unless the node's address is a loopback one, and on
    Linux Ray replaces a loopback address it is given with the machine's routable one. It keeps
    it only when it runs as on macOS and Windows, one machine per cluster (Ray's switch
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which Ray reads once, at import: set here for the
    block).
    """
    from ray._private import ray_constants

    kept = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if kept is None:
            del ray_constants.ENABLE_RAY_CLUSTER
        else:
            ray_constants.ENABLE_RAY_CLUSTER = kept


def _without_token_auth() -> str | None:
    """Why joining a cluster from here is unauthenticated, or None when it uses Ray's tokens."""
    import ray

    version = tuple(int(part) for part in re.findall(r"\d+", ray.__version__)[:2])
    if version < TOKEN_AUTH:
        return f"Ray {ray.__version__} has none; it came with Ray 2.52"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return "RAY_AUTH_MODE is not token here"
    return None


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put the SIGINT/SIGTERM handlers back after the block (``ray.init`` replaces SIGTERM's),
    so border's first-signal-graceful, second-signal-immediate stop keeps working."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
