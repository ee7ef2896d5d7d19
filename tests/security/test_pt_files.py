"""A checkpoint's ``.pt`` files are sized from their zip directory before torch reads them: a
decompression bomb (a small file whose deflated record inflates to 512 MiB) is refused before it
is inflated, by every command that loads a checkpoint, and genuine checkpoints of every agent
still load."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import load_policy, resources
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint, save_checkpoint
from border_py.transitions import Transitions

from ..conftest import run_border
from .crafted import copy_run

BOMB = 512 * 2**20  # bytes the bomb's record inflates to
CHUNK = 2**20


def load_pt(path: Path):
    """:func:`border_py.runs.pt_files.load_pt` (imported here: the tests run against main too)."""
    from border_py.runs.pt_files import load_pt

    return load_pt(path)


def bomb(path: Path) -> Path:
    """The security review's bomb: ``torch.save`` of 16 bytes, rewritten with the storage record
    as 512 MiB of zeros, ``ZIP_DEFLATED`` (about 0.5 MiB on disk), and the pickle's sizes patched
    to match, so that ``torch.load`` would inflate it and return it whole."""
    saved = io.BytesIO()
    torch.save({"w": torch.zeros(16, dtype=torch.uint8)}, saved)
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w") as out:
        for info in source.infolist():
            if info.filename.endswith("/data/0"):  # the storage: zeros, deflated
                entry = zipfile.ZipInfo(info.filename)
                entry.compress_type = zipfile.ZIP_DEFLATED
                with out.open(entry, "w", force_zip64=True) as record:
                    for _ in range(BOMB // CHUNK):
                        record.write(bytes(CHUNK))
                continue
            data = source.read(info)
            if info.filename.endswith("data.pkl"):  # its sizes: BININT1 16 -> BININT 2**29
                data = data.replace(b"K\x10", b"J" + struct.pack("<i", BOMB))
            out.writestr(info, data)
    return path


@pytest.fixture(scope="module")
def bomb_file(tmp_path_factory) -> Path:
    """The bomb, built once per module."""
    return bomb(tmp_path_factory.mktemp("bomb") / "policy.pt")


@pytest.fixture
def bombed(trained, tmp_path, bomb_file) -> Path:
    """A copy of the tiny real run whose every checkpoint's ``policy.pt`` is the bomb."""
    run = copy_run(trained, tmp_path / "run")
    for policy in run.glob("checkpoints/*/policy.pt"):
        policy.write_bytes(bomb_file.read_bytes())
    return run


def test_the_bomb_is_refused_from_its_zip_directory(bomb_file):
    assert bomb_file.stat().st_size < 2**20  # it is a bomb: 0.5 MiB on disk
    with pytest.raises(ConfigError) as refused:
        load_pt(bomb_file)
    with zipfile.ZipFile(bomb_file) as archive:
        deflated = archive.getinfo("archive/data/0").compress_size
    assert str(refused.value) == (
        f"{bomb_file}: its record 'archive/data/0' is compressed ({deflated:,} B inflating to"
        " 536,870,912 B); torch.save never compresses, so this is not a checkpoint to load"
    )


def test_load_policy_refuses_a_bombed_run_in_one_line(bombed):
    with pytest.raises(ConfigError, match=r"/policy.pt: its record .* is compressed"):
        load_policy(bombed)
    with pytest.raises(ConfigError, match=r"/policy.pt: its record .* is compressed"):
        load_checkpoint(bombed)  # a resume loads it first


def test_records_larger_than_the_file_are_refused(tmp_path):
    """A stored record whose directory entry claims 1 GiB (sizes patched in the central
    directory): refused before torch allocates for it."""
    path = tmp_path / "agent.pt"
    torch.save({"w": torch.zeros(16)}, path)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("/data/0"))
    name = info.filename.encode()
    header = data.index(b"PK\x01\x02")
    while data[header + 46 : header + 46 + len(name)] != name:  # this record's directory entry
        header = data.index(b"PK\x01\x02", header + 4)
    data[header + 20 : header + 28] = struct.pack("<II", 2**30, 2**30)  # compressed, size
    path.write_bytes(data)
    with pytest.raises(
        ConfigError, match=r"its records claim 1,073,74\d,\d+ B, more than the file's own"
    ):
        load_pt(path)


