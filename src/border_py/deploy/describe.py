"""What an exported policy expects and gives, written beside every export
(``preprocessing.json``, and for the numpy dir a ``README.txt`` saying the same in words).

The model takes observations as the run's env gives them after its wrappers (``env.id``, its
kwargs, ``env.wrappers`` in order, or the Atari factory's preprocessing): recreate that env, or
feed the same arrays. uint8 observations are scaled inside the model, as in training
(:func:`~border_py.agents.networks.input_scale`: 1/255, or 1 over a lower upper bound).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from border_py._version import __version__
from border_py.agents.iqn import IQN
from border_py.agents.networks import input_scale
from border_py.agents.r2d2 import R2D2
from border_py.agents.sac import SAC
from border_py.deploy.env_recipe import env_interface, json_space
from border_py.deploy.load import Policy
from border_py.deploy.recurrent_graph import step_names
from border_py.layout import CHECKPOINTS
from border_py.secrets import redact

__all__ = ["EVAL_SEEDS", "describe", "readme"]

EVAL_SEEDS = (
    "border eval eval.seed=S plays episode i from env.reset(seed=S + i) (S by default: the run's"
    " selection seed, recorded as eval.seed in its eval_*.json); with eval.epsilon > 0 (Atari's"
    " default 0.001) each step of episode i first draws rng.random() < epsilon, then a random"
    " action rng.integers(n), from rng = numpy.random.default_rng((S, i)); an episode also ends"
    " at eval.max_steps steps"
)


def outputs(agent: object) -> str:
    """What the exported model's outputs are, for ``agent`` (see :mod:`.graph` and
    :mod:`.recurrent_graph`)."""
    if isinstance(agent, R2D2):
        after = "next_h, next_c" if agent.q.state_parts == 2 else "next_h"
        return (
            "values: Q(s, a) for every action (B, n); action: their arg max (B,), int64;"
            f" {after}: the core's state after this step (1, B, {agent.q.core_size}), float32"
        )
    if isinstance(agent, IQN):
        k = agent.args.k
        return (
            f"values: the mean quantile value over {k} fixed levels (j + 0.5) / {k} for every"
            " action (B, n); action: their arg max (B,), int64"
        )
    if isinstance(agent, SAC):
        return (
            "values: the Gaussian policy's mean before the tanh squash (B, A); action:"
            " clip(center + scale * tanh(mean), low, high) on the action bounds (B, *shape),"
            " float32"
        )
    return "values: Q(s, a) for every action (B, n); action: their arg max (B,), int64"


def state_contract(agent: R2D2, fmt: str) -> dict[str, Any]:
    """The recurrent state's contract of an exported R2D2 step (what the caller carries)."""
    q = agent.q
    inputs, names = step_names(q)
    lstm = q.state_parts == 2
    state = "h, c" if lstm else "h"
    contract = {
        "core": "lstm" if lstm else "gru",
        "hidden": q.core_size,
        "inputs": inputs,
        "outputs": names,
        "shapes": {
            "h": [1, "B", q.core_size],
            **({"c": [1, "B", q.core_size]} if lstm else {}),
            "prev_action": ["B"],
            **({"prev_reward": ["B"]} if q.prev_reward else {}),
        },
        "contract": f"the model holds no state: at an episode's first step pass {state} as"
        " float32 zeros and prev_action -1 (no previous action)"
        + (", prev_reward 0" if q.prev_reward else "")
        + f"; at every later step pass back the {', '.join(names[2:])} it returned, the"
        " action taken as prev_action"
        + (" and the reward that followed as prev_reward" if q.prev_reward else "")
        + "; each env of a batch is a row, its state zeroed where its episode starts",
    }
    if fmt == "numpy":
        contract["predict"] = (
            "policy.py's predict(obs, state, episode_start, deterministic=True) carries the state"
            " as Stable-Baselines3's recurrent policies do: pass back the state it returned"
            " (None at the first call) and episode_start True where an episode begins"
            + (
                "; set state = state._replace(prev_reward=reward) after each env step"
                if q.prev_reward
                else ""
            )
        )
    return contract


def _fraction(scale: float) -> str:
    """``1/255`` for a scale of 1/255: the factor as the 1/n it is."""
    return f"1/{round(1 / scale)}"


def checkpoint_name(checkpoint: Path) -> str:
    """The checkpoint as ``<run dir name>/checkpoints/<name>``: the export names where it comes
    from without the machine's paths (an export is meant to be shared)."""
    if checkpoint.parent.name == CHECKPOINTS:
        return f"{checkpoint.parent.parent.name}/{CHECKPOINTS}/{checkpoint.name}"
    return checkpoint.name


