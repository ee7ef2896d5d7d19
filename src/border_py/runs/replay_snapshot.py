"""A checkpoint's replay-buffer snapshot: one ``.npy`` file per array, memory-mapped when read.

``replay_buffer/`` holds ``<name>.npy`` for each of the buffer's arrays (numpy's own format:
a header, then the array's bytes) and ``arrays.json``, their names, dtypes and shapes. Saving
streams each live array (a view of the buffer's storage) straight into its file: no second copy
is made in memory. Reading maps each file read-only (``numpy.memmap``), which costs no memory
until the buffer copies it chunk by chunk into its own storage (see
:mod:`border_py.replay.chunked`). Nothing is ever unpickled: an ``object`` dtype is refused both
ways. Checkpoints of earlier versions hold one ``replay_buffer.npz`` instead; it is still read
(in full, into memory).
"""

from __future__ import annotations

import functools
import json
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from border_py.errors import ConfigError, first_line
from border_py.files import create_file, fsync_dir, link_refusal, open_regular, read_json
from border_py.layout import BUFFER, BUFFER_FILE_SUFFIX, BUFFER_INDEX, BUFFER_NPZ

__all__ = ["read_snapshot", "snapshot_nbytes", "write_snapshot"]

NAME = re.compile(r"^[A-Za-z0-9_]+$")  # an array's name: its file's name, never a path
WRITE_BYTES = 16 * 2**20  # bytes handed to one write (a copy of rows, for a strided array)


def write_snapshot(checkpoint: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` into ``checkpoint/replay_buffer/`` (a new dir, its files created
    exclusively, never through a link), every file and the dir fsynced.

    Raises:
        OSError: a file could not be written.
        ValueError: a name that is not letters, digits and ``_``, or an ``object`` array.
    """
    folder = checkpoint / BUFFER
    os.mkdir(folder, 0o777)  # the umask decides the mode; an existing entry is an error
    index = {}
    for name, array in arrays.items():
        if not NAME.match(name) or array.dtype.hasobject:
            raise ValueError(f"replay buffer array {name!r} ({array.dtype}): cannot be saved")
        create_file(folder / f"{name}{BUFFER_FILE_SUFFIX}", functools.partial(_write, array))
        index[name] = {"dtype": np.lib.format.dtype_to_descr(array.dtype), "shape": array.shape}
    create_file(folder / BUFFER_INDEX, json.dumps(index, indent=2).encode())
    fsync_dir(folder)


def _write(array: np.ndarray, handle: BinaryIO) -> None:
    """``array`` as a ``.npy`` file (C order) into ``handle``: a C-contiguous array straight from
    its memory, any other a block of rows at a time (:data:`WRITE_BYTES` at most). Python's own
    writes, so a failure is its ``OSError`` with the cause (``File too large``, ``No space left
    on device``), not numpy's count of the bytes written."""
    header = np.lib.format.header_data_from_array_1_0(array)
    header["fortran_order"] = False  # the rows below are written in C order
    np.lib.format.write_array_header_2_0(handle, header)
    if array.flags.c_contiguous:
        data = array.reshape(-1).data.cast("B")
        for start in range(0, len(data), WRITE_BYTES):
            handle.write(data[start : start + WRITE_BYTES])
        return
    rows = max(WRITE_BYTES // max(array[0].nbytes, 1), 1)
    for start in range(0, len(array), rows):
        handle.write(np.ascontiguousarray(array[start : start + rows]).data.cast("B"))


def read_snapshot(checkpoint: Path) -> dict[str, np.ndarray] | None:
    """The snapshot's arrays (read-only memory maps; an older ``.npz``: in memory), or None if
    the checkpoint has none.

    Raises:
        ConfigError: one line: a file is missing, truncated, corrupt, a link, or not an array.
    """
    folder, npz = checkpoint / BUFFER, checkpoint / BUFFER_NPZ
    if folder.is_symlink():
        raise link_refusal(folder)
    if folder.is_dir():
        index = _index(folder)
        return {name: _map(folder / f"{name}{BUFFER_FILE_SUFFIX}", index[name]) for name in index}
    if npz.is_file():
        try:
            with open_regular(npz) as handle, np.load(handle, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise _corrupt(npz, exc) from None
    return None


def snapshot_nbytes(checkpoint: Path) -> tuple[int, bool]:
    """(bytes of the snapshot's arrays, whether reading them holds them in memory: an older
    ``.npz``), from its index or the archive's directory, no data read; (0, False) without one.

    Raises:
        ConfigError: see :func:`read_snapshot`.
    """
    folder, npz = checkpoint / BUFFER, checkpoint / BUFFER_NPZ
    if folder.is_dir() and not folder.is_symlink():
        index = _index(folder)
        return sum(_nbytes(entry) for entry in index.values()), False
    if npz.is_file():
        try:
            with open_regular(npz) as handle, zipfile.ZipFile(handle) as archive:
                return sum(info.file_size for info in archive.infolist()), True
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise _corrupt(npz, exc) from None
    return 0, False


def _index(folder: Path) -> dict[str, dict[str, Any]]:
    """``arrays.json``: each array's name, dtype and shape, checked."""
    file = folder / BUFFER_INDEX
    try:
        index = read_json(file)
        if not isinstance(index, dict):
            raise ValueError("not an object")
        for name, entry in index.items():
            if not NAME.match(name):
                raise ValueError(f"bad array name {name!r}")
            np.dtype(np.lib.format.descr_to_dtype(entry["dtype"]))
            if not all(isinstance(n, int) and n >= 0 for n in entry["shape"]):
                raise ValueError(f"bad shape for {name}")
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise _corrupt(file, exc) from None
    return index


def _nbytes(entry: dict[str, Any]) -> int:
    dtype = np.lib.format.descr_to_dtype(entry["dtype"])
    return int(np.prod(entry["shape"], dtype=np.int64)) * dtype.itemsize


def _map(file: Path, entry: dict[str, Any]) -> np.ndarray:
    """``file``'s array, mapped read-only, once its header matches ``entry`` and its size the
    header (a regular file, never a link)."""
    try:
        with open_regular(file) as handle:
            version = np.lib.format.read_magic(handle)
            header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = header(handle)
            if dtype.hasobject:
                raise ValueError("an object array (it would need pickle)")
            if list(shape) != list(entry["shape"]) or dtype != np.lib.format.descr_to_dtype(
                entry["dtype"]
            ):
                raise ValueError(f"holds {dtype}{list(shape)}, the index says otherwise")
            offset, size = handle.tell(), os.fstat(handle.fileno()).st_size
            need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if size != need:
                raise ValueError(f"{size} bytes, its header makes it {need}")
            if need == offset:  # nothing to map (mmap refuses a length of 0)
                return np.zeros(shape, dtype)
            return np.memmap(
                handle,
                dtype=dtype,
                mode="r",
                offset=offset,
                shape=shape,
                order="F" if fortran else "C",
            )
    except (OSError, ValueError, TypeError) as exc:
        raise _corrupt(file, exc) from None


def _corrupt(file: Path, exc: BaseException) -> ConfigError:
    return ConfigError(f"{file}: corrupt replay-buffer snapshot ({first_line(exc)})")
