"""Ask mode: the permission callback sees each request and its answer is the user's."""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import cordon

from .helpers import QUIET


def test_an_edit_is_asked_with_its_diff_and_a_command_may_be_refused(workspace: Path) -> None:
    asked: list[cordon.PermissionRequest] = []

    def answer(request: cordon.PermissionRequest) -> cordon.Permission:
        asked.append(request)
        return "allow_once" if request.kind == "edit" else "reject_once"

    with cordon.Session(workspace, on_permission=answer, **QUIET) as s:
        written = s.write_file("hello.txt", "hi\n")
        refused = s.bash("touch ran.txt")
        read = s.read_file("hello.txt")
    assert written.output.startswith("Created hello.txt (1 line)")
    assert (workspace / "hello.txt").read_text() == "hi\n"
    assert refused.failed and refused.output == "[command rejected by the user]"
    assert not (workspace / "ran.txt").exists()
    assert read.output == "hi\n"
    edit, command = asked  # reads are never asked about
    assert (edit.kind, edit.title) == ("edit", "write_file: hello.txt")
    assert edit.diffs == (cordon.Diff(str(workspace / "hello.txt"), None, "hi\n"),)
    assert edit.options == ("allow_once", "allow_always", "reject_once", "reject_always")
    assert (command.kind, command.raw_input) == ("execute", {"command": "touch ran.txt"})


def test_an_always_answer_holds_and_booleans_answer_once(workspace: Path) -> None:
    answers: list[cordon.Permission | bool] = ["allow_always", False, True]
    asked: list[str] = []

    def answer(request: cordon.PermissionRequest) -> cordon.Permission | bool:
        asked.append(request.title)
        return answers.pop(0)

    with cordon.Session(workspace, on_permission=answer, **QUIET) as s:
        assert s.bash("echo 1").output == "1\n"
        assert s.bash("echo 2").output == "2\n"
        assert s.write_file("a.txt", "a").failed
        assert s.write_file("a.txt", "a").output.startswith("Created a.txt")
    assert asked == ["bash: echo 1", "write_file: a.txt", "write_file: a.txt"]


def test_a_callback_that_fails_refuses_the_call_and_its_error_is_raised(workspace: Path) -> None:
    def broken(request: cordon.PermissionRequest) -> cordon.Permission:
        raise LookupError("the user went away")

    with cordon.Session(workspace, on_permission=broken, **QUIET) as s:
        with pytest.raises(LookupError, match="the user went away"):
            s.write_file("a.txt", "a\n")
        assert not (workspace / "a.txt").exists()
        assert s.read_file("a.txt").failed  # the session goes on


def test_an_answer_that_is_not_an_option_refuses_the_call(workspace: Path) -> None:
    def vague(request: cordon.PermissionRequest) -> cordon.Permission:
        return "maybe"  # type: ignore[return-value]

    with cordon.Session(workspace, on_permission=vague, **QUIET) as s:
        with pytest.raises(ValueError, match="on_permission answered 'maybe'"):
            s.bash("touch ran.txt")
    assert not (workspace / "ran.txt").exists()


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"the page\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    """A web server of this machine, on its loopback; yields its port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def test_a_host_off_the_allowlist_is_asked_about_while_the_command_runs(
    workspace: Path, server: int
) -> None:
    asked: list[cordon.PermissionRequest] = []
    hosts: list[cordon.Permission] = ["allow_once", "reject_once"]

    def answer(request: cordon.PermissionRequest) -> cordon.Permission:
        asked.append(request)
        return hosts.pop(0) if request.kind == "fetch" else "allow_always"

    fetch = (
        f"import urllib.request; print(urllib.request.urlopen('http://pkg.test:{server}/').read())"
    )
    with cordon.Session(
        workspace,
        allow_domains=["allowed.test"],
        add_hosts={"pkg.test": "127.0.0.1"},
        on_permission=answer,
        **QUIET,
    ) as s:
        allowed = s.bash(f'python3 -c "{fetch}"')
        refused = s.bash(f'python3 -c "{fetch}"')
    assert allowed.output == "b'the page\\n'\n" and allowed.blocked == ()
    assert refused.exit_code == 1 and refused.blocked == (f"pkg.test:{server}",)
    fetches = [r for r in asked if r.kind == "fetch"]
    assert [r.title for r in fetches] == [f"Connect to pkg.test:{server}"] * 2
    assert fetches[0].raw_input == {"host": "pkg.test", "port": server}


def test_an_async_session_awaits_a_coroutine_callback(workspace: Path) -> None:
    async def answer(request: cordon.PermissionRequest) -> cordon.Permission:
        await asyncio.sleep(0.01)
        return "allow_once"

    async def main() -> str:
        async with cordon.AsyncSession(workspace, on_permission=answer, **QUIET) as s:
            return (await s.bash("echo asked")).output

    assert asyncio.run(main()) == "asked\n"


def test_ask_needs_a_callback_and_a_callback_needs_ask(workspace: Path) -> None:
    with pytest.raises(cordon.StartError, match='permissions="ask" needs on_permission'):
        cordon.Session(workspace, permissions="ask")
    with pytest.raises(cordon.StartError, match='permissions is "deny"'):
        cordon.Session(workspace, permissions="deny", on_permission=lambda r: True)
