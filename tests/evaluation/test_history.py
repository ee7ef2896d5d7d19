"""evaluation/history.py: ``evaluations.npz`` in Stable-Baselines3's EvalCallback layout (RL Zoo's
plot scripts read it), written at every evaluation, read back on a resume as data only."""

from __future__ import annotations

import io
import logging
import os
import zipfile

import numpy as np
import pytest

from border_py.evaluation.history import Evaluations, read_evaluations


def _three() -> Evaluations:
    evaluations = Evaluations()
    evaluations.append(100, [1.0, 2.0], [3, 4])
    evaluations.append(250, [5.5, 6.5], [7, 8])
    evaluations.append(400, [9.0, 10.0], [11, 12])
    return evaluations


def test_the_file_has_sb3s_keys_dtypes_and_shapes(tmp_path):
    path = tmp_path / "evaluations.npz"
    _three().write(path)
    with np.load(path) as data:  # as a user's notebook or rl_zoo3.plots.all_plots loads it
        assert sorted(data.files) == ["ep_lengths", "results", "timesteps"]
        assert data["timesteps"].dtype == np.int64 and data["timesteps"].tolist() == [100, 250, 400]
        assert data["results"].dtype == np.float64 and data["results"].shape == (3, 2)
        assert data["ep_lengths"].dtype == np.int64 and data["ep_lengths"].shape == (3, 2)
        np.testing.assert_array_equal(data["results"].mean(axis=1), [1.5, 6.0, 9.5])
    assert oct(path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_rows_of_fewer_episodes_are_padded_with_nan_and_zero_steps(tmp_path):
    evaluations = Evaluations()
    evaluations.append(10, [1.0, 3.0, 5.0], [2, 2, 2])
    evaluations.append(20, [4.0], [9])
    arrays = evaluations.arrays()
    np.testing.assert_array_equal(arrays["results"][1], [4.0, np.nan, np.nan])
    assert arrays["ep_lengths"][1].tolist() == [9, 0, 0]
    assert np.nanmean(arrays["results"], axis=1).tolist() == [3.0, 4.0]
    path = tmp_path / "evaluations.npz"
    evaluations.write(path)
    back = read_evaluations(path, 2)  # the padding is not read back as episodes
    assert back.results == [[1.0, 3.0, 5.0], [4.0]] and back.lengths == [[2, 2, 2], [9]]


def test_a_resume_keeps_the_evaluations_its_checkpoint_counts_and_drops_the_later_ones(tmp_path):
    path = tmp_path / "evaluations.npz"
    _three().write(path)
    kept = read_evaluations(path, 2)  # the checkpoint was written after the second
    assert kept.timesteps == [100, 250] and kept.results == [[1.0, 2.0], [5.5, 6.5]]
    kept.append(300, [0.0, 1.0], [1, 1])
    kept.write(path)
    with np.load(path) as data:
        assert data["timesteps"].tolist() == [100, 250, 300]  # none lost, none repeated


def test_a_file_with_fewer_rows_than_the_checkpoint_counts_is_kept_with_a_warning(tmp_path, caplog):
    path = tmp_path / "evaluations.npz"
    _three().write(path)
    with caplog.at_level(logging.WARNING):
        kept = read_evaluations(path, 5)
    assert len(kept) == 3 and "holds 3 of the 5 evaluations" in caplog.text
    assert len(read_evaluations(tmp_path / "missing.npz", 4)) == 0  # a run of an earlier version


def _pickled(path):
    np.savez(
        path,
        timesteps=np.array([1]),
        results=np.array([[object()]], dtype=object),
        ep_lengths=np.array([[1]]),
    )


def _compressed(path):
    np.savez_compressed(path, **_three().arrays())


def _huge(path):
    path.write_bytes(b"\0" * (2 * 160_008 + 4096 + 1))  # more than 2 evaluations can take


def _shapes(path):
    np.savez(
        path, timesteps=np.array([1, 2]), results=np.zeros((2, 3)), ep_lengths=np.zeros((2, 2), int)
    )


def _declares_terabytes(path):
    """A small stored archive whose ``timesteps.npy`` header declares 10**13 int64 (73 TiB):
    numpy allocates what a header says before it reads the data."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i8", "fortran_order": False, "shape": (10**13,)}
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("timesteps.npy", header.getvalue())  # the magic, the header, no data
        for key, value in (("results", np.zeros((1, 1))), ("ep_lengths", np.zeros((1, 1), int))):
            member = io.BytesIO()
            np.save(member, value)
            archive.writestr(f"{key}.npy", member.getvalue())


@pytest.mark.parametrize("plant", [_pickled, _compressed, _huge, _shapes, _declares_terabytes])
def test_an_unreadable_or_crafted_file_is_not_loaded_and_the_run_goes_on(tmp_path, caplog, plant):
    path = tmp_path / "evaluations.npz"
    plant(path)
    with caplog.at_level(logging.WARNING):
        kept = read_evaluations(path, 2)
    assert len(kept) == 0
    assert "unreadable" in caplog.text and "written anew" in caplog.text


def test_a_link_is_neither_read_nor_written_through(tmp_path, caplog):
    target = tmp_path / "elsewhere.npz"
    _three().write(target)
    before = target.read_bytes()
    link = tmp_path / "evaluations.npz"
    link.symlink_to(target)
    with caplog.at_level(logging.WARNING):
        assert len(read_evaluations(link, 3)) == 0
    assert "unreadable" in caplog.text
    Evaluations().write(link)  # replaces the link, never writes its target
    assert not link.is_symlink() and target.read_bytes() == before


def test_no_pickle_is_ever_written(tmp_path):
    path = tmp_path / "evaluations.npz"
    _three().write(path)
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            header = io.BytesIO(archive.read(name))
            np.lib.format.read_magic(header)
            assert "'O'" not in str(np.lib.format.read_array_header_1_0(header))
