"""The env of a border-py export, built without border-py (``border export`` copies this file as
``env.py`` into the numpy dir, and as ``<file name>.env.py`` beside an ONNX or TorchScript file).

It reads the ``env_interface`` of the export's ``preprocessing.json``: the registration the env's
package needs before ``gymnasium.make`` (MinAtar's ``register_envs()``, ``import ale_py``), the
id and its keyword arguments, and the steps from ``gymnasium.make``'s env to the network's input,
in order. A step is ``env`` (a wrapper that changes the episodes: Atari's preprocessing, FIRE
after a reset, a time limit, MinAtar's flicker, a wrapper of the run's ``env.wrappers``) or
``observation`` (a function of the observations alone: MinAtar's channels-first uint8 grid,
POPGym's one-hot encoding, a frame stack)::

    import importlib.util, json
    spec = importlib.util.spec_from_file_location("border_env", "export/env.py")
    env_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(env_py)
    described = json.load(open("export/preprocessing.json"))
    env = env_py.make_env(described)                # observations as the network takes them
    raw = env_py.make_env(described, raw=True)      # before the trailing observation steps
    obs, _ = raw.reset(seed=0)
    x, stack = env_py.preprocess(described, obs)    # what the network takes; stack: a frame
    obs, *_ = raw.step(action)                      # stack's state (None without one)
    x, stack = env_py.preprocess(described, obs, stack)

``preprocess`` applies the trailing observation steps (those after the last ``env`` step):
without flicker or ``env.wrappers``, every observation step, so ``make_env(raw=True)`` is
``gymnasium.make`` of the id. Needs numpy and gymnasium (and the env's package for ``make_env``).
Reset seeds: ``border eval eval.seed=S`` plays its episode ``i`` from ``reset(seed=S + i)``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "FireOnReset",
    "Flicker",
    "Preprocessed",
    "load_description",
    "make_env",
    "preprocess",
    "trailing",
]


def load_description(path: str | Path) -> dict[str, Any]:
    """The export's ``preprocessing.json`` (a path to it, or to the numpy dir holding it)."""
    path = Path(path)
    return json.loads((path / "preprocessing.json" if path.is_dir() else path).read_text())


def _interface(described: dict[str, Any]) -> dict[str, Any]:
    interface = described.get("env_interface", described)
    if "unsupported" in interface:
        raise ValueError(
            f"this export's env cannot be built without border-py: {interface['unsupported']}"
        )
    return interface


def trailing(described: dict[str, Any]) -> list[dict[str, Any]]:
    """The observation steps after the last env step: what :func:`preprocess` applies."""
    steps = _interface(described)["steps"]
    last_env = max((i for i, step in enumerate(steps) if step["kind"] == "env"), default=-1)
    return steps[last_env + 1 :]


def _leaves(value: Any) -> list[Any]:
    """A POPGym observation's parts in order (a tuple's flattened)."""
    if isinstance(value, tuple | list) and not isinstance(value, np.ndarray):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _one_hot(parts: list[dict[str, Any]], obs: Any) -> np.ndarray:
    """One-hot float32 blocks per discrete part, a Box part as float32, concatenated."""
    blocks = []
    for part, value in zip(parts, _leaves(obs), strict=True):
        if part["type"] == "Box":
            blocks.append(np.asarray(value, np.float32).reshape(-1))
            continue
        codes = (np.asarray(value) - np.asarray(part["start"])).reshape(-1)
        for size, code in zip(np.reshape(part["sizes"], -1).tolist(), codes.tolist(), strict=True):
            block = np.zeros(size, np.float32)
            block[code] = 1.0
            blocks.append(block)
    return np.concatenate(blocks)


def _transform(step: dict[str, Any], obs: Any) -> np.ndarray:
    """One observation through one observation step other than a frame stack."""
    if step["op"] == "channels_first":  # (H, W, C) -> (C, H, W)
        return np.ascontiguousarray(np.transpose(obs, (2, 0, 1)), dtype=step["args"]["dtype"])
    if step["op"] == "one_hot":
        return _one_hot(step["args"]["parts"], obs)
    raise ValueError(f"observation step {step['op']!r}: unknown to this env.py (export again)")


