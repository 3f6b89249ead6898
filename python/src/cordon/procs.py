"""The processes of a session, read from ``/proc``: a cancelled call returns once its
command's processes are gone (cordon answers at once and kills them just after), and closing a
session returns once every process of its tree is (killing what is left after a grace time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

#: A process, told from a later one with the same id by its start time.
Process = tuple[int, int]


def tree(root: int) -> set[Process]:
    """``root`` and its descendants, as they are now."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[2] != "Z":
                children.setdefault(stat[0], []).append(int(entry.name))
                starts[int(entry.name)] = stat[1]
    found: set[Process] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in starts:
            found.add((pid, starts[pid]))
            todo.extend(children.get(pid, ()))
    return found


def commands(root: int) -> set[Process]:
    """The processes under ``root`` (a cordon) that are not cordon's own helpers (whose first
    argument is ``__sandbox``, the sandbox's ``SANDBOX_ARG``): its commands."""
    found = set()
    for pid, start in tree(root):
        if pid != root and _args(pid)[1:2] != [b"__sandbox"]:
            found.add((pid, start))
    return found


def alive(processes: set[Process]) -> set[Process]:
    """Those of ``processes`` that still run (zombies count as gone)."""
    return {(pid, start) for pid, start in processes if _running(pid, start)}


async def end(processes: set[Process], grace: float) -> None:
    """Waits up to ``grace`` seconds for ``processes`` to end, then kills those left."""
    deadline = time.monotonic() + grace
    while alive(processes):
        if time.monotonic() > deadline:
            for pid, _ in alive(processes):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return
        await asyncio.sleep(0.01)


def started(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks after boot), or ``None`` when it is gone."""
    stat = _stat(pid)
    return stat[1] if stat is not None else None


def _running(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == start and stat[2] != "Z"


def _args(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().split(b"\0")
    except OSError:
        return []


def _stat(pid: int) -> tuple[int, int, str] | None:
    """The parent, start time and state of ``pid``."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        text = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name, in parentheses, may hold spaces and parentheses: split after it.
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[19]), fields[0].decode()
