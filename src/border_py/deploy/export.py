"""Exporting a trained greedy policy: ONNX, TorchScript, or numpy alone.

Every format maps a batch of observations (any batch size) to ``(action, values)`` (see
:mod:`border_py.deploy.graph`; a recurrent policy's step takes and gives its state too, see
:mod:`border_py.deploy.recurrent_export`) and is checked before it is published: the written model is run
(onnxruntime, ``torch.jit.load``, the numpy ``policy.py``) on observations sampled from the
observation space and must give the greedy actions and values of the policy it was made from,
and must refuse those observations as floats (an integer space: a frame scaled already would be
scaled twice) and in another layout (:func:`check_refusals`).

- ``onnx``: one file (``torch.onnx.export``, the dynamo exporter; needs the ``export`` extra);
- ``torchscript``: one file (``torch.jit.trace``), loaded by ``torch.jit.load`` without border-py;
- ``numpy``: a dir holding ``policy.py`` (numpy only: no torch, no border-py), ``network.json``,
  ``weights.npz`` and ``README.txt``.

``preprocessing.json`` (:mod:`border_py.deploy.describe`: the observations, and the env's
interface: how to build it without border-py and the preprocessing from its raw observations) and
``env.py`` (:mod:`border_py.deploy.plain_env`: numpy and gymnasium code that builds the env and
preprocesses from that description) go beside the model: into the numpy dir, and as
``<file name>.preprocessing.json`` and ``<file name>.env.py`` beside a file. Nothing existing is replaced without
``force``; a symlink at an output is refused, never written through; files are fsynced before the
rename that publishes them (:func:`border_py.files.write_file`), and a numpy dir is published
whole (:func:`border_py.publishing.publish_dir`).
"""

from __future__ import annotations

import importlib.util
import io
import os
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from border_py.agents.r2d2 import R2D2
from border_py.deploy.describe import describe
from border_py.deploy.graph import CheckedInput, greedy_module, sample_observations
from border_py.deploy.load import Policy, load_policy
from border_py.deploy.recurrent_export import export_recurrent
from border_py.deploy.written import (
    DESCRIPTION,
    ENV_PY,
    NUMPY_FILES,
    Forward,
    check_outputs,
    check_refusals,
    description_path,
    env_path,
    env_source,
    load_numpy_export,
    numpy_files,
    onnx_model,
    policy_source,
    write_error,
    write_model,
    write_numpy_dir,
)
from border_py.errors import ConfigError, RunError

__all__ = [
    "DESCRIPTION",
    "ENV_PY",
    "FORMATS",
    "NUMPY_FILES",
    "check_refusals",
    "description_path",
    "env_path",
    "env_source",
    "export_policy",
    "numpy_files",
    "onnx_bytes",
    "policy_source",
    "torchscript_bytes",
]

FORMATS = ("onnx", "torchscript", "numpy")
ONNX_NEEDS = ("onnx", "onnxruntime", "onnxscript")
CHECK_ROWS = 64  # observations each written model is checked on


def check_onnx() -> None:
    """Fail in one line when the ONNX exporter's packages are missing."""
    missing = [name for name in ONNX_NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"--format onnx needs {', '.join(missing)}: pip install 'border-py[export]'"
        )


def compare(name: str, got: tuple[np.ndarray, np.ndarray], want: tuple[Any, Any]) -> None:
    """Raise :class:`RunError` unless a written model's ``(action, values)`` are the policy's:
    values to float32 tolerance, actions equal (a discrete one may differ only where the best
    two values are within that tolerance: a tie that summing in another order can break)."""
    actions, values = (np.asarray(t.numpy() if isinstance(t, torch.Tensor) else t) for t in want)
    if not np.allclose(np.asarray(got[1]), values, rtol=1e-4, atol=1e-5):
        raise RunError(f"{name}: the written model's values differ from the policy's")
    got_actions = np.asarray(got[0])
    if not np.issubdtype(actions.dtype, np.integer):
        same = np.allclose(got_actions, actions, rtol=1e-4, atol=1e-5)
    else:
        differ = got_actions != actions
        best_two = np.sort(values[differ], axis=1)[:, -2:]
        same = bool(np.all(best_two[:, -1] - best_two[:, 0] <= 1e-5))
    if not same:
        raise RunError(f"{name}: the written model's actions differ from the policy's")


