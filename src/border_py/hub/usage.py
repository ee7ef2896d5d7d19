"""How the card says to run a pushed policy's export without border-py: the code for its format
(numpy's ``policy.py`` loaded by its path, TorchScript, ONNX), and for a recurrent policy the
state its caller carries."""

from __future__ import annotations

from pathlib import Path

from border_py.deploy.written import description_path
from border_py.hub.card import fenced
from border_py.hub.contents import pull_dir

__all__ = ["export_code", "export_usage"]


def export_code(fmt: str, where: str, inputs: list[str] | None) -> str:
    """The Python that runs the export at ``where`` (its path from where the pull ran)."""
    if fmt == "numpy":
        call = (
            "state, start = None, np.ones(n_envs, dtype=bool)  # None: zeros\n"
            "action, state = net.predict(obs, state, start, deterministic=True)\n"
            "# after each env step: start = terminated | truncated"
            if inputs
            else "action, _ = net.predict(obs, deterministic=True)  # one observation, or a batch"
        )
        return (
            "import importlib.util  # numpy alone: no torch, no border-py\n\n"
            "spec = importlib.util.spec_from_file_location(\n"
            f'    "border_policy", "{where}/policy.py"\n'
            ")\n"
            "policy = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(policy)\n"
            f'net = policy.load("{where}")\n' + call
        )
    if fmt == "torchscript":
        call = (
            f"action, values, *state = model({', '.join(inputs)})  # tensors"
            if inputs
            else "actions, values = model(torch.as_tensor(obs_batch))"
        )
        return (
            f'import torch  # torch alone: no border-py\n\nmodel = torch.jit.load("{where}")\n'
            + call
        )
    feed = ", ".join(f'"{name}": {name}' for name in inputs or [])
    call = (
        f"action, values, *state = session.run(None, {{{feed}}})"
        if inputs
        else 'actions, values = session.run(["action", "values"], {"obs": obs_batch})'
    )
    return (
        "import onnxruntime  # no torch, no border-py\n\n"
        f'session = onnxruntime.InferenceSession("{where}")\n' + call
    )


def export_usage(
    fmt: str, exported: Path, repo_id: str, inputs: list[str] | None = None
) -> list[str]:
    """The card's lines on running the export at ``exported`` (relative to the folder) from the
    dir ``border pull repo_id`` writes (run from where the pull ran): the files are named by
    path, and no downloaded dir is put on ``sys.path``. ``inputs``: a recurrent policy's step
    inputs (:func:`~border_py.deploy.recurrent_graph.step_names`), whose state the caller
    carries; None for a feed-forward policy."""
    described = description_path(exported, fmt)
    lines = [
        f"Without border-py, the policy exported to {fmt} (`{exported}`) maps observations,"
        f" preprocessed as the run's env wrappers do (`{described}` says"
        " how; others, such as frames scaled to floats, are refused), to the greedy actions:",
        "",
        fenced(export_code(fmt, f"{pull_dir(repo_id)}/{exported}", inputs), "python"),
    ]
    if inputs:
        lines += [
            "",
            "The policy is recurrent and the model holds no state: its inputs are"
            f" {', '.join(f'`{name}`' for name in inputs)}; at an episode's first step the state"
            " is zeros and `prev_action` -1, then the state it returned and the action taken"
            f" (`{described}`'s `state` says the shapes).",
        ]
    return lines