def preprocess(described: dict[str, Any], obs: Any, state: Any = None) -> tuple[np.ndarray, Any]:
    """One raw observation (what ``make_env(described, raw=True)`` gives) as the network's input,
    and the frame stack's state after it (None without a frame stack).

    Pass ``state=None`` at an episode's first observation (the stack repeats it, as gymnasium's
    ``FrameStackObservation`` does), then the state it returned.
    """
    x: Any = obs
    for step in trailing(described):
        if step["op"] != "frame_stack":
            x = _transform(step, x)
            continue
        frame, k = np.asarray(x), step["args"]["k"]
        state = np.stack([frame] * k) if state is None else np.concatenate([state[1:], frame[None]])
        x = state.reshape(-1, *state.shape[2:]) if step["args"]["merge"] else state
    return np.asarray(x), state


# What border-py's exports register: each package and the function of it they call (None: its
# import registers). preprocessing.json is data: anything else it names is imported only when the
# caller trusts its package (``make_env(..., trust=("my_pkg",))``).
REGISTRATIONS = {"ale_py": None, "minatar.gym": "register_envs", "popgym": None}
WRITING_WRAPPERS = ("RecordVideo",)  # gymnasium wrappers that write files where their args say


def _trusted(name: str, trust: tuple[str, ...]) -> bool:
    """Whether the dotted ``name`` lies in a package of ``trust``."""
    return any(name == t or name.startswith(t + ".") for t in trust)


def _register(interface: dict[str, Any], trust: tuple[str, ...]) -> None:
    """Import the env's package (and call its registration function) as the export says.

    Raises:
        ValueError: a registration border-py does not write, from a package not trusted.
    """
    for entry in interface["register"]:
        name, call = str(entry["module"]), entry.get("call")
        if REGISTRATIONS.get(name, False) != call and not _trusted(name, trust):
            raise ValueError(
                f"registration {name}.{call or ''}: not one border-py writes"
                f" ({sorted(REGISTRATIONS)}); pass trust=('{name.split('.')[0]}',) to run it"
            )
        module = importlib.import_module(name)
        if call:
            getattr(module, call)()


def _wrapper_class(target: str, trust: tuple[str, ...]) -> type:
    """The wrapper class a ``wrapper`` step names: one of gymnasium's (but those that write
    files), or one in a trusted package.

    Raises:
        ValueError: another target, or one that is not a ``gymnasium.Wrapper``.
    """
    module, _, name = target.rpartition(".")
    gymnasium_own = module == "gymnasium.wrappers" and name not in WRITING_WRAPPERS
    if not (gymnasium_own or _trusted(target, trust)):
        raise ValueError(
            f"wrapper {target}: only gymnasium.wrappers.* (but {', '.join(WRITING_WRAPPERS)}) run"
            f" without trust; pass trust=('{target.split('.')[0]}',) to run it"
        )
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, gym.Wrapper)):
        raise ValueError(f"wrapper {target}: not a gymnasium.Wrapper")
    return cls


def _box(space: dict[str, Any]) -> gym.spaces.Box:
    """A ``Box`` from the description's JSON of it (bounds numbers, infinite ones included)."""
    shape, dtype = tuple(space["shape"]), np.dtype(space["dtype"])
    low, high = (np.broadcast_to(np.asarray(space[k], dtype), shape) for k in ("low", "high"))
    return gym.spaces.Box(low, high, shape, dtype)


