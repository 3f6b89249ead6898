"""The README's Python example, run as it is written, prints what its comment says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_example_runs(workspace: Path, tmp_path: Path) -> None:
    text = README.read_text().split("For Python, `pip install ./python`", 1)[1]
    script = text.split("```python\n", 1)[1].split("\n```", 1)[0]
    # The session's home (kept per workspace) goes under the test's directory.
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=workspace, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "3 hello, world\n[exit code: exit status 3]\n"
    assert (workspace / "hello.py").read_text() == "print('hello, world')\n"
