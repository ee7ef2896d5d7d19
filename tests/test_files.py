"""``publishing.publish_dir``: a dir published whole or not at all, never over what it may not replace,
never through a link, with the umask's mode, every file and dir fsynced before the rename; and
the leftovers of a process killed while publishing are what a checkpoint's recovery cleans."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from border_py.publishing import publish_dir
from border_py.runs.checkpoint import recover, save_checkpoint
from border_py.runs.state import TrainerState


def tree(root: Path) -> dict[str, str | None]:
    """Every entry under ``root`` (links not followed): a file's text, a link's target, None for
    a dir."""
    out: dict[str, str | None] = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(top, name)
            key = str(path.relative_to(root))
            if path.is_symlink():
                out[key] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                out[key] = None
            else:
                out[key] = path.read_text()
    return out


def two_files(into: Path) -> str:
    (into / "a.txt").write_text("new a")  # plain writes: publish_dir makes them durable
    (into / "sub").mkdir()
    (into / "sub" / "b.txt").write_text("new b")
    return "filled"


NEW = {"out": None, "out/a.txt": "new a", "out/sub": None, "out/sub/b.txt": "new b"}


def test_a_dir_is_published_whole_and_fill_s_value_returned(tmp_path):
    assert publish_dir(tmp_path / "out", two_files) == "filled"
    assert tree(tmp_path) == NEW


def test_a_failure_mid_fill_leaves_nothing(tmp_path):
    def half(into: Path) -> None:
        (into / "a.txt").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        publish_dir(tmp_path / "out", half)
    assert tree(tmp_path) == {}
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("earlier")
    with pytest.raises(KeyboardInterrupt):
        publish_dir(tmp_path / "out", lambda into: two_files(into) and _interrupt(), replace=True)
    assert tree(tmp_path) == {"out": None, "out/old.txt": "earlier"}


def _interrupt() -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_an_existing_dest_is_refused_unless_replace_is_asked(tmp_path, kind):
    dest = tmp_path / "out"
    if kind == "dir":
        dest.mkdir()
        (dest / "mine.txt").write_text("user data")
    else:
        dest.write_text("user data")
    before = tree(tmp_path)
    filled = []
    with pytest.raises(FileExistsError) as refused:
        publish_dir(dest, filled.append)
    assert refused.value.filename == str(dest) and filled == []  # refused before filling
    assert tree(tmp_path) == before
    publish_dir(dest, two_files, replace=True)
    assert tree(tmp_path) == NEW  # the earlier one deleted, nothing left aside


def test_an_empty_dir_at_dest_is_taken(tmp_path):
    (tmp_path / "out").mkdir()
    publish_dir(tmp_path / "out", two_files)
    assert tree(tmp_path) == NEW


def test_a_dest_that_appears_while_filling_is_kept(tmp_path):
    dest = tmp_path / "out"

    def racing(into: Path) -> None:
        two_files(into)
        dest.mkdir()
        (dest / "theirs.txt").write_text("theirs")

    with pytest.raises(FileExistsError):
        publish_dir(dest, racing)
    assert tree(tmp_path) == {"out": None, "out/theirs.txt": "theirs"}


@pytest.mark.parametrize("target", ["dir", "missing"])
def test_a_symlink_at_dest_is_never_followed(tmp_path, target):
    victim = tmp_path / "victim"
    if target == "dir":
        victim.mkdir()
        (victim / "keep.txt").write_text("victim's")
    link = tmp_path / "out"
    link.symlink_to(victim)
    before = tree(tmp_path)
    with pytest.raises(FileExistsError):
        publish_dir(link, two_files)
    assert tree(tmp_path) == before
    publish_dir(link, two_files, replace=True)  # the link itself is replaced
    assert not link.is_symlink() and sorted(os.listdir(link)) == ["a.txt", "sub"]
    assert tree(victim) == ({"keep.txt": "victim's"} if target == "dir" else {})
    assert sorted(os.listdir(tmp_path)) == sorted(["out", *(["victim"] if target == "dir" else [])])


def test_a_failed_rename_puts_the_earlier_dir_back(tmp_path, monkeypatch):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "old.txt").write_text("earlier")
    real = os.replace

    def failing(src, dst):
        if Path(src).name.startswith(".tmp-"):
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="Input/output"):
        publish_dir(dest, two_files, replace=True)
    assert tree(tmp_path) == {"out": None, "out/old.txt": "earlier"}


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_the_published_dir_has_the_umask_s_mode(tmp_path, umask):
    previous = os.umask(umask)
    try:
        publish_dir(tmp_path / "out", two_files)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o777 & ~umask


def test_every_file_and_dir_is_fsynced_before_the_rename(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(f"fsync {os.readlink(f'/proc/self/fd/{fd}')}")
        real_fsync(fd)

    def rename(src, dst) -> None:
        events.append(f"rename {dst}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    publish_dir(tmp_path / "out", two_files)
    at = events.index(f"rename {tmp_path / 'out'}")
    synced = {Path(e.removeprefix("fsync ")).name for e in events[:at]}
    assert {"a.txt", "b.txt", "sub"} <= synced and any(".tmp-out-" in e for e in events[:at])
    assert events[at + 1 :] == [f"fsync {tmp_path}"]  # the parent, after


def test_a_process_killed_while_publishing_leaves_what_recovery_cleans(tmp_path):
    """A checkpoint's recovery (runs/checkpoint.recover) knows publish_dir's hidden names: a
    kill while filling leaves a temporary dir it deletes, a kill between the two renames of a
    replacement leaves the earlier dir aside, which it puts back."""
    root = tmp_path / "checkpoints"
    (root / "best").mkdir(parents=True)
    complete = ("policy.pt", "agent.pt", "trainer.pt", "config.json", "meta.json")
    for name in complete:
        (root / "best" / name).write_text("earlier")
    killed = """