class FireOnReset(gym.Wrapper):
    """Presses FIRE (action ``fire``) once after every reset, its reward not counted; an episode
    that the FIRE step ended is reset again, without a seed (at most ``max_resets`` times)."""

    def __init__(self, env: gym.Env, fire: int, max_resets: int) -> None:
        super().__init__(env)
        self.fire, self.max_resets = fire, max_resets

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        """Reset, then step FIRE: the observation after FIRE."""
        for _ in range(self.max_resets):
            _, reset_info = self.env.reset(seed=seed, options=options)
            obs, _, terminated, truncated, info = self.env.step(self.fire)
            if not (terminated or truncated):
                return obs, reset_info | info
            seed = None
        raise RuntimeError(f"FIRE ended the episode right after each of {self.max_resets} resets")


class Flicker(gym.ObservationWrapper):
    """Blanks the whole observation (zeros of its dtype) with probability ``p`` at every step,
    the first included; the draws come from a generator that ``reset(seed=s)`` seeds with ``s``
    and later resets carry on."""

    def __init__(self, env: gym.Env, p: float) -> None:
        super().__init__(env)
        self.p, self.rng = p, np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        """Reset the env; a ``seed`` seeds the blanks' generator too."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def observation(self, observation: Any) -> Any:
        """``observation``, or a blank with probability ``p``."""
        space = self.observation_space
        blank = self.rng.random() < self.p
        return np.zeros(space.shape or (), space.dtype) if blank else observation


class Preprocessed(gym.Wrapper):
    """The trailing observation steps (:func:`preprocess`) as a wrapper: the network's input."""

    def __init__(self, env: gym.Env, described: dict[str, Any]) -> None:
        super().__init__(env)
        self.described, self.state = described, None
        self.observation_space = _box(described["observation"])

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset: the first observation fills the frame stack."""
        obs, info = self.env.reset(**kwargs)
        x, self.state = preprocess(self.described, obs)
        return x, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step: the observation joins the frame stack."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        x, self.state = preprocess(self.described, obs, self.state)
        return x, reward, terminated, truncated, info


def _wrap(env: gym.Env, step: dict[str, Any], trust: tuple[str, ...]) -> gym.Env:
    """``env`` inside one step that is not trailing."""
    op, args = step["op"], dict(step.get("args", {}))
    if op == "atari_preprocessing":
        return gym.wrappers.AtariPreprocessing(env, **args)
    if op == "time_limit":
        return gym.wrappers.TimeLimit(env, **args)
    if op == "fire_on_reset":
        return FireOnReset(env, **args)
    if op == "flicker":
        return Flicker(env, **args)
    if op == "wrapper":
        return _wrapper_class(str(args.pop("_target_")), trust)(env=env, **args)
    if step["kind"] == "observation" and op != "frame_stack":
        space = _box(step["space"])
        return gym.wrappers.TransformObservation(env, lambda obs: _transform(step, obs), space)
    raise ValueError(f"step {op!r} before an env step: unknown to this env.py (export again)")


def make_env(
    described: dict[str, Any],
    render_mode: str | None = None,
    raw: bool = False,
    trust: tuple[str, ...] = (),
) -> gym.Env:
    """The env ``border eval`` plays (its evaluation env), from the export's description alone:
    its observations are the network's input; ``raw``: before the trailing observation steps
    (:func:`preprocess` applies them). The description is data: it imports only the packages
    border-py registers envs from and gymnasium's own wrappers, unless ``trust`` names more
    packages (your env's, your wrappers').

    Raises:
        ValueError: an env the export cannot describe (a factory not border-py's own), or a
            registration, env id or wrapper from a package not trusted (one line).
    """
    interface = _interface(described)
    env_id = str(interface["id"])
    if ":" in env_id and not _trusted(env_id.partition(":")[0], trust):
        raise ValueError(f"env id {env_id}: imports {env_id.partition(':')[0]}; pass trust=(...)")
    if env_id not in gym.registry:
        _register(interface, trust)
    kwargs = dict(interface["kwargs"])
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    env = gym.make(interface["id"], **kwargs)
    steps, ending = interface["steps"], trailing(described)
    for step in steps[: len(steps) - len(ending)]:
        env = _wrap(env, step, trust)
    return env if raw or not ending else Preprocessed(env, described)
