"""Checkpoints in ``<run dir>/checkpoints/``, written atomically.

Each checkpoint directory holds ``policy.pt`` (the acting weights alone), ``agent.pt`` (the
agent's full training state) and ``meta.json`` (counters and the eval result). Files are written
into a hidden temporary directory that is renamed into place, so a reader never sees a half
written checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch


def step_name(opt_steps: int) -> str:
    """The directory name of a periodic checkpoint: opt steps zero-padded to 9 digits."""
    return f"{opt_steps:09d}"


def save_checkpoint(
    root: Path,
    name: str,
    policy: dict[str, torch.Tensor],
    agent_state: dict[str, Any],
    meta: dict[str, Any],
) -> Path:
    """Write ``root/name/`` atomically (replacing an older one) and return its path.

    Args:
        root: the ``checkpoints`` directory.
        name: ``best`` or a :func:`step_name`.
        policy: acting weights (``policy.pt``).
        agent_state: the agent's full training state (``agent.pt``).
        meta: JSON-serializable facts (opt steps, env steps, eval return, ...).
    """
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
    try:
        torch.save(policy, tmp / "policy.pt")
        torch.save(agent_state, tmp / "agent.pt")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        final = root / name
        if final.exists():
            old = root / f".old-{name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_policy(path: Path) -> dict[str, torch.Tensor]:
    """The acting weights of the checkpoint at ``path``."""
    return torch.load(Path(path) / "policy.pt", weights_only=True, map_location="cpu")
