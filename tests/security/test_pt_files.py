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
from border_py.runs.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from border_py.runs.session import restore_agent
from border_py.runs.state import TrainerState
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
        state=TrainerState(0, 0, 0, {}, {}, {}, {}),
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


END = struct.Struct("<4s4H2LH")  # a zip end record


def two_directories(bomb: bytes) -> bytes:
    """The review's S1 file: the bomb with a second central directory after its own, which says
    that the bombed record is stored, at its deflated size. The end record still states the
    first directory's offset (where torch's reader goes), with the second's size, so Python's
    ``zipfile``, which reads the directory that ends where the end record starts (taking the gap
    for prepended data), reads the second one."""
    end = bomb.rindex(b"PK\x05\x06")
    _, _, _, n, total, size, offset, _ = END.unpack(bomb[end : end + END.size])
    assert bomb[end - 20 : end - 16] != b"PK\x06\x07"  # the bomb has no zip64 end record
    deflated, stored = bomb[offset : offset + size], bytearray(bomb[offset : offset + size])
    at = 0
    while at < len(stored):  # each directory entry: 46 bytes, then its name, extra and comment
        name_len, extra_len, comment_len = struct.unpack("<HHH", stored[at + 28 : at + 34])
        if stored[at + 46 : at + 46 + name_len].endswith(b"/data/0"):
            packed = stored[at + 20 : at + 24]  # its compressed size: now its size, stored
            stored[at + 10 : at + 12], stored[at + 24 : at + 28] = b"\0\0", packed
        at += 46 + name_len + extra_len + comment_len
    last = END.pack(b"PK\x05\x06", 0, 0, n, total, len(stored), offset, 0)
    return bomb[:offset] + deflated + bytes(stored) + last


def test_a_second_central_directory_is_refused(bomb_file, tmp_path):
    """S1: Python's ``zipfile`` sees every record stored (the old check passed it), torch's reader
    the deflated one (``load_pt`` returned a 512 MiB tensor); refused from the layout, nothing
    inflated."""
    path = tmp_path / "policy.pt"
    path.write_bytes(two_directories(bomb_file.read_bytes()))
    with zipfile.ZipFile(path) as archive:  # what the old check read: nothing compressed
        records = archive.infolist()
        assert all(r.compress_type == zipfile.ZIP_STORED for r in records)
        assert sum(r.file_size for r in records) < path.stat().st_size
        directory = archive.start_dir
    end = path.stat().st_size - END.size
    with pytest.raises(ConfigError) as refused:
        load_pt(path)
    assert str(refused.value) == (
        f"{path}: its central directory ({end - directory:,} B at"
        f" {directory - (end - directory):,}) does not end where its end record starts"
        f" ({end:,}); torch.save never writes such a file, so this is not a checkpoint to load"
    )


def genuine(path: Path) -> bytearray:
    """The bytes of a ``torch.save`` file (it always writes a zip64 end record and locator)."""
    torch.save({"w": torch.zeros(16)}, path)
    data = bytearray(path.read_bytes())
    assert data[-42:-38] == b"PK\x06\x07" and data[-98:-94] == b"PK\x06\x06"
    return data


def with_comment(data: bytearray) -> bytes:
    """A comment after the end record (Python and torch may then find different end records)."""
    data[-2:] = struct.pack("<H", 4)
    return bytes(data) + b"note"


def locator_elsewhere(data: bytearray) -> bytes:
    """A zip64 locator pointing away from the zip64 record that Python reads (just before it)."""
    data[-34:-26] = struct.pack("<Q", 0)
    return bytes(data)


def disagreeing_zip64(data: bytearray) -> bytes:
    """A zip64 record whose directory offset differs from the end record's (not its sentinel)."""
    offset = struct.unpack("<Q", data[-98 + 48 : -98 + 56])[0]
    data[-6:-2] = struct.pack("<I", offset + 1)
    return bytes(data)


@pytest.mark.parametrize(
    ("craft", "line"),
    [
        (with_comment, "its zip end record is not its last 22 bytes"),
        (locator_elsewhere, "its zip64 end record is not where its locator says, or disagrees"),
        (disagreeing_zip64, "its zip64 end record is not where its locator says, or disagrees"),
    ],
    ids=["comment", "locator", "zip64"],
)
def test_an_end_record_torch_save_never_writes_is_refused(tmp_path, craft, line):
    """Each lets the two readers read different directories; ``zipfile`` accepts them all."""
    path = tmp_path / "agent.pt"
    path.write_bytes(craft(genuine(path)))
    with zipfile.ZipFile(path) as archive:
        assert archive.infolist()
    with pytest.raises(ConfigError) as refused:
        load_pt(path)
    assert str(refused.value) == (
        f"{path}: {line}; torch.save never writes such a file, so this is not a checkpoint to load"
    )


NOT_SAVED = "border saves no such tensor, so this is not a checkpoint to load"


def test_a_stride_0_view_is_refused_before_anything_copies_it(tmp_path):
    """S2: 4 bytes on disk declared as 2^26 floats (a copy takes 256 MiB)."""
    path = tmp_path / "agent.pt"
    torch.save({"exp_avg_sq": torch.zeros(1).expand(2**26)}, path)
    assert path.stat().st_size < 4096
    with pytest.raises(ConfigError) as refused:
        load_pt(path)
    assert str(refused.value) == (
        f"{path}: a tensor of shape (67108864,) is a view of strides (0,), not contiguous;"
        f" {NOT_SAVED}"
    )


