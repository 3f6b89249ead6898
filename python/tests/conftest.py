"""The fixtures: a workspace and a session in it.

The tests drive the binary ``cordon.find_binary()`` finds: the one installed with the package,
or ``$CORDON_BIN`` (a development build, ``target/debug/cordon``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import cordon

from .helpers import QUIET


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def session(workspace: Path) -> Iterator[cordon.Session]:
    """A session in ``workspace``, closed after the test."""
    with cordon.Session(workspace, **QUIET) as s:
        yield s
