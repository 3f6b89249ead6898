"""The binary the package runs, and ``python -m cordon``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import cordon


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
