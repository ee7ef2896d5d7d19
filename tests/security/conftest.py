"""Fixtures of the security tests: one tiny real run per module, copied for each test."""

from __future__ import annotations

import pytest

from .crafted import copy_run, tiny_run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny real serial run (see :data:`.crafted.TINY`), trained once per module."""
    return tiny_run(tmp_path_factory.mktemp("trained"))


@pytest.fixture
def run(trained, tmp_path):
    """A copy of :func:`trained` of the test's own."""
    return copy_run(trained, tmp_path / "run")
