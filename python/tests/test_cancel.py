"""Cancellation: a cancelled call's command and everything it started are gone when the call
raises, and the session goes on."""

from __future__ import annotations

import _thread
import asyncio
import threading
import time
from pathlib import Path

import pytest

import cordon
from cordon import procs

from .helpers import QUIET, marker_sleep, running, wait_running


def test_cancel_from_another_thread_kills_the_command(session: cordon.Session) -> None:
    command = marker_sleep()

    def cancel() -> None:
        wait_running(command)
        assert session.cancel()

    threading.Thread(target=cancel).start()
    started = time.monotonic()
    with pytest.raises(cordon.CallCancelledError):
        session.bash(command)
    assert time.monotonic() - started < 10
    assert running(command) == []
    assert session.bash("echo after").output == "after\n"
    assert not session.cancel()  # nothing runs


def test_cancelling_a_task_kills_the_command(workspace: Path) -> None:
    command = marker_sleep()

    async def main() -> None:
        async with cordon.AsyncSession(workspace, **QUIET) as s:
            task = asyncio.ensure_future(s.bash(command))
            await asyncio.to_thread(wait_running, command)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert running(command) == []
            assert (await s.bash("echo after")).output == "after\n"

    asyncio.run(main())


def test_a_python_timeout_kills_the_command(workspace: Path) -> None:
    command = marker_sleep()

    async def main() -> None:
        async with cordon.AsyncSession(workspace, **QUIET) as s:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(s.bash(command), 1)
            assert running(command) == []

    asyncio.run(main())


def test_ctrl_c_cancels_the_call_and_goes_on_as_keyboard_interrupt(session: cordon.Session) -> None:
    command = marker_sleep()

    def interrupt() -> None:
        wait_running(command)
        _thread.interrupt_main()

    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        session.bash(command)
    assert running(command) == []
    assert session.bash("echo after").output == "after\n"


def test_a_call_waiting_for_permission_can_be_cancelled(workspace: Path) -> None:
    asked = threading.Event()
    release = threading.Event()

    def slow(request: cordon.PermissionRequest) -> cordon.Permission:
        asked.set()
        release.wait(10)
        return "allow_once"

    with cordon.Session(workspace, on_permission=slow, **QUIET) as s:
        threading.Thread(target=lambda: asked.wait(10) and s.cancel()).start()
        with pytest.raises(cordon.CallCancelledError):
            s.write_file("a.txt", "a\n")
        release.set()
    assert not (workspace / "a.txt").exists()


def test_closing_ends_the_call_running_and_every_process_of_the_session(workspace: Path) -> None:
    command = marker_sleep()
    s = cordon.Session(workspace, **QUIET)
    assert s.pid is not None
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            s.bash(command)
        except BaseException as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    wait_running(command)
    tree = procs.tree(s.pid)
    assert len(tree) >= 3  # cordon, its sandbox helper, the command
    s.close()
    caller.join(10)
    assert isinstance(outcome[0], cordon.CallCancelledError)
    assert procs.alive(tree) == set()
    with pytest.raises(cordon.SessionClosedError):
        s.bash("true")
