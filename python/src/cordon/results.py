"""What a call returns, what a permission request carries, what a turn counted: typed views of
the lines of ``cordon session`` (docs/session.md), each keeping the line it was read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

#: An answer to a permission request: the option ids cordon offers.
Permission = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

#: The answers, in the order cordon offers them.
PERMISSIONS: tuple[Permission, ...] = ("allow_once", "allow_always", "reject_once", "reject_always")


@dataclass(frozen=True)
class Exit:
    """How a command ended. Exactly one field is set."""

    code: int | None = None
    """Its exit status, when it exited."""
    signal: str | None = None
    """The signal that killed it (``"SIGKILL"``), when one did."""
    timeout: int | None = None
    """The seconds after which it was killed for running too long."""
    memory: int | None = None
    """The memory limit (MiB) its process tree reached, when the kernel killed it for that."""

    @classmethod
    def read(cls, line: Mapping[str, Any]) -> Exit:
        """The ``exit`` field of a response."""
        return cls(
            code=line.get("code"),
            signal=line.get("signal"),
            timeout=line.get("timeout"),
            memory=line.get("memory"),
        )


@dataclass(frozen=True)
class Receipt:
    """The sandbox a command ran in (the response's ``sandbox`` field; ``cordon doctor``
    describes the layers)."""

    enforced: tuple[str, ...]
    """The layers in force: ``user``, ``pid``, ``mount``, …, ``network``."""
    partial: Mapping[str, str]
    """Layers of which a weaker form holds, with what holds."""
    off: Mapping[str, str]
    """Layers that are off, with why."""
    blocked: tuple[str, ...]
    """The ``host:port``s cordon's proxy refused to the command."""

    @classmethod
    def read(cls, line: Mapping[str, Any]) -> Receipt:
        """The ``sandbox`` field of a response."""
        return cls(
            enforced=tuple(line.get("enforced", ())),
            partial=dict(line.get("partial", {})),
            off=dict(line.get("off", {})),
            blocked=tuple(line.get("blocked", ())),
        )


@dataclass(frozen=True)
class Diff:
    """A change to one file, as a call made it or a permission request proposes it."""

    path: str
    """The file's absolute path."""
    old_text: str | None
    """Its text before (``None`` for a new file)."""
    new_text: str
    """Its text after."""


def _diffs(tool_call: Mapping[str, Any]) -> tuple[Diff, ...]:
    return tuple(
        Diff(path=item["path"], old_text=item.get("oldText"), new_text=item["newText"])
        for item in tool_call.get("content") or ()
        if item.get("type") == "diff"
    )


@dataclass(frozen=True)
class Result:
    """The answer to a call. A call that could not do its job is a result too, with
    ``failed`` set: its ``output`` says why, as the model would read it."""

    tool: str
    """The tool called."""
    output: str
    """The text the model sees: truncated as configured, a command's trailer last."""
    status: Literal["completed", "failed"]
    """``failed`` when the tool could not do its job (bad input, a refusal, a missing file,
    a command that could not start); a command that ran completed, whatever its exit status."""
    display: str
    """What a person is shown: the call's header and a preview of its output."""
    acp: Mapping[str, Any]
    """The call as an Agent Client Protocol ``ToolCall`` (title, kind, locations, diff)."""
    exit: Exit | None = None
    """How the command ended, for a call that ran one."""
    sandbox: Receipt | None = None
    """The sandbox the command ran in, for a call that ran one."""
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The response line as cordon wrote it."""

    @classmethod
    def read(cls, tool: str, line: Mapping[str, Any]) -> Result:
        """A call's response line."""
        exit, sandbox = line.get("exit"), line.get("sandbox")
        return cls(
            tool=tool,
            output=line["output"],
            status=line["status"],
            display=line.get("display", ""),
            acp=line.get("acp", {}),
            exit=Exit.read(exit) if exit is not None else None,
            sandbox=Receipt.read(sandbox) if sandbox is not None else None,
            raw=line,
        )

    @property
    def failed(self) -> bool:
        """Whether the tool could not do its job."""
        return self.status == "failed"

    @property
    def exit_code(self) -> int | None:
        """The command's exit status (``None`` when no command ran, or it was killed)."""
        return self.exit.code if self.exit else None

    @property
    def ok(self) -> bool:
        """Whether the call completed and, if it ran a command, that command exited 0."""
        return not self.failed and (self.exit is None or self.exit.code == 0)

    @property
    def blocked(self) -> tuple[str, ...]:
        """The ``host:port``s cordon's proxy refused to the command."""
        return self.sandbox.blocked if self.sandbox else ()

    @property
    def locations(self) -> tuple[str, ...]:
        """The absolute paths of the files the call read or changed."""
        return tuple(item["path"] for item in self.acp.get("locations") or ())

    @property
    def diffs(self) -> tuple[Diff, ...]:
        """The changes a file tool made."""
        return _diffs(self.acp)


@dataclass(frozen=True)
class PermissionRequest:
    """A call that needs the user's permission (``permissions="ask"``), or, while a command
    runs under an allowlist, a connection to a host off the list (``kind == "fetch"``)."""

    title: str
    """What is asked about: ``"bash: make test"``, ``"Connect to pkg.test:8080"``."""
    kind: str
    """The tool's kind: ``execute``, ``edit``, ``delete``, ``move``, or ``fetch``."""
    raw_input: Mapping[str, Any]
    """The call's input (for a connection, ``{"host", "port"}``)."""
    options: tuple[Permission, ...]
    """The answers cordon offers."""
    tool_call: Mapping[str, Any]
    """The whole request as an ACP ``ToolCall`` (with the diff an edit would make)."""

    @classmethod
    def read(cls, line: Mapping[str, Any]) -> PermissionRequest:
        """A ``permission_request`` line."""
        tool_call = line["permission_request"]
        return cls(
            title=tool_call.get("title", ""),
            kind=tool_call.get("kind", ""),
            raw_input=tool_call.get("rawInput", {}),
            options=tuple(
                cast(Permission, option["optionId"]) for option in line.get("options", ())
            ),
            tool_call=tool_call,
        )

    @property
    def diffs(self) -> tuple[Diff, ...]:
        """The changes the call would make, when it is an edit."""
        return _diffs(self.tool_call)


@dataclass(frozen=True)
class Turn:
    """What a turn did, from ``end_turn()``; the counts then restart."""

    counters: Mapping[str, int]
    """Calls per counter: ``commands``, ``file_ops``, ``skills``, and any a plugin declares."""
    display: str
    """The counters line a person is shown: ``"⚙ 2 commands  📝 1 file op"``."""
    checkpoint: str | None = None
    """In a session with a ``layer``, the label of the checkpoint the turn ended in (to
    :meth:`~cordon.Session.rollback` to)."""


@dataclass(frozen=True)
class Tool:
    """A tool the session declares, as a model is told of it."""

    name: str
    """Its name: ``bash``, ``read_file``, … or a plugin's tool."""
    description: str
    """Its description, built from the session's settings (bash's tells its sandbox)."""
    input_schema: Mapping[str, Any]
    """The JSON Schema of its input."""
    kind: str
    """The kind cordon treats it as: ``read``, ``edit``, ``execute``, …"""

    @classmethod
    def read(cls, item: Mapping[str, Any]) -> Tool:
        """An item of ``cordon tools --json``."""
        return cls(
            name=item["name"],
            description=item["description"],
            input_schema=item["input_schema"],
            kind=item["kind"],
        )
