"""Fixtures of the security tests: one tiny real run per test session, copied for each test."""

from __future__ import annotations

import pytest

from .crafted import copy_run, tiny_run, tree


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A tiny real serial run (see :data:`.crafted.TINY`), trained once per session and shared
    by every module: a test that writes copies it (:func:`run`). Its teardown, at the session's
    end, is an error if any test changed it."""
    run = tiny_run(tmp_path_factory.mktemp("trained"))
    before = tree(run)
    yield run
    assert tree(run) == before, "a test changed the shared tiny run: copy it (copy_run) first"


@pytest.fixture
def run(trained, tmp_path):
    """A copy of :func:`trained` of the test's own."""
    return copy_run(trained, tmp_path / "run")
