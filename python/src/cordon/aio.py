"""`AsyncSession`: one ``cordon session`` process, driven over its JSON-lines protocol.

This is the package's one client of the protocol (docs/session.md); the synchronous
:class:`~cordon.Session` runs it on the package's event-loop thread. cordon serves calls one at
a time, so a session sends one request and reads the lines that answer it (streamed output,
permission requests, then the response) before it sends the next; concurrent callers wait their
turn.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from . import procs, settings
from .binary import find_binary
from .errors import (
    BinaryNotFoundError,
    CallCancelledError,
    LayerError,
    ProtocolError,
    SessionClosedError,
    SessionDiedError,
    StartError,
)
from .results import PERMISSIONS, Permission, PermissionRequest, Result, Tool, Turn
from .settings import Options, StrPath

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

log = logging.getLogger("cordon")

#: The answer to a permission request: an option id, or ``True`` (allow once) / ``False``
#: (reject once), or an awaitable of one.
Answer = Permission | bool

#: Called with each permission request; returns (or awaits to) the answer.
OnPermission = Callable[[PermissionRequest], "Answer | Awaitable[Answer]"]

#: Called with each line a command prints while it runs (may be a coroutine function).
OnOutput = Callable[[str], object]

#: An edit for ``edit_file``: ``(old, new)`` or ``{"old": …, "new": …}``.
Edit = tuple[str, str] | Mapping[str, str]

#: The longest line read from cordon (a response echoes a call's input, up to 64 MiB of it,
#: in its ACP view, and a diff may hold a file twice).
LINE_LIMIT = 1 << 30

#: How much of cordon's standard error is kept for the text of an error.
STDERR_KEPT = 64 << 10

#: Seconds cordon has to end a cancelled call, or to exit once its input is closed, before it
#: is killed (which kills everything it started, too).
GRACE = 10.0


#: A line of cordon's, or ``None`` for the end of its output.
Line = dict[str, Any] | None


@dataclass
class _Call:
    """The request being answered, and what its lines are routed to."""

    id: int
    lines: asyncio.Queue[Line] = field(default_factory=asyncio.Queue)
    cancelling: bool = False
    #: The processes of its commands when it was cancelled, to see gone.
    doomed: set[procs.Process] = field(default_factory=set)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class AsyncSession:
    """A cordon session for ``asyncio`` code: a sandbox for one agent's tool calls.

    ``workspace`` is the directory the tools work in; the other settings are the options of
    ``cordon`` as keyword arguments (see :class:`cordon.settings.Options`). ``on_permission``
    answers permission requests and turns ``permissions="ask"`` on. Use it as an async context
    manager, which starts the session and ends it (and everything it started), or call
    :meth:`start` and :meth:`close`::

        async with cordon.AsyncSession("/path/to/project", allow_domains=["@pypi"]) as s:
            result = await s.bash("pip download requests")
            print(result.output, result.exit_code)

    Calls are served one at a time, in order; a call's task may be cancelled (its command's
    whole process tree is killed before the cancellation completes).
    """

    def __init__(
        self,
        workspace: StrPath = ".",
        *,
        on_permission: OnPermission | None = None,
        **options: Unpack[Options],
    ) -> None:
        settings.check(options)
        mode = options.get("permissions")
        if on_permission is not None and mode not in (None, "ask"):
            raise StartError(
                f'on_permission is given but permissions is "{mode}", so nothing would be asked: '
                'leave permissions out, or set it to "ask"'
            )
        if on_permission is None and mode == "ask":
            raise StartError(
                'permissions="ask" needs on_permission, a function that answers each request; '
                "without one every call that needs permission would be refused"
            )
        if on_permission is not None:
            options["permissions"] = "ask"
        binary = options.get("binary")
        self._binary = os.fspath(binary) if binary is not None else find_binary()
        self._args = settings.args(workspace, options)
        env = options.get("env")
        self._env = dict(env) if env is not None else None
        self._on_permission = on_permission
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._call: _Call | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stderr: collections.deque[str] = collections.deque()
        self._stderr_size = 0
        self._closed = False
        self._eof = False

    @property
    def args(self) -> list[str]:
        """The command line the session runs (the binary, its options, ``session``)."""
        return [self._binary, *self._args, "session"]

    @property
    def pid(self) -> int | None:
        """The process id of cordon, once started."""
        return self._process.pid if self._process else None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> Self:
        """Starts cordon and waits until it serves; raises :class:`StartError` with cordon's
        text when it cannot (a bad setting, an unusable workspace). Calls start a session that
        was not started; starting one twice does nothing."""
        async with self._lock:
            await self._start()
        return self

    async def _start(self) -> None:
        if self._closed:
            raise SessionClosedError("the session is closed; start a new one")
        if self._process is not None:
            return
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
                limit=LINE_LIMIT,
                # Ctrl-C reaches this program, which cancels the call; not cordon directly.
                start_new_session=True,
            )
        except OSError as error:
            raise BinaryNotFoundError(f"cannot run {self._binary}: {error}") from error
        self._tasks = [
            asyncio.ensure_future(self._read()),
            asyncio.ensure_future(self._read_stderr()),
        ]
        try:
            # The first answer says cordon serves: its settings were good and its plugins
            # loaded. At the start of a session the turn's counts are all zero anyway.
            await self._exchange({"end_turn": True})
        except SessionDiedError as died:
            await self._reap()
            raise StartError(
                f"cordon could not start a session: {died.text or died}",
                died.text,
                died.returncode,
            ) from None

    async def call(
        self,
        tool: str,
        input: Mapping[str, Any] | None = None,
        *,
        on_output: OnOutput | None = None,
    ) -> Result:
        """Calls ``tool`` with ``input`` (a JSON object), as a model would. ``on_output`` gets
        each line the call's commands print while it runs."""
        request: dict[str, Any] = {"tool": tool, "input": dict(input or {})}
        if on_output is not None:
            request["stream"] = True
        return Result.read(tool, await self._request(request, on_output))

    async def bash(
        self,
        command: str,
        timeout: int | None = None,
        *,
        on_output: OnOutput | None = None,
    ) -> Result:
        """Runs ``command`` with ``bash -c`` in the sandbox. ``timeout`` (seconds) is the
        command's own, up to the session's ``max_timeout``; when it passes, the command's
        whole process tree is killed and the result says so (``exit.timeout``)."""
        input: dict[str, Any] = {"command": command}
        if timeout is not None:
            input["timeout"] = timeout
        return await self.call("bash", input, on_output=on_output)

    async def read_file(
        self, path: StrPath, start: int = 0, end: int = 0, *, numbered: bool = False
    ) -> Result:
        """Reads lines ``start``..``end`` (1-based, inclusive; 0 is the first / the last) of
        the file at ``path``, relative to the workspace."""
        input = {"path": os.fspath(path), "start": start, "end": end, "numbered": numbered}
        return await self.call("read_file", input)

    async def write_file(self, path: StrPath, content: str) -> Result:
        """Writes ``content`` as the whole of the file at ``path`` (creating its directories);
        the output is a headline and the diff."""
        return await self.call("write_file", {"path": os.fspath(path), "content": content})

    async def edit_file(
        self, path: StrPath, edits: Sequence[Edit], *, dry_run: bool = False
    ) -> Result:
        """Replaces, in the file at ``path``, each edit's ``old`` text (which must occur once)
        with its ``new`` text, all located in the original file; nothing is written unless all
        apply. ``dry_run`` reports the change and writes nothing."""
        items = [
            {"old": edit[0], "new": edit[1]} if isinstance(edit, tuple) else dict(edit)
            for edit in edits
        ]
        input = {"path": os.fspath(path), "edits": items, "dry_run": dry_run}
        return await self.call("edit_file", input)

    async def read_skill(self, name: str) -> Result:
        """The text of the skill ``name`` of the session's ``skills`` directory."""
        return await self.call("read_skill", {"name": name})

    async def tools(self) -> list[Tool]:
        """The tools the session declares, with the descriptions and input schemas to give a
        model (``cordon tools --json`` with the session's settings)."""
        process = await asyncio.create_subprocess_exec(
            *self.args[:-1],
            "tools",
            "--json",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env,
        )
        out, err = await process.communicate()
        if process.returncode != 0:
            text = err.decode(errors="replace").strip()
            raise StartError(f"cordon could not list its tools: {text}", text, process.returncode)
        return [Tool.read(item) for item in json.loads(out)]

    async def end_turn(self) -> Turn:
        """Ends the turn: what it counted (commands, file ops, skills); the counts restart."""
        line = await self._layer({"end_turn": True})
        return Turn(
            counters=dict(line["counters"]),
            display=line.get("display", ""),
            checkpoint=line.get("checkpoint"),
        )

    async def diff(self, *, stat: bool = False) -> str:
        """The changes the session's ``layer`` holds against the workspace, as a unified diff
        that ``git apply`` takes (``stat``: a summary of them). :class:`LayerError` without a
        layer."""
        return str((await self._layer({"layer": "diff", "stat": stat}))["diff"])

    async def checkpoint(self, label: str | None = None) -> str:
        """Freezes the layer's state as a checkpoint named ``label`` (cordon names it when
        none is given), to :meth:`rollback` to later; returns its label."""
        request: dict[str, Any] = {"layer": "checkpoint"}
        if label is not None:
            request["label"] = label
        return str((await self._layer(request))["checkpoint"])

    async def checkpoints(self) -> list[str]:
        """The labels of the layer's checkpoints, oldest first (each ``end_turn`` takes one)."""
        return [
            str(label) for label in (await self._layer({"layer": "checkpoints"}))["checkpoints"]
        ]

    async def rollback(self, label: str) -> None:
        """Brings the layer back to the checkpoint ``label``, byte for byte: what was changed
        since is gone, for the commands and file tools that follow."""
        await self._layer({"layer": "rollback", "label": label})

    async def fork(self, name: str) -> str:
        """Makes the layer ``name``, which starts from this layer's state and shares everything
        unchanged; a session with ``layer=name`` then goes on from there, apart from this one.
        Returns its name."""
        return str((await self._layer({"layer": "fork", "name": name}))["fork"])

    async def accept(
        self,
        paths: Sequence[StrPath] = (),
        *,
        unprotect: Sequence[StrPath] = (),
    ) -> list[tuple[str, str]]:
        """Copies the layer's changes at or below ``paths`` (all when none) into the real
        workspace, each file atomically, between two calls; returns what it took as
        ``(kind, path)`` pairs, ``kind`` one of ``added``, ``modified``, ``deleted`` (a name
        that is not UTF-8 as :func:`os.fsdecode` gives it). A change to
        a protected path (git hooks, ``.envrc``, …) refuses the whole accept with a
        :class:`LayerError`, unless ``unprotect`` (or the session's own) names it."""
        request: dict[str, Any] = {
            "layer": "accept",
            "paths": [os.fspath(p) for p in paths],
            "unprotect": [os.fspath(p) for p in unprotect],
        }
        accepted = (await self._layer(request))["accepted"]
        return [(str(change["kind"]), _path(change["path"])) for change in accepted]

    async def discard(self) -> None:
        """Drops every change and checkpoint of the layer at once; the session goes on over
        the workspace as it is, and the layer is removed when the session ends."""
        await self._layer({"layer": "discard"})

    async def _layer(self, request: dict[str, Any]) -> dict[str, Any]:
        """Sends a request that may touch the layer: a refusal is a :class:`LayerError`."""
        try:
            return await self._request(request, None)
        except ProtocolError as refused:
            raise LayerError(
                f"cordon refused the layer operation: {refused.text}", refused.text
            ) from None

    async def cancel(self) -> bool:
        """Cancels the call running, if any: its command's whole process tree is killed, an
        edit that had not written writes nothing, and the call raises
        :class:`CallCancelledError`. Returns once the call has ended (it may have completed
        first), ``False`` when no call was running."""
        call = self._call
        if call is None:
            return False
        await self._cancel(call)
        await call.ended.wait()
        return True

    async def close(self) -> None:
        """Ends the session: cancels the call running, closes cordon's input (which ends it)
        and waits until cordon and every process it started are gone (killing them after
        :data:`GRACE` seconds). Calls after it raise :class:`SessionClosedError`."""
        if self._closed:
            return
        self._closed = True
        if self._process is None:
            return
        await self.cancel()
        async with self._lock:
            await self._reap()

    async def _reap(self) -> None:
        """Closes cordon's input and waits until it and every process of its tree have ended
        (its helpers end with it, an idle command's init a moment after); kills what is left
        after :data:`GRACE` seconds."""
        process = self._process
        if process is None:
            return
        tree = await asyncio.to_thread(procs.tree, process.pid)
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), GRACE)
        except asyncio.TimeoutError:
            log.warning("cordon %d did not end within %ss; killing it", process.pid, GRACE)
            process.kill()
            await process.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await procs.end(tree, GRACE)

    async def _request(self, request: dict[str, Any], on_output: OnOutput | None) -> dict[str, Any]:
        async with self._lock:
            if self._closed:
                raise SessionClosedError("the session is closed; start a new one")
            await self._start()
            return await self._exchange(request, on_output)

    async def _exchange(
        self, request: dict[str, Any], on_output: OnOutput | None = None
    ) -> dict[str, Any]:
        """Sends ``request`` and reads the lines that answer it (the caller holds the lock)."""
        call = _Call(next(self._ids))
        self._call = call
        # An exception of a callback, raised once the call has ended.
        failure: Exception | None = None
        # The next line, read on while a permission request is decided: a cancel ends the
        # question before it is answered.
        reading = asyncio.ensure_future(call.lines.get())
        deciding: asyncio.Future[tuple[Permission, Exception | None]] | None = None
        try:
            if self._eof:
                raise await self._died()
            await self._send({**request, "id": call.id})
            while True:
                waits: list[asyncio.Future[Any]] = [reading]
                if deciding is not None:
                    waits.append(deciding)
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if deciding is not None and deciding.done():
                    answer, problem = deciding.result()
                    deciding = None
                    failure = failure or problem
                    if not call.cancelling:
                        await self._send({"permission": answer})
                if not reading.done():
                    continue
                line = reading.result()
                reading = asyncio.ensure_future(call.lines.get())
                if line is None:
                    raise await self._died()
                if "output_lines" in line:
                    if on_output is None or failure is not None:
                        continue
                    try:
                        for text in line["output_lines"]:
                            printed = on_output(text)
                            if inspect.isawaitable(printed):
                                await printed
                    except Exception as error:
                        failure = error
                elif "permission_request" in line:
                    asked = PermissionRequest.read(line)
                    deciding = asyncio.ensure_future(self._decide(asked))
                elif line.get("status") == "cancelled":
                    await procs.end(call.doomed, GRACE)
                    raise CallCancelledError(
                        "the call was cancelled: its command's process tree was killed"
                    )
                elif "error" in line and "status" not in line:
                    raise ProtocolError(
                        f"cordon refused the request: {line['error']}", line["error"]
                    )
                else:
                    if failure is not None:
                        raise failure
                    return line
        except asyncio.CancelledError:
            # The task was cancelled: cordon ends the call (and its processes) before the
            # cancellation goes on, and the next request is not read as this one's answer.
            ending = asyncio.ensure_future(self._abandon(call, reading))
            while not ending.done():
                try:
                    await asyncio.shield(ending)
                except asyncio.CancelledError:
                    continue
            raise
        finally:
            reading.cancel()
            if deciding is not None:
                deciding.cancel()
            self._call = None
            call.ended.set()

    async def _decide(self, request: PermissionRequest) -> tuple[Permission, Exception | None]:
        """The answer of ``on_permission`` to ``request``; a callback that fails or answers
        something else refuses the call (fail closed), and its error is raised after it."""
        if self._on_permission is None:
            return "reject_once", None
        try:
            answer = self._on_permission(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as error:
            return "reject_once", error
        if answer is True:
            return "allow_once", None
        if answer is False:
            return "reject_once", None
        if answer in PERMISSIONS:
            return answer, None
        return "reject_once", ValueError(
            f"on_permission answered {answer!r}; answer one of {', '.join(PERMISSIONS)}, "
            "True or False (the call was refused)"
        )

    async def _cancel(self, call: _Call) -> None:
        if call.cancelling or self._call is not call or self._process is None:
            return
        call.cancelling = True
        # cordon answers at once and its helper kills the tree just after: what runs now is
        # what the cancelled call waits to see gone.
        call.doomed = await asyncio.to_thread(procs.commands, self._process.pid)
        # An id of its own: the error answering a cancel that came too late is dropped.
        await self._send({"id": f"cancel-{call.id}", "cancel": call.id})

    async def _abandon(self, call: _Call, reading: asyncio.Future[Line]) -> None:
        """Cancels ``call`` and reads its lines (``reading`` is the next) until its end; kills
        cordon when it does not end the call in time (the session is then over)."""
        try:
            await self._cancel(call)
            await asyncio.wait_for(_drain(call, reading), GRACE)
            await procs.end(call.doomed, GRACE)
        except (asyncio.TimeoutError, SessionDiedError):
            if self._process is not None and self._process.returncode is None:
                log.warning("cordon did not end a cancelled call within %ss; killing it", GRACE)
                self._process.kill()

    async def _send(self, message: Mapping[str, Any]) -> None:
        process = self._process
        if process is None or process.stdin is None:
            raise SessionClosedError("the session is not started")
        line = json.dumps(message, ensure_ascii=False) + "\n"
        try:
            process.stdin.write(line.encode())
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise await self._died() from None

    async def _died(self) -> SessionDiedError:
        """The error for a cordon that ended under the session, with what it printed."""
        process = self._process
        returncode = None
        if process is not None:
            try:
                returncode = await asyncio.wait_for(process.wait(), GRACE)
            except asyncio.TimeoutError:
                pass
            await asyncio.gather(*self._tasks[1:], return_exceptions=True)
        text = "".join(self._stderr).strip()
        how = _how(returncode)
        return SessionDiedError(
            f"the cordon session ended {how}" + (f": {text}" if text else ""), text, returncode
        )

    async def _read(self) -> None:
        """Routes cordon's lines to the call they answer."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        while True:
            raw = await stdout.readline()
            if not raw:
                break
            try:
                line = json.loads(raw)
            except ValueError:
                log.warning("cordon wrote a line that is not JSON: %r", raw[:200])
                continue
            call = self._call
            id = line.get("id")
            if isinstance(id, str) and id.startswith("cancel-"):
                continue  # a cancel that came after its call had ended
            if call is not None and (id == call.id or (id is None and "error" in line)):
                call.lines.put_nowait(line)
            else:
                log.warning(
                    "cordon wrote a line no request waits for: %.200s", raw.decode(errors="replace")
                )
        self._eof = True
        if self._call is not None:
            self._call.lines.put_nowait(None)

    async def _read_stderr(self) -> None:
        """Logs cordon's standard error on the ``cordon`` logger and keeps its end."""
        assert self._process is not None and self._process.stderr is not None
        stderr = self._process.stderr
        while True:
            raw = await stderr.readline()
            if not raw:
                return
            text = raw.decode(errors="replace")
            self._stderr.append(text)
            self._stderr_size += len(text)
            while self._stderr_size > STDERR_KEPT and len(self._stderr) > 1:
                self._stderr_size -= len(self._stderr.popleft())
            log.log(_level(text), "%s", text.rstrip("\n"))


async def _drain(call: _Call, reading: asyncio.Future[Line]) -> None:
    """Reads ``call``'s lines, from ``reading`` on, until its end (or cordon's)."""
    line = await reading
    while not (line is None or "status" in line or "counters" in line or "error" in line):
        line = await call.lines.get()


def _level(text: str) -> int:
    """The logging level of a line cordon logged (tracing's format names its level early)."""
    head = text[:48]
    for word, level in (
        ("ERROR", logging.ERROR),
        ("WARN", logging.WARNING),
        ("INFO", logging.INFO),
        ("DEBUG", logging.DEBUG),
        ("TRACE", logging.DEBUG),
    ):
        if word in head:
            return level
    return logging.WARNING


def _how(returncode: int | None) -> str:
    if returncode is None:
        return "(it did not exit)"
    if returncode < 0:
        try:
            return f"(killed by {signal.Signals(-returncode).name})"
        except ValueError:
            return f"(killed by signal {-returncode})"
    return f"(exit status {returncode})"


def _path(value: Any) -> str:
    """A path of cordon's answer: a string, or the bytes of a name that is not UTF-8, named as
    :func:`os.fsdecode` names it."""
    return os.fsdecode(bytes(value)) if isinstance(value, list) else str(value)
