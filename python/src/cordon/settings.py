"""A session's settings: the options of ``cordon`` as keyword arguments.

Each key of :class:`Options` is one option of ``cordon --help``, by the same name (``--bash-read``
is ``bash_read``) but for the repeatable ones, whose names say they take several
(``allow_domains``, ``add_hosts``) and for ``memory`` and ``processes`` (``--bash-memory``,
``--bash-max-processes``). Values are handed to cordon as they are, so that cordon judges them
and a bad one fails the start with cordon's own text (:class:`~cordon.StartError`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Literal, TypedDict

#: A path, as ``str`` or ``pathlib.Path``.
StrPath = str | os.PathLike[str]

#: How calls that change things are treated: run, asked about, refused.
Permissions = Literal["allow", "ask", "deny"]

#: The layers of the sandbox that may be let go where the kernel cannot enforce them.
Layer = Literal["landlock", "seccomp"]

#: What cordon logs on its standard error (which the package logs on the ``cordon`` logger).
LogLevel = Literal["error", "warn", "info", "debug", "trace"]


class Options(TypedDict, total=False):
    """The settings of a session, every one optional (cordon's default when left out)."""

    max_output: int
    """``--max-output``: the most characters of output the model sees from one call."""
    edit_tools: bool
    """False for ``--no-edit-tools``: declare no read_file, write_file, edit_file."""
    skills: StrPath
    """``--skills``: the skills directory for ``read_skill``."""
    timeout: int
    """``--timeout``: seconds a bash command may run (default 30)."""
    max_timeout: int
    """``--max-timeout``: the most seconds a call may ask for with ``bash(timeout=…)``."""
    unconfined_bash: bool
    """``--unconfined-bash``: run commands without the kernel confinement."""
    sandbox_allow_missing: Sequence[Layer]
    """``--sandbox-allow-missing``: layers commands may run without where the kernel lacks them."""
    bash_read: StrPath | Sequence[StrPath]
    """``--bash-read``: paths commands may also read (and execute from)."""
    bash_write: StrPath | Sequence[StrPath]
    """``--bash-write``: paths commands may also write."""
    bash_env: Mapping[str, str] | Sequence[str]
    """``--bash-env``: variables of commands: ``{"NAME": "VALUE"}``, or ``"NAME=VALUE"``,
    ``"NAME"`` (pass cordon's own) and ``"PREFIX*"`` items."""
    bash_path: StrPath | Sequence[StrPath]
    """``--bash-path``: directories put before the commands' fixed ``PATH``."""
    bash_home: Literal["workspace", "private"] | StrPath
    """``--bash-home``: the commands' home: ``"workspace"``, ``"private"`` or a directory."""
    toolchains: bool
    """``--toolchains``: grant the toolchains found in your home (rustup, pyenv, nvm, uv, …)."""
    unprotect: StrPath | Sequence[StrPath]
    """``--unprotect``: protected paths of the workspace every tool may write."""
    bash_network: bool
    """``--bash-network``: commands get the host's whole network."""
    allow_domains: str | Sequence[str]
    """``--allow-domain``: hosts commands may reach through cordon's proxy: names,
    ``*.name``, addresses, with ``:PORT``, or sets such as ``"@pypi"``."""
    add_hosts: Mapping[str, str]
    """``--add-host``: ``{"name": "address"}`` the proxy connects to without resolving."""
    memory: int
    """``--bash-memory``: the memory limit of a command's whole process tree, in MiB."""
    processes: int
    """``--bash-max-processes``: processes and threads a command may have at once."""
    bash_output_cap: int
    """``--bash-output-cap``: MiB of a command's output kept from its start, and as many from
    its end."""
    layer: StrPath
    """``--layer``: see the workspace through this copy-on-write layer (a name, or a directory
    given by a path), which changes your tree only when accepted (``cordon layer accept``)."""
    permissions: Permissions
    """``--permissions``: ``"allow"`` (cordon's default; ``"ask"`` when ``on_permission`` is
    given), ``"ask"`` or ``"deny"``."""
    preview_lines: int
    """``--preview-lines``: lines of output a result's ``display`` shows."""
    plugins: StrPath | Sequence[StrPath]
    """``--plugins``: directories of third-party plugins."""
    config: StrPath
    """``--config``: cordon's config file."""
    log_level: LogLevel
    """``--log-level``: what cordon logs (on the ``cordon`` logger)."""
    cache_dir: StrPath
    """``--cache-dir``: where compiled plugins are cached."""
    binary: StrPath
    """The ``cordon`` binary to run (default: ``$CORDON_BIN``, else the package's own)."""
    env: Mapping[str, str]
    """The environment of the cordon process (default: this process's)."""


#: Boolean options: the flag when true, nothing when false.
_FLAGS = {
    "unconfined_bash": "--unconfined-bash",
    "toolchains": "--toolchains",
    "bash_network": "--bash-network",
}

#: Options of one value.
_SINGLE = {
    "max_output": "--max-output",
    "skills": "--skills",
    "timeout": "--timeout",
    "max_timeout": "--max-timeout",
    "bash_home": "--bash-home",
    "memory": "--bash-memory",
    "processes": "--bash-max-processes",
    "bash_output_cap": "--bash-output-cap",
    "layer": "--layer",
    "permissions": "--permissions",
    "preview_lines": "--preview-lines",
    "config": "--config",
    "log_level": "--log-level",
    "cache_dir": "--cache-dir",
}

#: Repeatable options: the option once per item.
_REPEATED = {
    "bash_read": "--bash-read",
    "bash_write": "--bash-write",
    "bash_path": "--bash-path",
    "unprotect": "--unprotect",
    "allow_domains": "--allow-domain",
    "plugins": "--plugins",
}

#: What the package itself uses, not passed to cordon.
_OWN = {"binary", "env"}


def check(options: Mapping[str, object]) -> None:
    """Raises ``TypeError`` for a keyword that is not a setting, as Python does for an
    unknown keyword argument."""
    known = Options.__annotations__
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"unknown setting(s) {', '.join(unknown)}; the settings are {', '.join(known)}"
        )


