"""What each process of a MinAtar run pays to make its first env: border-py's
``register_minatar`` (which defers the modules ``minatar`` imports only to draw:
:mod:`border_py.envs.deferred`) against importing ``minatar.gym`` as it is, alternately, each in a
fresh interpreter that has imported torch and gymnasium first (as the learner, the actors and the
evaluator have). Medians of ``--repeats``; the figures are seconds from after those imports to
the first observation of ``MinAtar/Breakout-v1``, and their ratio.

    python benchmarks/minatar_startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = """
import sys, time
import gymnasium, torch
start = time.perf_counter()
if sys.argv[1] == "deferred":
    from border_py.envs.minatar import register_minatar
    register_minatar()
else:
    import border_py.envs.minatar
    import minatar.gym
    minatar.gym.register_envs()
gymnasium.make("MinAtar/Breakout-v1").reset(seed=0)
print(time.perf_counter() - start, "pandas" in sys.modules and "__file__" in vars(sys.modules["pandas"]))
"""


def first_env_seconds(way: str) -> tuple[float, bool]:
    """Seconds to the first observation in a fresh interpreter, and whether pandas was loaded."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, way], check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[-2]), out[-1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"deferred": [], "imported": []}
    loaded: dict[str, bool] = {}
    for _ in range(args.repeats):
        for way in seconds:
            took, loaded[way] = first_env_seconds(way)
            seconds[way].append(took)
    figures: dict[str, float | bool] = {
        f"{way}_s": statistics.median(v) for way, v in seconds.items()
    }
    figures["deferred_vs_imported"] = figures["deferred_s"] / figures["imported_s"]
    figures |= {f"pandas_loaded_{way}": loaded[way] for way in seconds}
    for way in seconds:
        print(
            f"{way:>8}: {figures[f'{way}_s']:.3f} s to the first MinAtar observation"
            f" (pandas loaded: {loaded[way]})"
        )
    print(f"deferred / imported: {figures['deferred_vs_imported']:.2f}x")
    rounded = {k: v if isinstance(v, bool) else round(v, 4) for k, v in figures.items()}
    print("RESULT " + json.dumps(rounded))


if __name__ == "__main__":
    main()
