"""The binary the package runs, and ``python -m cordon``."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import cordon
from cordon import settings


def test_the_binary_is_found_and_runs() -> None:
    binary = cordon.find_binary()
    assert os.access(binary, os.X_OK)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("cordon ")


def test_cordon_bin_names_another_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    binary = cordon.find_binary()
    monkeypatch.setenv("CORDON_BIN", binary)
    assert cordon.find_binary() == binary


def test_python_m_cordon_runs_the_binary() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cordon", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("cordon ")
    assert "plugin contract: cordon:tool" in out.stdout


def test_every_option_of_cordon_is_a_setting() -> None:
    shown = subprocess.run(
        [cordon.find_binary(), "--help"], capture_output=True, text=True, check=True
    ).stdout
    options = set(re.findall(r"(--[a-z][a-z-]+)", shown))
    # Not a session's setting: the package passes --workspace itself, and --http is `mcp`'s.
    options -= {"--help", "--version", "--workspace", "--http"}
    written = {"--no-edit-tools", "--sandbox-allow-missing", "--bash-env", "--add-host"}
    for table in (settings._FLAGS, settings._SINGLE, settings._REPEATED):
        written |= set(table.values())
    assert options - written == set(), "options of cordon --help no setting writes"
