"""Reading a checkpoint's ``.pt`` files: sized from their zip directory before torch reads them.

``torch.save`` writes a zip archive whose records are stored, never compressed, so a genuine file
holds its tensors' bytes as they are: loading one takes about the file's own size. ``torch.load``
would inflate a compressed record too, into memory, before anything checks it (a 0.5 MiB record
of zeros inflates to 512 MiB). So, before torch opens a file, its zip directory alone is read
(nothing is decompressed) and the file is refused in one line when it is not a zip archive, when
a record is not stored as it is (``ZIP_STORED``), when its records' sizes add up to more than the
file's own size, or when they are more than the memory available. What torch then reads is no
more than the file on disk: PyTorch refuses a record whose size differs from the tensor the
pickle declares for it.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from border_py import resources
from border_py.errors import ConfigError, first_line
from border_py.files import open_regular


def check_pt(file: Path, handle: IO[bytes]) -> int:
    """The bytes ``handle`` (``file``, open) holds in its records, read from its zip directory.

    Raises:
        ConfigError: one line: not a zip archive, a compressed record, records larger than the
            file, or larger than the memory available.
    """
    size = os.fstat(handle.fileno()).st_size
    try:
        with zipfile.ZipFile(handle) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ConfigError(
            f"{file}: corrupt or truncated checkpoint file (not a zip archive: {first_line(exc)})"
        ) from None
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED or record.compress_size != record.file_size:
            raise ConfigError(
                f"{file}: its record {record.filename!r} is compressed ({record.compress_size:,} B"
                f" inflating to {record.file_size:,} B); torch.save never compresses, so this is"
                " not a checkpoint to load"
            )
    total = sum(record.file_size for record in records)
    if total > size:
        raise ConfigError(
            f"{file}: its records claim {total:,} B, more than the file's own {size:,} B; a corrupt"
            " or crafted file"
        )
    available = resources.available_memory()
    if available is not None and total > available[0]:
        raise ConfigError(
            f"{file}: loading it needs ~{resources.size_text(total)}, more than the"
            f" {resources.size_text(available[0])} {available[1]}"
        )
    return total


def load_pt(file: Path) -> Any:
    """A checkpoint's ``.pt`` file, loaded with ``torch.load(weights_only=True)`` to the CPU once
    :func:`check_pt` has sized it (never through a symlink, never a FIFO).

    Raises:
        ConfigError: one line: refused by :func:`check_pt`, or a file torch cannot read.
    """
    try:
        handle = open_regular(file)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    with handle:
        check_pt(file, handle)
        handle.seek(0)
        try:
            return torch.load(handle, weights_only=True, map_location="cpu")
        except Exception as exc:  # torch raises many types for truncated or foreign files
            raise ConfigError(
                f"{file}: corrupt or truncated checkpoint file ({first_line(exc)})"
            ) from None