def args(workspace: StrPath, options: Options) -> list[str]:
    """cordon's command line before ``session`` for ``options`` in ``workspace``."""
    given: Mapping[str, object] = options
    line = ["--workspace", os.path.abspath(os.fspath(workspace))]
    for key, value in given.items():
        if key in _OWN:
            continue
        if key in _FLAGS:
            if value:
                line.append(_FLAGS[key])
        elif key == "edit_tools":
            if not value:
                line.append("--no-edit-tools")
        elif key in _SINGLE:
            line += [_SINGLE[key], _text(value)]
        elif key in _REPEATED:
            for item in _items(value):
                line += [_REPEATED[key], _text(item)]
        elif key == "sandbox_allow_missing":
            layers = [_text(layer) for layer in _items(value)]
            if layers:
                line += ["--sandbox-allow-missing", ",".join(layers)]
        elif key == "bash_env":
            for item in _env(value):
                line += ["--bash-env", item]
        elif key == "add_hosts":
            for name, address in _mapping(key, value).items():
                line += ["--add-host", f"{name}={address}"]
    return line


def _text(value: object) -> str:
    """An option's value as cordon reads it: paths as paths, ``True`` never as ``"True"``."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)  # type: ignore[no-any-return]
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _items(value: object) -> list[object]:
    """A repeatable option's items: one string or path is one item, not its characters."""
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if isinstance(value, Sequence):
        return list(value)
    raise TypeError(f"expected a string, a path or a sequence of them, got {value!r}")


def _mapping(key: str, value: object) -> Mapping[object, object]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{key} takes a mapping, got {value!r}")
    return value


def _env(value: object) -> list[str]:
    if isinstance(value, Mapping):
        return [f"{name}={text}" for name, text in value.items()]
    return [_text(item) for item in _items(value)]
