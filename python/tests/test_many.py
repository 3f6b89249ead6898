"""Many sandboxes from one program: 100 sessions open at once, each running a command and
editing a file, then all ended with nothing of theirs left running."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cordon
from cordon import procs

from .helpers import QUIET

SESSIONS = 100


def test_a_hundred_sessions_from_one_process(tmp_path: Path) -> None:
    cordon.Session(tmp_path, **QUIET).close()  # the sessions' event loop runs from now on
    fds = len(os.listdir("/proc/self/fd"))
    workspaces = [tmp_path / f"ws{n}" for n in range(SESSIONS)]
    for path in workspaces:
        path.mkdir()

    def open_and_use(path: Path) -> tuple[cordon.Session, cordon.Result, cordon.Result]:
        s = cordon.Session(path, **QUIET)
        return (
            s,
            s.bash(f"echo {path.name} > out.txt; cat out.txt"),
            s.write_file("f.txt", path.name),
        )

    with ThreadPoolExecutor(max_workers=16) as pool:
        opened = list(pool.map(open_and_use, workspaces))
    sessions = [s for s, _, _ in opened]
    assert len({s.pid for s in sessions}) == SESSIONS  # all open at once, each its own cordon
    for path, (_, command, written) in zip(workspaces, opened, strict=True):
        assert command.output == f"{path.name}\n" and command.exit_code == 0
        assert written.output.startswith("Created f.txt (1 line)")
        assert (path / "f.txt").read_text() == path.name
    trees = set().union(*(procs.tree(s.pid) for s in sessions if s.pid is not None))
    assert len(trees) >= 2 * SESSIONS  # each cordon and its sandbox helper at least

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(cordon.Session.close, sessions))
    assert procs.alive(trees) == set()
    assert len(os.listdir("/proc/self/fd")) <= fds
