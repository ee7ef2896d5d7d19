"""Restoring a buffer's storage from snapshot arrays chunk by chunk, in memory or memory-mapped.

A resumed buffer copies each saved array into its own preallocated array a chunk
(:data:`CHUNK_BYTES`) at a time. When the saved array is a read-only memory map of a checkpoint's
file, the pages a chunk touched are dropped from the process once it is copied (``madvise``
``MADV_DONTNEED``: the file and the kernel's page cache keep them), so the process never holds a
second copy of the buffer, not even as mapped file pages, which count in its resident memory.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["copy_ring"]

CHUNK_BYTES = 64 * 2**20  # bytes copied (and mapped pages held) at a time


def copy_ring(
    dst: np.ndarray,
    src: np.ndarray,
    first: int,
    last: int,
    *,
    dst_slots: int,
    src_slots: int,
    src_base: int = 0,
) -> None:
    """Copy the items ``first .. last - 1`` of a sequence from one ring of rows to another.

    Item ``g`` is read from row ``(g - src_base) % src_slots`` of ``src`` and written to row
    ``g % dst_slots`` of ``dst``, in slices of at most :data:`CHUNK_BYTES` (no temporary copy).

    Args:
        dst: the rows to fill (the buffer's own storage).
        src: the saved rows (an array in memory, or a read-only memory map of a file).
        first: the first item.
        last: one past the last item (``last - first`` at most ``dst_slots``).
        dst_slots: the rows of ``dst``'s ring (an item's row is its number modulo this).
        src_slots: the rows of ``src``'s ring.
        src_base: the item in row 0 of ``src`` (modulo ``src_slots``).

    Raises:
        ValueError: ``src`` has fewer rows than the items need, or ``dst``'s rows differ in
            shape or kind.
    """
    row_bytes = max(int(np.prod(src.shape[1:], dtype=np.int64)) * src.itemsize, 1)
    step = max(CHUNK_BYTES // row_bytes, 1)
    g = first
    while g < last:
        d, s = g % dst_slots, (g - src_base) % src_slots
        n = min(last - g, dst_slots - d, src_slots - s, step)
        if s + n > len(src):
            raise ValueError(f"{len(src)} saved rows, {s + n} needed")
        dst[d : d + n] = src[s : s + n]
        _drop_mapped_pages(src)
        g += n


def _drop_mapped_pages(array: np.ndarray) -> None:
    """Drop the pages of the memory map ``array`` views (if it views one) from this process."""
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        base.madvise(mmap.MADV_DONTNEED)
