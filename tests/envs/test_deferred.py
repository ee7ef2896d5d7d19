"""Modules an env package imports only to draw are imported when first used
(:mod:`border_py.envs.deferred`), and MinAtar still draws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from border_py.envs.deferred import DeferredModule, defer_imports

HEAVY = """
import sys
sys.loaded_heavy = getattr(sys, "loaded_heavy", 0) + 1
VALUE = 42
"""


@pytest.fixture
def heavy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An installed module, ``heavy_for_test``, that counts its executions in ``sys``."""
    (tmp_path / "heavy_for_test.py").write_text(HEAVY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "loaded_heavy", 0, raising=False)
    yield "heavy_for_test"
    sys.modules.pop("heavy_for_test", None)


def test_an_import_binds_the_stand_in_and_the_first_read_loads_the_module_once(heavy):
    defer_imports(heavy)
    import heavy_for_test  # type: ignore[import-not-found]

    assert isinstance(heavy_for_test, DeferredModule) and sys.loaded_heavy == 0
    assert heavy_for_test.VALUE == 42 and sys.loaded_heavy == 1
    real = sys.modules[heavy]
    assert not isinstance(real, DeferredModule) and real.VALUE == 42
    assert heavy_for_test.VALUE == 42 and sys.loaded_heavy == 1  # the stand-in asks the real one


def test_what_is_imported_or_not_installed_is_left_alone(heavy):
    import heavy_for_test  # type: ignore[import-not-found]

    defer_imports(heavy, "no_such_module_here", "no_such_package_here.sub")
    assert sys.modules[heavy] is heavy_for_test and sys.loaded_heavy == 1
    assert "no_such_module_here" not in sys.modules
    assert "no_such_package_here.sub" not in sys.modules


MINATAR = """
import sys
import numpy as np
import gymnasium as gym
from border_py.envs.minatar import register_minatar
register_minatar()
env = gym.make("MinAtar/Breakout-v1", render_mode="rgb_array")
env.reset(seed=0)
state = env.unwrapped.game.state()
loaded = [m for m in ("pandas", "scipy.stats") if m in sys.modules]
frame = env.render()  # minatar's cubehelix palette: seaborn, imported now
import seaborn
n = state.shape[-1]
palette = [(0, 0, 0), *seaborn.color_palette("cubehelix", n)]
expected = np.stack(palette)[np.amax(state * np.arange(1, n + 1), 2)]
print(loaded, np.array_equal(frame, expected), "pandas" in sys.modules)
"""


@pytest.mark.filterwarnings("ignore")
def test_minatar_starts_without_its_drawing_modules_and_draws_with_them():
    pytest.importorskip("minatar")
    out = subprocess.run(
        [sys.executable, "-c", MINATAR], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "True", "True"]
