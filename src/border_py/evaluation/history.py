"""A run's selection evaluations as ``evaluations.npz``, in the layout of Stable-Baselines3's
``EvalCallback`` (the file RL Zoo's plot scripts read, e.g. ``rl_zoo3.plots.all_plots``).

The file holds three arrays:

- ``timesteps`` (int64, ``[n_evals]``): the env steps after which the evaluated weights were
  taken (the run's ``eval/env_steps``);
- ``results`` (float64, ``[n_evals, episodes]``): each episode's return;
- ``ep_lengths`` (int64, ``[n_evals, episodes]``): each episode's steps.

Every evaluation of a run plays ``trainer.eval_episodes`` episodes, so the rows are equally long.
Where they are not (a resume that changed ``trainer.eval_episodes``; an async run's evaluations of
more episodes than the evaluator's message holds, whose first episodes only reach the learner),
a short row is padded: ``results`` with NaN, ``ep_lengths`` with 0 (no episode has 0 steps), so
``np.nanmean(results, axis=1)`` is each evaluation's mean.

The learner rewrites the whole file at every evaluation (atomically, fsynced, never through a
link: :func:`~border_py.files.write_file`). A resumed run reads it back and keeps the
evaluations its checkpoint counts, in order: those an earlier session made after that checkpoint
belong to an abandoned timeline, as TensorBoard's events after it do.
"""

from __future__ import annotations

import logging
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from border_py.files import open_regular, write_file
from border_py.resources import MAX_EVAL_EPISODES

__all__ = ["Evaluations", "read_evaluations"]

log = logging.getLogger(__name__)

KEYS = ("timesteps", "results", "ep_lengths")
ROW_BYTES = MAX_EVAL_EPISODES * 16 + 8  # the most one evaluation takes in the file
OVERHEAD = 4096  # zip and npy headers


@dataclass
class Evaluations:
    """Every selection evaluation of a run, in order: the env steps of its weights, its episodes'
    returns and lengths."""

    timesteps: list[int] = field(default_factory=list)
    results: list[list[float]] = field(default_factory=list)
    lengths: list[list[int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.timesteps)

    def append(self, env_steps: int, returns: list[float], lengths: list[int]) -> None:
        """Add an evaluation of the weights taken after ``env_steps`` env steps."""
        self.timesteps.append(int(env_steps))
        self.results.append([float(r) for r in returns])
        self.lengths.append([int(n) for n in lengths])

    def add(
        self, path: Path, env_steps: int, returns: list[float], lengths: list[int], episodes: int
    ) -> None:
        """Append an evaluation of ``episodes`` episodes (those of ``returns`` and ``lengths``:
        the first ones only, when fewer came, said in a warning) and write the file at ``path``;
        a failed write is a warning (the next evaluation writes the whole file again)."""
        if len(returns) < episodes:
            log.warning(
                "%s: the evaluation after %d env steps holds the first %d of its %d episodes (the"
                " rest did not fit the evaluator's message); its row is padded",
                path.name,
                env_steps,
                len(returns),
                episodes,
            )
        self.append(env_steps, returns, lengths)
        try:
            self.write(path)
        except OSError as exc:
            log.warning("%s: not written (%s); the next evaluation tries again", path, exc)

    def arrays(self) -> dict[str, np.ndarray]:
        """The file's arrays (short rows padded, see the module docstring)."""
        width = max((len(row) for row in self.results), default=0)
        results = np.full((len(self), width), np.nan, dtype=np.float64)
        lengths = np.zeros((len(self), width), dtype=np.int64)
        for i, (returns, steps) in enumerate(zip(self.results, self.lengths, strict=True)):
            results[i, : len(returns)] = returns
            lengths[i, : len(steps)] = steps
        return {
            "timesteps": np.asarray(self.timesteps, dtype=np.int64),
            "results": results,
            "ep_lengths": lengths,
        }

    def write(self, path: Path) -> None:
        """Publish the file at ``path`` (see :func:`~border_py.files.write_file`).

        Raises:
            OSError: it could not be written; the earlier file is as it was.
        """
        arrays = self.arrays()
        write_file(path, lambda handle: np.savez(handle, **arrays))  # type: ignore[arg-type]


def read_evaluations(path: Path, keep: int) -> Evaluations:
    """The first ``keep`` evaluations of the file at ``path`` (a resumed run's: ``keep`` is how
    many its checkpoint counts). Fewer when it holds fewer (a run of an earlier version, which
    wrote none), none when it is unreadable: each said in a warning, and the file is written anew
    from what is kept at the run's next evaluation.

    The file is data: no pickle is loaded, a link or a non-regular file is refused, and its size
    is bounded by what ``keep`` evaluations can take.
    """
    if keep <= 0:
        return Evaluations()
    try:
        evaluations = _read(path, keep)
    except FileNotFoundError:
        evaluations = Evaluations()
    except (OSError, ValueError, KeyError, MemoryError, zipfile.BadZipFile) as exc:
        log.warning(
            "%s: unreadable (%s); it is written anew from this session's evaluations", path, exc
        )
        return Evaluations()
    if len(evaluations) < keep:
        log.warning(
            "%s holds %d of the %d evaluations the checkpoint counts; the evaluations from now on"
            " are added after them",
            path,
            len(evaluations),
            keep,
        )
    return evaluations


def _read(path: Path, keep: int) -> Evaluations:
    """The first ``keep`` rows of the file (see :func:`read_evaluations`).

    Raises:
        OSError: missing, a link, not a regular file, or larger than ``keep`` rows can be.
        ValueError: not the arrays this module writes.
    """
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        limit = keep * ROW_BYTES + OVERHEAD
        if size > limit:
            raise OSError(f"{size} bytes, more than {keep} evaluations take")
        with np.load(handle, allow_pickle=False) as npz:
            if any(info.compress_type != zipfile.ZIP_STORED for info in npz.zip.infolist()):
                raise ValueError("compressed members (border writes them stored)")
            _check_declared_sizes(npz.zip)
            timesteps, results, lengths = (npz[key] for key in KEYS)
    rows = len(timesteps)
    if not (
        timesteps.ndim == 1
        and np.issubdtype(timesteps.dtype, np.integer)
        and np.issubdtype(results.dtype, np.floating)
        and np.issubdtype(lengths.dtype, np.integer)
        and results.ndim == lengths.ndim == 2
        and results.shape == lengths.shape
        and results.shape[0] == rows
    ):
        raise ValueError("not timesteps [n], results and ep_lengths [n, episodes]")
    evaluations = Evaluations()
    for i in range(min(rows, keep)):
        played = lengths[i] > 0  # padding is 0 steps
        evaluations.append(
            int(timesteps[i]), results[i][played].tolist(), lengths[i][played].tolist()
        )
    return evaluations


def _check_declared_sizes(archive: zipfile.ZipFile) -> None:
    """Refuse a member whose ``.npy`` header declares more data than the member holds (numpy
    allocates what the header says before it reads: a small file could ask for terabytes).

    Raises:
        ValueError: a header of another format version, or larger than its member.
    """
    for info in archive.infolist():
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError(f"{info.filename}: .npy format {version}, not 1.0 or 2.0")
        if int(np.prod(shape, dtype=object)) * dtype.itemsize > info.file_size:
            raise ValueError(f"{info.filename}: its header declares {shape}, more than it holds")