import os, sys
from pathlib import Path
from border_py import publishing
root, when = Path(sys.argv[1]), sys.argv[2]
real = os.replace
def replace(src, dst):
    real(src, dst)
    if when == "between":
        os._exit(9)  # the earlier one moved aside, the new one not yet renamed
os.replace = replace
def fill(into):
    (into / "policy.pt").write_text("new")
    if when == "filling":
        os._exit(9)
publishing.publish_dir(root / "best", fill, replace=True)
"""
    for when in ("filling", "between"):
        run = subprocess.run([sys.executable, "-c", killed, str(root), when], check=False)
        assert run.returncode == 9
        left = sorted(p.name.split("-")[0] for p in root.iterdir() if p.name.startswith("."))
        assert left == ([".tmp"] if when == "filling" else [".old", ".tmp"])
        recover(root)
        assert sorted(os.listdir(root)) == ["best"]
        assert {p.name: p.read_text() for p in (root / "best").iterdir()} == dict.fromkeys(
            complete, "earlier"
        )


def test_a_checkpoint_replaces_a_link_at_its_name_never_its_target(tmp_path):
    """Through runs/checkpoint.save_checkpoint: a symlink planted at ``checkpoints/best`` is
    replaced by the new checkpoint; the dir it pointed at is untouched and nothing is left aside
    (the link moved aside used to stay behind as ``.old-best-<pid>``)."""
    root = tmp_path / "run" / "checkpoints"
    root.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("victim's")
    (root / "best").symlink_to(victim)
    save_checkpoint(
        root,
        "best",
        policy={"w": torch.zeros(2)},
        agent_state={},
        state=TrainerState(100, 0, 0, {}, {}, {}, {}),
        config={"seed": 0},
        meta={"opt_steps": 100},
    )
    assert os.listdir(root) == ["best"] and not (root / "best").is_symlink()
    assert {"policy.pt", "meta.json"} <= set(os.listdir(root / "best"))
    assert tree(victim) == {"keep.txt": "victim's"}
