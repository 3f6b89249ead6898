"""Helpers of the tests: the settings every session gets, and a look at the processes running."""

from __future__ import annotations

import os
import random
import time
from typing import Literal, TypedDict

from cordon import procs


class Quiet(TypedDict):
    bash_home: Literal["private"]
    log_level: Literal["warn"]


#: Settings every test session gets: a private home (no test leaves a home of its own under
#: ~/.local/share/cordon) and only cordon's warnings.
QUIET: Quiet = {"bash_home": "private", "log_level": "warn"}


def marker_sleep() -> str:
    """A ``sleep`` command whose argument no other process on the machine has."""
    return f"sleep 30.{random.randrange(10**8):08d}"


def running(command: str) -> list[int]:
    """The processes whose command line is ``command`` (split at spaces)."""
    wanted = command.encode().split(b" ")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                args = file.read().split(b"\0")[:-1]
        except OSError:
            continue
        if args == wanted and procs.alive({(int(entry), procs.started(int(entry)) or 0)}):
            found.append(int(entry))
    return found


def wait_running(command: str, timeout: float = 10.0) -> list[int]:
    """The processes of ``command``, once there are some."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = running(command)
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"{command!r} did not start within {timeout}s")
