"""`Session`: the synchronous face of :class:`~cordon.AsyncSession`.

Every synchronous session of a process runs on one event loop, on a thread of the package's
own, so a program (or a Ray task, or a thread pool) may hold hundreds of sessions without a
thread for each. A method hands its coroutine to that loop and waits for the answer.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from .aio import GRACE, AsyncSession, Edit, OnOutput
from .results import Permission, PermissionRequest, Result, Tool, Turn
from .settings import Options, StrPath

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

T = TypeVar("T")

#: Called with each permission request, on a thread of its own; returns the answer.
OnPermission = Callable[[PermissionRequest], "Permission | bool"]


class _Loop:
    """The event loop of this process's synchronous sessions, started on first use (again in
    a child after ``fork``, which does not inherit the thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="cordon-sessions", daemon=True
                )
                thread.start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop


_loop = _Loop()

#: The sessions open, closed at exit so that no command outlives the program.
_open: weakref.WeakSet[Session] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for session in list(_open):
        try:
            session.close()
        except Exception:
            pass


class Session:
    """A cordon session: a sandbox for one agent's tool calls.

    ``workspace`` is the directory the tools work in; the other settings are the options of
    ``cordon`` as keyword arguments (see :class:`cordon.settings.Options`). cordon starts in the
    constructor, which raises :class:`~cordon.StartError` with cordon's text when it cannot.
    ``on_permission`` answers permission requests (on a thread of its own) and turns
    ``permissions="ask"`` on. Use it as a context manager, which ends the session and
    everything it started, or call :meth:`close`::

        with cordon.Session("/path/to/project", allow_domains=["@pypi"]) as s:
            print(s.bash("pip download requests").output)

    Calls are served one at a time, in order, whichever thread makes them. :meth:`cancel`
    (from another thread) or Ctrl-C cancels the call running and kills its command's process
    tree.
    """

    def __init__(
        self,
        workspace: StrPath = ".",
        *,
        on_permission: OnPermission | None = None,
        **options: Unpack[Options],
    ) -> None:
        self._loop = _loop.get()
        self._session = AsyncSession(workspace, on_permission=_threaded(on_permission), **options)
        self._run(self._session.start())
        _open.add(self)

    @property
    def pid(self) -> int | None:
        """The process id of cordon."""
        return self._session.pid

    @property
    def args(self) -> list[str]:
        """The command line the session runs (the binary, its options, ``session``)."""
        return self._session.args

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._session.closed

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def call(
        self,
        tool: str,
        input: Mapping[str, Any] | None = None,
        *,
        on_output: OnOutput | None = None,
    ) -> Result:
        """Calls ``tool`` with ``input`` (see :meth:`AsyncSession.call`)."""
        return self._run(self._session.call(tool, input, on_output=on_output))

    def bash(
        self,
        command: str,
        timeout: int | None = None,
        *,
        on_output: OnOutput | None = None,
    ) -> Result:
        """Runs ``command`` in the sandbox (see :meth:`AsyncSession.bash`)."""
        return self._run(self._session.bash(command, timeout, on_output=on_output))

    def read_file(
        self, path: StrPath, start: int = 0, end: int = 0, *, numbered: bool = False
    ) -> Result:
        """Reads lines of a file (see :meth:`AsyncSession.read_file`)."""
        return self._run(self._session.read_file(path, start, end, numbered=numbered))

    def write_file(self, path: StrPath, content: str) -> Result:
        """Writes a whole file (see :meth:`AsyncSession.write_file`)."""
        return self._run(self._session.write_file(path, content))

    def edit_file(self, path: StrPath, edits: Sequence[Edit], *, dry_run: bool = False) -> Result:
        """Edits a file (see :meth:`AsyncSession.edit_file`)."""
        return self._run(self._session.edit_file(path, edits, dry_run=dry_run))

    def read_skill(self, name: str) -> Result:
        """Reads a skill (see :meth:`AsyncSession.read_skill`)."""
        return self._run(self._session.read_skill(name))

    def tools(self) -> list[Tool]:
        """The tools the session declares (see :meth:`AsyncSession.tools`)."""
        return self._run(self._session.tools())

    def end_turn(self) -> Turn:
        """Ends the turn and returns its counts (see :meth:`AsyncSession.end_turn`)."""
        return self._run(self._session.end_turn())

    def diff(self, *, stat: bool = False) -> str:
        """The layer's changes as a unified diff (see :meth:`AsyncSession.diff`)."""
        return self._run(self._session.diff(stat=stat))

    def checkpoint(self, label: str | None = None) -> str:
        """Checkpoints the layer; returns the label (see :meth:`AsyncSession.checkpoint`)."""
        return self._run(self._session.checkpoint(label))

    def checkpoints(self) -> list[str]:
        """The layer's checkpoints, oldest first (see :meth:`AsyncSession.checkpoints`)."""
        return self._run(self._session.checkpoints())

    def rollback(self, label: str) -> None:
        """Rolls the layer back to a checkpoint (see :meth:`AsyncSession.rollback`)."""
        self._run(self._session.rollback(label))

    def fork(self, name: str) -> str:
        """Forks the layer as ``name`` (see :meth:`AsyncSession.fork`)."""
        return self._run(self._session.fork(name))

    def accept(
        self,
        paths: Sequence[StrPath] = (),
        *,
        unprotect: Sequence[StrPath] = (),
    ) -> list[tuple[str, str]]:
        """Accepts the layer's changes into the workspace (see :meth:`AsyncSession.accept`)."""
        return self._run(self._session.accept(paths, unprotect=unprotect))

    def discard(self) -> None:
        """Drops the changes, and the layer at the end (see :meth:`AsyncSession.discard`)."""
        self._run(self._session.discard())

    def cancel(self) -> bool:
        """Cancels the call running (from another thread); see :meth:`AsyncSession.cancel`."""
        return self._run(self._session.cancel())

    def close(self) -> None:
        """Ends the session and everything it started (see :meth:`AsyncSession.close`)."""
        _open.discard(self)
        self._run(self._session.close())

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        """Runs ``work`` on the sessions' loop and waits for it. Ctrl-C cancels the call and
        waits until its processes are gone before it goes on."""
        future = asyncio.run_coroutine_threadsafe(work, self._loop)
        try:
            # In short waits: a wait without a timeout would not see Ctrl-C until it ended.
            while True:
                try:
                    return future.result(timeout=0.25)
                except concurrent.futures.TimeoutError:
                    continue
        except KeyboardInterrupt:
            stop = asyncio.run_coroutine_threadsafe(self._session.cancel(), self._loop)
            stop.result(GRACE * 2)
            raise


def _threaded(
    answer: OnPermission | None,
) -> Callable[[PermissionRequest], Coroutine[Any, Any, Permission | bool]] | None:
    """``answer`` run on a thread, so that a person's slow answer stalls no other session."""
    if answer is None:
        return None

    async def asked(request: PermissionRequest) -> Permission | bool:
        return await asyncio.to_thread(answer, request)

    return asked
