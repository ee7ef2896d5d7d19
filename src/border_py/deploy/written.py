"""What every export writes and checks, whatever its format: where its files go (and what an
existing output may be replaced by), an ONNX model made quietly (:func:`onnx_model`), a checked
model and its description written (:func:`write_model`), the numpy export's dir (its files, published whole, and
loaded back from where it was written), and the refusals every written model must make
(:func:`check_refusals`). :mod:`border_py.deploy.export` and
:mod:`border_py.deploy.recurrent_export` write through these.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from border_py.deploy import numpy_policy, plain_env
from border_py.deploy.describe import readme
from border_py.deploy.numpy_network import numpy_network
from border_py.errors import ConfigError, RunError, first_line
from border_py.files import create_file, link_refusal, write_file
from border_py.publishing import publish_dir

__all__ = [
    "DESCRIPTION",
    "ENV_PY",
    "NUMPY_FILES",
    "Forward",
    "check_outputs",
    "check_refusals",
    "description_path",
    "env_path",
    "env_source",
    "load_numpy_export",
    "numpy_files",
    "onnx_model",
    "policy_source",
    "write_error",
    "write_model",
    "write_numpy_dir",
]

DESCRIPTION = "preprocessing.json"
ENV_PY = "env.py"  # builds the env from the description without border-py (plain_env.py)
NUMPY_FILES = {"policy.py", "network.json", "weights.npz", DESCRIPTION, ENV_PY, "README.txt"}
Forward = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def description_path(out: Path, fmt: str) -> Path:
    """Where ``preprocessing.json`` goes for an export to ``out``: inside a numpy dir, else
    beside the file as ``<file name>.preprocessing.json`` (``policy.onnx``:
    ``policy.onnx.preprocessing.json``; the whole name, so that exports of one policy in two
    formats side by side each have their own)."""
    return out / DESCRIPTION if fmt == "numpy" else out.with_name(f"{out.name}.{DESCRIPTION}")


def env_path(out: Path, fmt: str) -> Path:
    """Where ``env.py`` goes for an export to ``out``: inside a numpy dir, else beside the file
    as ``<file name>.env.py`` (as :func:`description_path`)."""
    return out / ENV_PY if fmt == "numpy" else out.with_name(f"{out.name}.{ENV_PY}")


def check_outputs(out: Path, fmt: str, force: bool) -> None:
    """Refuse outputs that exist (without ``force``), symlinks, and what ``force`` would not
    replace: a dir where a file goes, or a dir that is not a numpy export.

    Raises:
        ConfigError: one line naming the path.
    """
    paths = [out] if fmt == "numpy" else [out, description_path(out, fmt), env_path(out, fmt)]
    for path in paths:
        if path.is_symlink():
            raise link_refusal(path)
        if not path.exists():
            continue
        if not force:
            raise ConfigError(
                f"{path}: exists; border export replaces nothing unless told: choose another -o"
                " or pass --force"
            )
        if fmt == "numpy" and not (path.is_dir() and {"policy.py", "network.json"} <= _names(path)):
            raise ConfigError(
                f"{path}: exists and is not a numpy export; --force replaces only an earlier"
                " export: remove it yourself or choose another -o"
            )
        if fmt != "numpy" and not path.is_file():
            raise ConfigError(f"{path}: exists and is not a file; --force replaces files only")


def _names(path: Path) -> set[str]:
    return {entry.name for entry in path.iterdir()}


def check_refusals(name: str, forward: Forward, sample: np.ndarray) -> None:
    """Raise :class:`RunError` unless a written model refuses ``sample`` (a batch of the space's
    dtype) cast to float32 when the space's dtype is an integer one, and ``sample`` in another
    layout (its observation axes reversed) when that is another shape."""
    wrong = []
    if sample.dtype.kind in "iu":
        wrong.append(("float observations", sample.astype(np.float32)))
    reversed_axes = np.ascontiguousarray(sample.transpose(0, *range(sample.ndim - 1, 0, -1)))
    if reversed_axes.shape != sample.shape:
        wrong.append(("observations in another layout", reversed_axes))
    for what, obs in wrong:
        try:
            forward(obs)
        except Exception:  # the format's own refusal: ValueError, torch.jit.Error, onnxruntime's
            continue
        raise RunError(f"{name}: the written model takes {what} (a wrong input would be acted on)")


def policy_source() -> bytes:
    """The numpy export's ``policy.py``, as this border-py writes it (the same for every
    network: ``network.json`` and ``weights.npz`` say which)."""
    return Path(numpy_policy.__file__).read_bytes()


def env_source() -> bytes:
    """Every export's ``env.py`` (:mod:`border_py.deploy.plain_env`), as this border-py writes it."""
    return Path(plain_env.__file__).read_bytes()


