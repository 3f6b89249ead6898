"""The exceptions of the package: what is not a tool result.

A tool call that could not do its job (a file that does not exist, a refused edit, a command
that exited with 1) is a result, with ``failed`` set and cordon's text as its ``output``, as the
model would see it. These exceptions are for the rest: cordon cannot be found or cannot start,
a setting it refuses, a session that died, a request it could not read, a call cancelled.
"""

from __future__ import annotations


class CordonError(Exception):
    """Anything that is not a tool result. ``text`` is cordon's own text, when it gave one."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


class BinaryNotFoundError(CordonError):
    """The ``cordon`` binary was not found (or cannot be run)."""


class StartError(CordonError):
    """cordon ended before it served: a setting it refused, a workspace it cannot use, a
    plugin it cannot load. ``text`` is what cordon printed; ``returncode`` its exit status."""

    def __init__(self, message: str, text: str = "", returncode: int | None = None) -> None:
        super().__init__(message, text)
        self.returncode = returncode


class SessionDiedError(CordonError):
    """The cordon process ended while the session was in use (killed, or crashed).
    ``text`` is the end of what it printed on standard error."""

    def __init__(self, message: str, text: str = "", returncode: int | None = None) -> None:
        super().__init__(message, text)
        self.returncode = returncode


class SessionClosedError(CordonError):
    """The session was used after it was closed."""


class ProtocolError(CordonError):
    """cordon answered a request with an error instead of a result (a request it could not
    read, such as a line over its 64 MiB limit). ``text`` is its error."""


class CallCancelledError(CordonError):
    """The call was cancelled with ``cancel()`` (or Ctrl-C in a synchronous session); its
    command's whole process tree was killed, and an edit that had not written wrote nothing."""


class LayerError(CordonError):
    """A layer operation (``diff``, ``checkpoint``, ``rollback``, ``fork``) was refused: the
    session has no layer, no checkpoint has that label, a fork's name is taken. ``text`` is
    cordon's reason."""