def test_a_file_larger_than_the_memory_available_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "policy.pt"
    torch.save({"w": torch.zeros(2**18)}, path)  # 1 MiB
    monkeypatch.setattr(resources, "available_memory", lambda: (2**19, "of memory available"))
    with pytest.raises(ConfigError, match=r"loading it needs ~1.0 MiB, more than the 512.0 KiB"):
        load_pt(path)


def test_a_file_torch_save_did_not_write_is_refused(tmp_path):
    legacy = tmp_path / "legacy.pt"  # torch's pre-1.6 format: not a zip archive
    torch.save({"w": torch.zeros(4)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(ConfigError, match=r"corrupt or truncated checkpoint file \(not a zip"):
        load_pt(legacy)


CARTPOLE = (gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))
PIXELS = (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
PENDULUM = (gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Box(-2, 2, (1,), np.float32))


@pytest.mark.parametrize(
    ("agent", "spaces", "keys"),
    [
        (DQN, CARTPOLE, {"hidden_sizes": [256, 256], "batch_size": 8}),
        (IQN, CARTPOLE, {"hidden_sizes": [256, 256], "batch_size": 8}),
        (SAC, PENDULUM, {"hidden_sizes": [256, 256], "batch_size": 8}),
        (DQN, PIXELS, {"hidden_sizes": [512], "batch_size": 8}),
    ],
    ids=["dqn", "iqn", "sac", "pixel-dqn"],
)
def test_genuine_checkpoints_of_every_agent_load_and_fit_their_estimate(
    tmp_path, agent, spaces, keys
):
    """After an update (Adam's moments exist), the files ``save_checkpoint`` writes load, are
    sized under their own size, and are about the footprint's checkpoint estimate (which the
    disk bound uses)."""
    built = agent(*spaces, **keys)
    obs = np.stack([spaces[0].sample() for _ in range(8)])
    actions = np.stack([spaces[1].sample() for _ in range(8)])
    batch = Transitions(obs, actions, np.zeros(8, np.float32), obs, np.ones(8, np.float32))
    built.update(batch)
    root = save_checkpoint(
        tmp_path / "checkpoints",
        "000000001",
        policy=built.policy_state(),
        agent_state=built.state_dict(),
        trainer_state={},
        config={"seed": 0, "env": {}, "agent": {}},
        meta={"opt_steps": 1},
    )
    from border_py.runs.pt_files import check_pt

    for name in ("policy.pt", "agent.pt"):
        with (root / name).open("rb") as handle:
            assert check_pt(root / name, handle) <= (root / name).stat().st_size
    built.load_state_dict(load_pt(root / "agent.pt"))
    built.load_policy_state(load_pt(root / "policy.pt"))
    written = (root / "policy.pt").stat().st_size + (root / "agent.pt").stat().st_size
    estimate = agent.footprint(*spaces, **keys).checkpoint
    assert 0.9 * written <= estimate <= 1.1 * written + 64 * 2**10, (written, estimate)


@pytest.mark.slow
def test_border_eval_refuses_a_bombed_run_in_one_line(bombed, tmp_path):
    out = run_border(["eval", str(bombed)], tmp_path)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("border: error: ") and "/policy.pt: its record" in line


PEAK = """\
import resource, sys
from border_py import load_policy
try:
    load_policy(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, file=sys.stderr)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


# Linux keeps a process's peak RSS across exec, and a child starts with its parent's: the test
# process, large by now, starts a small Python that starts the measured one.
SPAWN = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _peak_rss(run: Path) -> int:
    """Peak RSS (``ru_maxrss``) of a fresh Python that calls ``load_policy(run)``, in bytes."""
    command = [sys.executable, "-c", SPAWN, sys.executable, "-c", PEAK, str(run)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_bomb_is_never_inflated(trained, bombed):
    """The bombed load peaks within 64 MiB of a genuine one (inflated, it would add 512 MiB)."""
    genuine, refused = _peak_rss(trained), _peak_rss(bombed)
    print(f"peak RSS: genuine {genuine / 2**20:.0f} MiB, bombed {refused / 2**20:.0f} MiB")
    assert refused - genuine < 64 * 2**20, (genuine, refused)
