"""Reading a checkpoint's ``.pt`` files: sized from their zip directory before torch reads them,
and their tensors bounded by the bytes stored for them once it has.

``torch.save`` writes a zip archive whose records are stored, never compressed, so a genuine file
holds its tensors' bytes as they are: loading one takes about the file's own size. ``torch.load``
would inflate a compressed record too, into memory, before anything checks it (a 0.5 MiB record
of zeros inflates to 512 MiB). So, before torch opens a file, its zip directory alone is read
(nothing is decompressed) and the file is refused in one line when it is not a zip archive laid
out as ``torch.save`` lays one out, when a record is not stored as it is (``ZIP_STORED``), when
its records' sizes add up to more than the file's own size, or when they are more than the memory
available.

The layout matters because Python's ``zipfile`` and torch's reader find the central directory in
different ways: Python reads the one that ends where the end record starts (any gap before it is
taken for data prepended to the archive), torch the one at the offset the end record states. A
file holding two directories would show Python stored records and torch a compressed one. So the
end record must be the file's last 22 bytes, its zip64 record (``torch.save`` always writes one)
exactly where its locator says, and the central directory must end where they start, every local
header before it: then both readers read the same directory.

What torch then reads is no more than the records: PyTorch refuses a record whose size differs
from the storage the pickle declares for it. A tensor can still be declared as a view larger than
its storage (a stride of 0 repeats 4 bytes 2^26 times, and any copy of it takes 256 MiB), so the
loaded tensors are walked: each must be a plain dense tensor and contiguous (torch refuses one
beyond its storage), and all of them together no larger than the records.
"""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from border_py import resources
from border_py.errors import ConfigError, first_line
from border_py.files import open_regular

__all__ = ["check_pt", "load_pt"]

END = struct.Struct("<4s4H2LH")  # the end record: 22 bytes, then its comment
LOCATOR = struct.Struct("<4sLQL")  # the zip64 locator, just before the end record
END64 = struct.Struct("<4sQ2H2L4Q")  # the zip64 end record (no extensible data: 56 bytes)
LOCAL_HEADER = 30  # bytes of a local file header before its name
NOT_TORCH = "torch.save never writes such a file, so this is not a checkpoint to load"
NOT_SAVED = "border saves no such tensor, so this is not a checkpoint to load"


def _refused(file: Path, why: str, reason: str = NOT_TORCH) -> ConfigError:
    return ConfigError(f"{file}: {why}; {reason}")


def directory_span(file: Path, handle: IO[bytes], size: int) -> tuple[int, int]:
    """(offset, entries) of the central directory of ``handle`` (``file``, ``size`` bytes), read
    from its end record (and zip64 record) as torch's reader reads them.

    Raises:
        ConfigError: one line: a layout ``torch.save`` never writes (a comment after the end
            record, a zip64 record away from where its locator says, several disks, a central
            directory that does not end where the end records start).
    """
    end = size - END.size
    handle.seek(end)
    sig, disk, first_disk, here, entries, span, offset, comment = END.unpack(handle.read(END.size))
    if sig != b"PK\x05\x06" or comment:
        raise _refused(file, "its zip end record is not its last 22 bytes")
    if end >= LOCATOR.size + END64.size:
        handle.seek(end - LOCATOR.size)
        mark, locator_disk, at, disks = LOCATOR.unpack(handle.read(LOCATOR.size))
        if mark == b"PK\x06\x07":  # zip64: its record just before the locator (Python's place)
            end -= LOCATOR.size + END64.size
            handle.seek(end)
            mark64, length, _, _, disk, first_disk, *wide = END64.unpack(handle.read(END64.size))
            sentinels = (0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)  # "see the zip64 record"
            narrow = zip((here, entries, span, offset), wide, sentinels, strict=True)
            agrees = all(value in (exact, sentinel) for value, exact, sentinel in narrow)
            where = (at, mark64, length, locator_disk, disks) == (end, b"PK\x06\x06", 44, 0, 1)
            if not (where and agrees):
                raise _refused(
                    file, "its zip64 end record is not where its locator says, or disagrees"
                )
            here, entries, span, offset = wide
    if disk or first_disk or here != entries:
        raise _refused(file, "its zip archive spans several disks")
    if offset + span != end:
        raise _refused(
            file,
            f"its central directory ({span:,} B at {offset:,}) does not end where its end record"
            f" starts ({end:,})",
        )
    return offset, entries