def torchscript_bytes(
    module: nn.Module, example: torch.Tensor, space: gym.Space
) -> tuple[bytes, Forward]:
    """The traced module behind its input check (:class:`~border_py.deploy.graph.CheckedInput`,
    scripted) as a file, and a forward of it loaded back from those bytes."""
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        # torch deprecates TorchScript in favour of torch.export, whose files need torch to
        # load too: TorchScript is still what C++ (libtorch) and torch.jit.load run
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        traced = torch.jit.trace(module, (example,))
        torch.jit.save(torch.jit.script(CheckedInput(traced, space)), buffer)
        data = buffer.getvalue()
        loaded = torch.jit.load(io.BytesIO(data), map_location="cpu")

    def forward(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            action, values = loaded(torch.as_tensor(obs))
        return action.numpy(), values.numpy()

    return data, forward


def onnx_bytes(module: nn.Module, example: torch.Tensor) -> tuple[bytes, Forward]:
    """The ONNX model (batch dimension dynamic) and a forward of it under onnxruntime, which
    refuses an input of another dtype or shape than ``example``'s (but its batch size)."""
    dynamic = {"obs": {0: torch.export.Dim("batch")}}
    data, session = onnx_model(module, (example,), (["obs"], ["action", "values"]), dynamic)

    def forward(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        action, values = session.run(["action", "values"], {"obs": obs})
        return np.asarray(action), np.asarray(values)

    return data, forward


def export_feed_forward(
    policy: Policy, fmt: str, out: Path, description: dict[str, Any], force: bool
) -> None:
    """Export a feed-forward policy's greedy module (:mod:`border_py.deploy.graph`) as ``fmt``
    to ``out``, each written model checked on sampled observations and for its refusals first.

    Raises:
        ConfigError: an agent or layer the format lacks (one line).
        RunError: the model could not be written, or does not reproduce the policy.
    """
    module = greedy_module(policy.agent, policy.action_space)
    sample = sample_observations(policy.observation_space, CHECK_ROWS)
    with torch.no_grad():
        want = module(torch.as_tensor(sample))

    def check(name: str, forward: Forward) -> None:
        compare(name, forward(sample), want)
        check_refusals(name, forward, sample)

    try:
        if fmt == "numpy":
            files = numpy_files(module, policy.observation_space, description, out.name)
            write_numpy_dir(files, out, lambda tmp: check(str(out), load_numpy_export(tmp)), force)
            return
        example = torch.as_tensor(sample[:2])
        if fmt == "onnx":
            data, forward = onnx_bytes(module, example)
        else:
            data, forward = torchscript_bytes(module, example, policy.observation_space)
        check(str(out), forward)
        write_model(out, fmt, data, description)
    except OSError as exc:
        raise write_error(exc, out) from None


def export_policy(
    path: str | Path,
    fmt: str,
    out: str | Path,
    trust: Any = None,
    force: bool = False,
    check_resources: bool = True,
) -> Path:
    """Export the greedy policy of a run dir (its best checkpoint, else its newest) or of a
    checkpoint dir as ``fmt`` to ``out``; return ``out``.

    Args:
        path: a run dir or a checkpoint dir (as :func:`~border_py.deploy.load.load_policy`).
        fmt: ``onnx``, ``torchscript`` or ``numpy`` (a dir).
        out: the model file, or the numpy export's dir.
        trust: what the run's config may import beyond border's own (see ``load_policy``).
        force: replace an existing export at ``out`` (and its ``preprocessing.json``).
        check_resources: False: networks larger than the memory available only warn.

    Raises:
        ConfigError: one line: an unknown format, an existing output (without ``force``) or a
            symlink, no ``export`` extra, an unloadable run, an agent or layer the format lacks.
        RunError: the model could not be written, or does not reproduce the policy.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: unknown; formats: {', '.join(FORMATS)}")
    out = Path(os.path.abspath(Path(out).expanduser()))
    check_outputs(out, fmt, force)
    if fmt == "onnx":
        check_onnx()
    policy = load_policy(path, trust=trust, check_resources=check_resources)
    description = describe(policy, fmt)
    if isinstance(policy.agent, R2D2):
        export_recurrent(policy.agent.q, policy.observation_space, fmt, out, description, force)
    else:
        export_feed_forward(policy, fmt, out, description, force)
    return out
