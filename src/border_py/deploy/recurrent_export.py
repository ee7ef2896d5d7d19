"""Exporting a recurrent policy (R2D2): its greedy step with the state as explicit inputs and
outputs (:mod:`border_py.deploy.recurrent_graph`) as ONNX, TorchScript or numpy.

Every written model is checked before it is published, over sequences: :data:`CHECK_ENVS` envs
of observations sampled from the space are stepped :data:`CHECK_STEPS` times from zeros, the
written model fed back its own state at every step, and at every step its actions must be the
torch step's (but for a tie), its values and its state equal to float32 tolerance; a state that
drifts, or is not carried, fails it. Then the refusals of every export
(:func:`~border_py.deploy.written.check_refusals`).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.recurrent import RecurrentQNetwork
from border_py.deploy.graph import sample_observations
from border_py.deploy.recurrent_graph import recurrent_step, step_inputs, step_names
from border_py.deploy.written import (
    check_refusals,
    load_numpy_export,
    numpy_files,
    onnx_model,
    write_error,
    write_model,
    write_numpy_dir,
)
from border_py.errors import RunError

__all__ = [
    "CHECK_ENVS",
    "CHECK_STEPS",
    "Step",
    "check_sequences",
    "example_inputs",
    "export_recurrent",
    "numpy_step",
    "onnx_step",
    "torchscript_step",
    "zero_state_forward",
]

CHECK_ENVS = 16
CHECK_STEPS = 12
# named inputs (step_names' order) -> outputs (action, values, next_h[, next_c])
Step = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


def torchscript_step(q: RecurrentQNetwork, space: gym.Space) -> tuple[bytes, Step]:
    """The scripted step (its observations checked, :class:`~border_py.deploy.graph.ObsCheck`)
    as a file, and a step of it loaded back from those bytes."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # torch deprecates TorchScript (see torchscript_bytes)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.jit.save(torch.jit.script(recurrent_step(q, space)), buffer)
        data = buffer.getvalue()
        loaded = torch.jit.load(io.BytesIO(data), map_location="cpu")

    def step(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        with torch.no_grad():
            out = loaded(*(torch.as_tensor(v) for v in inputs.values()))
        return [t.numpy() for t in out]

    return data, step


def onnx_step(q: RecurrentQNetwork, example: dict[str, np.ndarray]) -> tuple[bytes, Step]:
    """The step as an ONNX model (the batch of envs dynamic: axis 0 of ``obs``, ``prev_action``
    and ``prev_reward``, axis 1 of the states) and a step of it under onnxruntime."""
    names, outputs = step_names(q)
    batch = torch.export.Dim("batch")
    dynamic = {name: {1 if name in ("h", "c") else 0: batch} for name in names}
    args = tuple(torch.as_tensor(v) for v in example.values())
    data, session = onnx_model(recurrent_step(q, None), args, (names, outputs), dynamic)

    def step(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(out) for out in session.run(outputs, inputs)]

    return data, step


def numpy_step(policy: Any) -> Step:
    """The step of a loaded numpy export (``policy.py``'s ``NumpyPolicy``)."""

    def step(inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        out = policy.step(
            inputs["obs"],
            inputs["h"],
            inputs.get("c"),
            inputs["prev_action"],
            inputs.get("prev_reward"),
        )
        return [part for part in out if part is not None]

    return step


def check_sequences(name: str, q: RecurrentQNetwork, space: gym.Space, step: Step) -> None:
    """Raise :class:`RunError` unless ``step`` (a written model) steps as ``q`` does over
    sequences (see the module docstring)."""
    want_step = recurrent_step(q, None)
    rows = CHECK_ENVS
    obs = sample_observations(space, rows * CHECK_STEPS, seed=1)
    obs = obs.reshape(CHECK_STEPS, rows, *obs.shape[1:])
    rng = np.random.default_rng(0)
    state = np.zeros((rows, q.state_parts, q.core_size), np.float32)
    want_state = torch.as_tensor(state)
    prev_action = np.full(rows, -1, np.int64)
    prev_reward = np.zeros(rows, np.float32)
    for t in range(CHECK_STEPS):
        got = step(step_inputs(q, obs[t], state, prev_action, prev_reward))
        want_inputs = step_inputs(q, obs[t], want_state.numpy(), prev_action, prev_reward)
        with torch.no_grad():
            want = [
                x.numpy() for x in want_step(*(torch.as_tensor(v) for v in want_inputs.values()))
            ]
        _same_step(name, t, got, want)
        state = np.stack([part[0] for part in got[2:]], axis=1)
        want_state = torch.as_tensor(np.stack([part[0] for part in want[2:]], axis=1))
        prev_action = want[0].astype(np.int64)
        prev_reward = rng.uniform(-1, 1, rows).astype(np.float32)


def _same_step(name: str, t: int, got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Raise :class:`RunError` unless step ``t``'s outputs are the torch step's (actions but
    for a tie of the best two values)."""
    values = want[1]
    for what, a, b in [("values", got[1], values)] + [
        ("state", g, w) for g, w in zip(got[2:], want[2:], strict=True)
    ]:
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-5):
            raise RunError(
                f"{name}: the written model's {what} differ from the policy's at step {t}"
            )
    differ = np.asarray(got[0]) != want[0]
    best_two = np.sort(values[differ], axis=1)[:, -2:]
    if not np.all(best_two[:, -1] - best_two[:, 0] <= 1e-5):
        raise RunError(f"{name}: the written model's actions differ from the policy's at step {t}")


def zero_state_forward(q: RecurrentQNetwork, step: Step) -> Callable[[np.ndarray], Any]:
    """A forward of observations alone through ``step`` from an episode's start (for the
    refusals' check)."""

    def forward(obs: np.ndarray) -> Any:
        rows = len(obs)
        state = np.zeros((rows, q.state_parts, q.core_size), np.float32)
        return step(step_inputs(q, obs, state, np.full(rows, -1), np.zeros(rows, np.float32)))

    return forward


def example_inputs(q: RecurrentQNetwork, space: gym.Space) -> dict[str, np.ndarray]:
    """Named inputs for two envs at an episode's start, to trace the exporter with."""
    obs = sample_observations(space, 2)
    state = np.zeros((2, q.state_parts, q.core_size), np.float32)
    return step_inputs(q, obs, state, np.full(2, -1), np.zeros(2, np.float32))


def export_recurrent(
    q: RecurrentQNetwork,
    space: gym.Space,
    fmt: str,
    out: Path,
    description: dict[str, Any],
    force: bool,
) -> None:
    """Export a recurrent policy's greedy step (:mod:`border_py.deploy.recurrent_graph`) as
    ``fmt`` to ``out``, each written model checked over sequences and for its refusals first.

    Raises:
        RunError: the model could not be written, or does not reproduce the policy.
    """
    sample = sample_observations(space, CHECK_ENVS * CHECK_STEPS)

    def check(name: str, step: Step) -> None:
        check_sequences(name, q, space, step)
        check_refusals(name, zero_state_forward(q, step), sample)

    try:
        if fmt == "numpy":
            files = numpy_files(recurrent_step(q, None), space, description, out.name)

            def check_dir(tmp: Path) -> None:
                check(str(out), numpy_step(load_numpy_export(tmp, policy=True)))

            write_numpy_dir(files, out, check_dir, force)
            return
        if fmt == "onnx":
            data, step = onnx_step(q, example_inputs(q, space))
        else:
            data, step = torchscript_step(q, space)
        check(str(out), step)
        write_model(out, fmt, data, description)
    except OSError as exc:
        raise write_error(exc, out) from None
