"""Whether an env's episodes can be recorded as videos (``border eval eval.video=true``, the
replay of ``border push``): moviepy present, and an env that renders ``(H, W, 3)`` image frames
with ``render_mode="rgb_array"``; and the offscreen SDL settings every process that renders them
takes (:func:`render_offscreen`)."""

from __future__ import annotations

import os
import warnings

import numpy as np

from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError, first_line

__all__ = ["OFFSCREEN", "check_video", "render_offscreen"]

# SDL (pygame, which gymnasium's classic-control and Box2D envs draw with) without a display or a
# sound device: otherwise SDL looks for them and prints "error: XDG_RUNTIME_DIR is invalid or not
# set in the environment." on stderr where there is no desktop session (a server, a container)
OFFSCREEN = {"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"}


def render_offscreen() -> None:
    """Have SDL draw frames offscreen in this process (:data:`OFFSCREEN`), before its first frame:
    each variable the user has set is left as it is."""
    for name, value in OFFSCREEN.items():
        os.environ.setdefault(name, value)


def check_video(env_factory: GymEnvFactory, key: str) -> None:
    """Fail with one line starting with ``key`` if videos cannot be recorded: moviepy missing, or
    an env that cannot be made with ``render_mode="rgb_array"`` or does not render (H, W, 3)
    image frames.

    Raises:
        ConfigError: why not (and, for a missing moviepy, the extra to install).
    """
    render_offscreen()
    try:
        import moviepy  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"{key}: cannot record ({exc}); pip install 'border-py[video]'") from None
    name = env_factory.id
    with warnings.catch_warnings():  # gymnasium warns about a render mode it then cannot honour
        warnings.simplefilter("ignore")
        try:
            env = env_factory.make(render_mode="rgb_array")
        except Exception as exc:  # the env's constructor refused the render mode
            raise ConfigError(
                f"{key}: {name} cannot be made with render_mode='rgb_array' ({first_line(exc)})"
            ) from None
        try:
            modes = list(env.metadata.get("render_modes", []))
            if "rgb_array" not in modes:
                raise ConfigError(
                    f"{key}: {name} does not render rgb_array frames (its render modes:"
                    f" {', '.join(modes) or 'none'}); record videos of an env that does"
                )
            env.reset(seed=0)
            frame = env.render()
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"{key}: {name} failed to render a frame ({first_line(exc)})"
            ) from None
        finally:
            env.close()
    if not (isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[-1] == 3):
        got = f"shape {frame.shape}" if isinstance(frame, np.ndarray) else type(frame).__name__
        raise ConfigError(f"{key}: {name} rendered {got}, not an (H, W, 3) image; cannot record")
