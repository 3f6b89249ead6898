"""cordon: a sandbox for an AI agent's tool calls, from Python.

:class:`Session` (and :class:`AsyncSession` for ``asyncio``) runs ``cordon session``, the
binary this package's wheel carries, and calls its tools: ``bash`` in a confined shell,
``read_file``, ``write_file``, ``edit_file``, ``read_skill`` and any plugin's, each returning a
:class:`Result` with the text the model sees. See docs/python.md.
"""

from __future__ import annotations

from .aio import AsyncSession
from .binary import find_binary
from .errors import (
    BinaryNotFoundError,
    CallCancelledError,
    CordonError,
    LayerError,
    ProtocolError,
    SessionClosedError,
    SessionDiedError,
    StartError,
)
from .results import Diff, Exit, Permission, PermissionRequest, Receipt, Result, Tool, Turn
from .settings import Options
from .sync import Session

__all__ = [
    "AsyncSession",
    "BinaryNotFoundError",
    "CallCancelledError",
    "CordonError",
    "Diff",
    "Exit",
    "LayerError",
    "Options",
    "Permission",
    "PermissionRequest",
    "ProtocolError",
    "Receipt",
    "Result",
    "Session",
    "SessionClosedError",
    "SessionDiedError",
    "StartError",
    "Tool",
    "Turn",
    "find_binary",
]