def check_pt(file: Path, handle: IO[bytes]) -> int:
    """The bytes ``handle`` (``file``, open) holds in its records, read from its zip directory.

    Raises:
        ConfigError: one line: not a zip archive, a layout ``torch.save`` never writes (see
            :func:`directory_span`), a compressed record, records larger than the file, or larger
            than the memory available.
    """
    size = os.fstat(handle.fileno()).st_size
    try:
        with zipfile.ZipFile(handle) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ConfigError(
            f"{file}: corrupt or truncated checkpoint file (not a zip archive: {first_line(exc)})"
        ) from None
    start, entries = directory_span(file, handle, size)
    if len(records) != entries:
        raise _refused(
            file, f"its zip directory lists {len(records):,} records, its end {entries:,}"
        )
    for record in records:
        if record.header_offset + LOCAL_HEADER > start:
            raise _refused(file, f"its record {record.filename!r} starts inside its zip directory")
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


def check_tensors(file: Path, loaded: Any, stored: int) -> None:
    """Refuse a tensor of ``loaded`` (what ``torch.load`` returned for ``file``) that would hold
    more than the bytes stored for it: one that is not a dense (strided) tensor or not contiguous
    (overlapping or stride-0 views), or tensors that together are larger than ``stored``, the
    bytes of the file's records (views of one storage). Each object is visited once (a pickle
    may reference one list many times).

    Raises:
        ConfigError: one line naming the tensor's shape and what is wrong with it.
    """
    seen: set[int] = set()
    pending, total = [loaded], 0
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            pending += [*node.keys(), *node.values()]
        elif isinstance(node, (list, tuple, set, frozenset)):
            pending += node
        elif isinstance(node, torch.Tensor):
            total += _tensor_bytes(file, node)
    if total > stored:
        raise ConfigError(
            f"{file}: its tensors take {total:,} B, more than the {stored:,} B stored for them"
            " (views of one storage); a corrupt or crafted file"
        )


def _tensor_bytes(file: Path, tensor: torch.Tensor) -> int:
    """The bytes ``tensor`` holds, once checked to be dense and contiguous (torch itself refuses
    to load a view beyond its storage)."""
    shape = tuple(tensor.shape)
    if tensor.layout != torch.strided:
        raise _refused(file, f"a tensor of shape {shape} is {tensor.layout}, not dense", NOT_SAVED)
    if not tensor.is_contiguous():
        raise _refused(
            file,
            f"a tensor of shape {shape} is a view of strides {tensor.stride()}, not contiguous",
            NOT_SAVED,
        )
    return tensor.numel() * tensor.element_size()


def load_pt(file: Path) -> Any:
    """A checkpoint's ``.pt`` file, loaded with ``torch.load(weights_only=True)`` to the CPU once
    :func:`check_pt` has sized it (never through a symlink, never a FIFO), its tensors checked by
    :func:`check_tensors`.

    Raises:
        ConfigError: one line: refused by :func:`check_pt` or :func:`check_tensors`, or a file
            torch cannot read.
    """
    try:
        handle = open_regular(file)
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read ({exc.strerror or exc})") from None
    with handle:
        stored = check_pt(file, handle)
        handle.seek(0)
        try:
            loaded = torch.load(handle, weights_only=True, map_location="cpu")
        except Exception as exc:  # torch raises many types for truncated or foreign files
            raise ConfigError(
                f"{file}: corrupt or truncated checkpoint file ({first_line(exc)})"
            ) from None
    check_tensors(file, loaded, stored)
    return loaded
