"""What is not a tool result is an exception, with cordon's text."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import cordon
from cordon import settings

from .helpers import QUIET


def test_a_workspace_cordon_cannot_use_fails_the_start_with_its_text(tmp_path: Path) -> None:
    with pytest.raises(cordon.StartError) as raised:
        cordon.Session(tmp_path / "missing")
    assert raised.value.returncode == 2
    assert raised.value.text.startswith("cordon: error: cannot use")
    assert "Pass an existing directory with --workspace" in str(raised.value)


def test_a_setting_cordon_refuses_fails_the_start_with_its_text(workspace: Path) -> None:
    with pytest.raises(
        cordon.StartError, match='"@nope" is not a set of hosts; the sets are @pypi'
    ):
        cordon.Session(workspace, allow_domains="@nope")
    with pytest.raises(cordon.StartError, match="invalid value 'soon' for '--timeout"):
        cordon.Session(workspace, timeout="soon")  # type: ignore[arg-type]


def test_an_unknown_setting_is_a_type_error(workspace: Path) -> None:
    with pytest.raises(TypeError, match="unknown setting.s. allowed_domains"):
        cordon.Session(workspace, allowed_domains=["@pypi"])  # type: ignore[call-arg]


def test_a_missing_binary(workspace: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CORDON_BIN", str(tmp_path / "nope"))
    with pytest.raises(cordon.BinaryNotFoundError, match="CORDON_BIN is .* not an executable"):
        cordon.Session(workspace)
    text = tmp_path / "not-a-program"
    text.write_text("just text\n")
    text.chmod(0o755)
    with pytest.raises(cordon.BinaryNotFoundError, match="cannot run"):
        cordon.Session(workspace, binary=text)


def test_a_session_whose_cordon_died_says_so(session: cordon.Session) -> None:
    assert session.pid is not None
    os.kill(session.pid, signal.SIGKILL)
    time.sleep(0.1)
    with pytest.raises(cordon.SessionDiedError, match="killed by SIGKILL") as raised:
        session.bash("true")
    assert raised.value.returncode == -signal.SIGKILL
    with pytest.raises(cordon.SessionDiedError):
        session.read_file("a.txt")


def test_a_closed_session_refuses_calls(workspace: Path) -> None:
    s = cordon.Session(workspace, **QUIET)
    s.close()
    s.close()  # twice is nothing
    assert s.closed
    with pytest.raises(cordon.SessionClosedError):
        s.read_file("a.txt")


def test_a_request_cordon_cannot_read_is_a_protocol_error(session: cordon.Session) -> None:
    with pytest.raises(cordon.ProtocolError, match="more than the 64 MiB a request may carry"):
        session.write_file("big.txt", "x" * (64 << 20))
    assert session.bash("echo still here").output == "still here\n"


def test_every_setting_becomes_its_option() -> None:
    options: cordon.Options = {
        "max_output": 100,
        "edit_tools": False,
        "skills": Path("/s"),
        "timeout": 5,
        "max_timeout": 60,
        "unconfined_bash": True,
        "sandbox_allow_missing": ["landlock", "seccomp"],
        "bash_read": ["/r1", Path("/r2")],
        "bash_write": "/w",
        "bash_env": {"A": "1"},
        "bash_path": ["/p"],
        "bash_home": "private",
        "toolchains": True,
        "unprotect": [".git/hooks"],
        "bash_network": False,
        "allow_domains": ["@pypi", "pkg.test:8080"],
        "add_hosts": {"pkg.test": "127.0.0.1"},
        "memory": 512,
        "processes": 32,
        "permissions": "deny",
        "preview_lines": 2,
        "plugins": "/plugins",
        "config": "/c.toml",
        "log_level": "debug",
        "cache_dir": "/cache",
        "binary": "/bin/cordon",
        "env": {},
    }
    assert settings.args("/ws", options) == [
        "--workspace", "/ws",
        "--max-output", "100",
        "--no-edit-tools",
        "--skills", "/s",
        "--timeout", "5",
        "--max-timeout", "60",
        "--unconfined-bash",
        "--sandbox-allow-missing", "landlock,seccomp",
        "--bash-read", "/r1", "--bash-read", "/r2",
        "--bash-write", "/w",
        "--bash-env", "A=1",
        "--bash-path", "/p",
        "--bash-home", "private",
        "--toolchains",
        "--unprotect", ".git/hooks",
        "--allow-domain", "@pypi", "--allow-domain", "pkg.test:8080",
        "--add-host", "pkg.test=127.0.0.1",
        "--bash-memory", "512",
        "--bash-max-processes", "32",
        "--permissions", "deny",
        "--preview-lines", "2",
        "--plugins", "/plugins",
        "--config", "/c.toml",
        "--log-level", "debug",
        "--cache-dir", "/cache",
    ]  # fmt: skip