def describe(policy: Policy, fmt: str) -> dict[str, Any]:
    """``preprocessing.json``'s content for ``policy`` exported as ``fmt``."""
    obs = policy.observation_space
    scale = input_scale(obs)
    agent = policy.agent
    names = step_names(agent.q)[1] if isinstance(agent, R2D2) else ["action", "values"]
    description = {
        "format": fmt,
        "border_py": __version__,
        "agent": policy.agent_name,
        "checkpoint": checkpoint_name(policy.checkpoint),
        "opt_steps": policy.opt_steps,
        "env_id": policy.env_id,
        "env": redact(policy.config["env"]),
        "observation": json_space(obs)
        | {
            "scaling": f"uint8 values scaled by {_fraction(scale)} inside the model: pass them"
            " unscaled"
            if scale != 1.0
            else "none: pass the env's observations as they are",
            "input": "obs: a batch (B, *shape) of the dtype above",
        },
        "action": json_space(policy.action_space),
        "outputs": {"names": names, "meaning": outputs(policy.agent)},
        "env_interface": env_interface(
            policy.env_factory, str(policy.config["env"].get("_target_"))
        ),
        "eval_seeds": EVAL_SEEDS,
    }
    if isinstance(agent, R2D2):
        description["state"] = state_contract(agent, fmt)
    return description


def readme(description: dict[str, Any], name: str) -> str:
    """``README.txt``: the description in words, for a person opening the dir (named ``name``):
    how to run it with numpy alone, loading ``policy.py`` by its path (the dir is never put on
    ``sys.path``, where a file beside ``policy.py`` could stand in for a module it imports)."""
    env = description["env"]
    obs, act = description["observation"], description["action"]
    lines = [
        f"A greedy {description['agent']} policy exported by border-py {description['border_py']}"
        f" from {description['checkpoint']} (opt step {description['opt_steps']}).",
        "",
        f"Env: {description['env_id']} (border-py's factory {env.get('_target_')}).",
        *_env_lines(description["env_interface"]),
        "Observations the network takes: shape"
        f" {obs.get('shape')}, dtype {obs.get('dtype')}; scaling: {obs['scaling']}."
        " Others (another shape or layout, floats for uint8 frames) are refused in one line.",
        f"Actions: {act}.",
        f"Outputs: {description['outputs']['meaning']}.",
        f"Seeds: {description['eval_seeds']}.",
        *_state_lines(description.get("state")),
        "",
        "policy.py is Python: run it only from a source you trust. Run it with numpy alone (no"
        " torch, no border-py), from the dir that holds this one:",
        "",
        "    import importlib.util",
        "    spec = importlib.util.spec_from_file_location("
        f"'border_policy', {f'{name}/policy.py'!r})",
        "    policy = importlib.util.module_from_spec(spec)",
        "    spec.loader.exec_module(policy)",
        f"    net = policy.load({name!r})",
        *(
            []
            if "unsupported" in description["env_interface"]
            else [
                "    env = net.make_env()  # border eval's env: its observations are the network's",
                "    obs, _ = env.reset(seed=0)  # (raw = net.make_env(raw=True) gives them before",
                "    # the trailing observation steps: x, stack = net.preprocess(raw_obs, stack))",
            ]
        ),
        *(
            [
                "    state, start = None, np.ones(n_envs, dtype=bool)  # None: zeros",
                "    action, state = net.predict(obs, state, start, deterministic=True)",
                "    # then, after each env step: start = terminated | truncated",
            ]
            if "state" in description
            else ["    action, _ = net.predict(obs, deterministic=True)"]
        ),
        "",
        "preprocessing.json says the same as data; env.py (numpy and gymnasium) builds the env from"
        " it.",
    ]
    return "\n".join(lines) + "\n"


def _env_lines(interface: dict[str, Any]) -> list[str]:
    """The README's lines on building the env without border-py."""
    if "unsupported" in interface:
        return [f"Building the env without border-py: not described ({interface['unsupported']})."]
    register = "; ".join(entry["python"] for entry in interface["register"]) or "none"
    steps = [
        f"{step['op']}({', '.join(f'{k}={v!r}' for k, v in step.get('args', {}).items())})"
        f" [{step['kind']}]"
        for step in interface["steps"]
    ]
    return [
        f"Build it without border-py: first {register}; then gymnasium.make({interface['id']!r},"
        f" **{interface['kwargs']!r}); then in order: {', '.join(steps) or 'nothing'}.",
        "preprocess(raw_obs) applies the trailing observation steps (env.py's make_env(raw=True)"
        " gives the env before them; make_env() the env after them).",
    ]


def _state_lines(state: dict[str, Any] | None) -> list[str]:
    """The README's lines on a recurrent policy's state (none for a feed-forward one)."""
    if state is None:
        return []
    lines = [
        f"State ({state['core']}, {state['hidden']} wide): inputs {', '.join(state['inputs'])};"
        f" outputs {', '.join(state['outputs'])}. The {state['contract']}."
    ]
    if "predict" in state:
        lines.append(f"predict: {state['predict']}.")
    return lines
