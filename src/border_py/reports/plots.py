"""The report's plot: every run's eval-return curve, or per group of seeds the mean with its
bootstrap band and the IQM, against env steps, opt steps or wall time. Matplotlib is imported when
a plot is drawn (``Agg``: files only), and the image is published by
:func:`~border_py.files.write_file`."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from border_py.files import write_file
from border_py.reports.aggregate import Group
from border_py.reports.collect import X_AXES, RunRow, shared_overrides


def _axes(title: str, axis: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt
    from matplotlib.ticker import EngFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.set_xlabel(X_AXES[axis])
    ax.set_ylabel("evaluation return")
    ax.set_title(title, fontsize=9)
    if axis != "seconds":
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(alpha=0.3)
    return fig, ax


def _save(fig: Any, path: Path) -> None:
    """Render ``fig`` in memory (in the format ``path``'s suffix names, else PNG), then publish it
    with :func:`~border_py.files.write_file` (never through a symlink)."""
    from matplotlib import pyplot as plt

    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format=path.suffix.lstrip(".") or "png", dpi=200)
    finally:
        plt.close(fig)
    write_file(path, image.getvalue())


def _plain_label(text: str) -> str:
    """``text`` as matplotlib shows it literally (a ``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def plot(root: Path, rows: list[RunRow], path: Path, axis: str = "env_steps") -> bool:
    """Every run's eval-return curve against ``axis``, in one PNG; False if no run has one."""
    curves = [(row, row.curve(axis)) for row in rows if row.curve(axis)]
    if not curves:
        return False
    common = shared_overrides(rows)
    fig, ax = _axes(root.name, axis)
    for row, curve in curves:
        xs, ys = zip(*curve, strict=True)
        differing = " ".join(o for o in row.overrides if o not in common)
        label = row.job + (f": {differing}" if differing else "")
        ax.plot(xs, ys, marker="o", markersize=3, label=_plain_label(label[:80]))
    ax.legend(fontsize=7, loc="best")
    _save(fig, path)
    return True


def plot_groups(groups: list[Group], path: Path, axis: str = "env_steps") -> bool:
    """Per group: mean (solid) with its 95% bootstrap band and IQM (dashed) against ``axis``."""
    bands = [(group, group.band(axis)) for group in groups]
    drawn = [(group, band) for group, band in bands if band is not None]
    if not drawn:
        return False
    fig, ax = _axes("mean over seeds with its 95% bootstrap CI (band); IQM dashed", axis)
    for i, (group, band) in enumerate(drawn):
        color = f"C{i % 10}"
        label = _plain_label(f"{group.label[:60]} (n={band.n})")
        ax.plot(band.x, band.mean, color=color, lw=1.8, label=label)
        ax.fill_between(band.x, band.low, band.high, color=color, alpha=0.2, lw=0)
        ax.plot(band.x, band.iqm, color=color, lw=1.0, ls="--")
    ax.legend(fontsize=7, loc="best", frameon=False)
    _save(fig, path)
    return True