def test_views_of_one_storage_larger_than_the_file_are_refused(tmp_path):
    """A thousand contiguous views of one 4 KiB storage: 4 MiB once each is copied."""
    path = tmp_path / "agent.pt"
    base = torch.zeros(1024)
    torch.save({"state": [base[:] for _ in range(1000)]}, path)
    with pytest.raises(ConfigError, match=r"its tensors take 4,096,000 B, more than the [\d,]+ B"):
        load_pt(path)


def test_a_sparse_tensor_is_refused(tmp_path):
    """A sparse tensor of 2^40 elements holding none (dense, 4 TiB)."""
    path = tmp_path / "policy.pt"
    empty = torch.sparse_coo_tensor(
        torch.zeros(1, 0, dtype=torch.long), torch.zeros(0), (2**40,), check_invariants=True
    )
    torch.save({"w": empty}, path)
    with pytest.raises(ConfigError) as refused:
        load_pt(path)
    assert str(refused.value) == (
        f"{path}: a tensor of shape (1099511627776,) is torch.sparse_coo, not dense; {NOT_SAVED}"
    )


def updated(agent, spaces, **keys):
    """``agent`` built on ``spaces`` with ``keys``, after one update (Adam's moments exist)."""
    built = agent(*spaces, **keys)
    obs = np.stack([spaces[0].sample() for _ in range(8)])
    actions = np.stack([spaces[1].sample() for _ in range(8)])
    built.update(Transitions(obs, actions, np.zeros(8, np.float32), obs, np.ones(8, np.float32)))
    return built


@pytest.mark.parametrize(
    ("key", "saved", "error"),
    [
        (
            "exp_avg_sq",
            torch.zeros(1, 2**16),
            "saved optimizer exp_avg_sq of shape (1, 65536) for a parameter of shape (16, 4)",
        ),
        ("step", torch.zeros(2**16), "saved optimizer step of shape (65536,), not one number"),
        ("exp_avg", [0.0], "saved optimizer exp_avg of type list, not a tensor of shape (16, 4)"),
    ],
    ids=["exp_avg_sq", "step", "not-a-tensor"],
)
def test_adams_saved_state_must_fit_the_agents_parameters(key, saved, error):
    """S2: each entry of Adam's state is checked against the parameter before it is copied (only
    ``exp_avg``'s shape was): refused in the resume's one line."""
    agent = updated(DQN, CARTPOLE, hidden_sizes=[16], batch_size=8)
    state = agent.state_dict()
    state["optimizer"]["state"][0][key] = saved  # the first layer's
    checkpoint = Checkpoint(Path("ckpt"), {}, state, None, {}, {})
    with pytest.raises(ConfigError) as refused:
        restore_agent(checkpoint, DQN(*CARTPOLE, hidden_sizes=[16], batch_size=8), CARTPOLE)
    assert str(refused.value).startswith(f"ckpt: does not fit the agent config ({error}")


@pytest.mark.parametrize(
    ("key", "saved", "error"),
    [
        ("log_alpha", torch.zeros(2**16), "saved log_alpha of shape (65536,), not the agent's ()"),
        (
            "noise",
            torch.zeros(8, 2**12),
            "saved noise of shape (8, 4096) and torch.float32, not float32 rows of 1",
        ),
        (
            "noise",
            torch.zeros(8, 1, dtype=torch.float64),
            "saved noise of shape (8, 1) and torch.float64, not float32 rows of 1",
        ),
    ],
    ids=["log_alpha", "noise-width", "noise-dtype"],
)
def test_sacs_saved_tensors_must_fit_the_agent(key, saved, error):
    """SAC's learned temperature and its exploration noise (one row per env, ``act_dim`` wide,
    float32) are checked before they are copied or converted."""
    agent = updated(SAC, PENDULUM, hidden_sizes=[16], batch_size=8, noise_correlation=0.5)
    agent.act(np.zeros((8, 3), np.float32), explore=True)
    state = agent.state_dict()
    state[key] = saved
    checkpoint = Checkpoint(Path("ckpt"), {}, state, None, {}, {})
    with pytest.raises(ConfigError) as refused:
        restore_agent(checkpoint, SAC(*PENDULUM, hidden_sizes=[16], batch_size=8), PENDULUM)
    assert str(refused.value).startswith(f"ckpt: does not fit the agent config ({error}")


def test_a_policy_of_another_shape_is_refused_before_it_is_copied():
    """The policy's weights go through torch's ``load_state_dict``, which compares every shape
    with the network's before it copies (here: a 16 MiB layer for a 16-wide one); so do the
    agent's networks on a resume (``Weights`` parts)."""
    agent = DQN(*CARTPOLE, hidden_sizes=[16])
    policy = agent.policy_state()
    name = next(k for k, v in policy.items() if v.shape == (16, 4))
    policy[name] = torch.zeros(2**20, 4)
    with pytest.raises(RuntimeError, match=r"size mismatch .*torch.Size\(\[1048576, 4\]\)"):
        agent.load_policy_state(policy)
    assert next(agent.q.parameters()).shape == (16, 4)