def numpy_files(
    module: nn.Module, observation_space: gym.Space, description: dict[str, Any], name: str
) -> dict[str, Any]:
    """The numpy export dir's files (the dir named ``name``): name -> bytes, or a writer."""
    network, arrays = numpy_network(module, observation_space)
    return {
        "policy.py": policy_source(),
        "network.json": json.dumps(network, indent=1).encode(),
        "weights.npz": lambda f: np.savez(f, **arrays),  # type: ignore[arg-type]
        DESCRIPTION: json.dumps(description, indent=2).encode(),
        ENV_PY: env_source(),
        "README.txt": readme(description, name).encode(),
    }


def load_numpy_export(path: Path, policy: bool = False) -> Any:
    """The ``forward`` of the numpy export in ``path``, its ``policy.py`` imported from there
    (``policy``: the loaded ``NumpyPolicy`` itself)."""
    spec = importlib.util.spec_from_file_location("border_exported_policy", path / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded = module.load(path)
    return loaded if policy else loaded.forward


def write_numpy_dir(
    files: dict[str, Any], out: Path, check: Callable[[Path], None], force: bool
) -> None:
    """Publish ``files`` as the dir ``out`` (:func:`border_py.publishing.publish_dir`), ``check``-ed
    in its hidden temporary dir first; with ``force``, an earlier export there (the only thing
    :func:`check_outputs` lets it replace) is replaced."""

    def fill(tmp: Path) -> None:
        for name, data in files.items():
            create_file(tmp / name, data)
        check(tmp)

    out.parent.mkdir(parents=True, exist_ok=True)
    publish_dir(out, fill, replace=force)


def onnx_model(
    module: nn.Module,
    args: tuple[torch.Tensor, ...],
    names: tuple[list[str], list[str]],
    dynamic_shapes: dict[str, dict[int, Any]],
) -> tuple[bytes, Any]:
    """``module`` exported to ONNX by the dynamo exporter (``names``: its input and output names)
    and an onnxruntime session of it. The exporter prints its progress to stdout, warns of its
    own deprecations and logs the torchvision operators it skips: all silenced."""
    import onnxruntime

    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                module,
                args,
                input_names=names[0],
                output_names=names[1],
                dynamic_shapes=dynamic_shapes,
                dynamo=True,
                verbose=False,
            )
    finally:
        quiet.setLevel(level)
    assert program is not None  # the dynamo exporter returns its program
    data = program.model_proto.SerializeToString()
    return data, onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])


def write_model(out: Path, fmt: str, data: bytes, description: dict[str, Any]) -> None:
    """Write a checked ONNX or TorchScript model to ``out``, its description and ``env.py``
    beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    write_file(out, data)
    write_file(description_path(out, fmt), json.dumps(description, indent=2).encode())
    write_file(env_path(out, fmt), env_source())


def write_error(exc: OSError, out: Path) -> RunError:
    """The one line for an export that could not be written."""
    return RunError(
        f"{exc.filename or out}: cannot write the export ({exc.strerror or first_line(exc)})"
    )
