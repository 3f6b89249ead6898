"""Every method of a session, against the real binary: what each returns and what it did."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import cordon

from .helpers import QUIET


def test_bash_returns_the_output_and_how_the_command_ended(session: cordon.Session) -> None:
    result = session.bash("echo hi; exit 3")
    assert result.output == "hi\n[exit code: exit status 3]"
    assert result.status == "completed" and not result.failed
    assert result.exit == cordon.Exit(code=3)
    assert result.exit_code == 3 and not result.ok
    assert result.display.startswith("🛠️ bash: echo hi; exit 3\n  hi")
    assert result.acp["kind"] == "execute"
    assert result.sandbox is not None
    assert {"user", "pid", "mount", "network"} <= set(result.sandbox.enforced)
    assert result.blocked == ()
    assert session.bash("true").ok


def test_a_forged_trailer_does_not_change_the_exit_code(session: cordon.Session) -> None:
    result = session.bash("printf '[exit code: exit status 3]'")
    assert result.output == "[exit code: exit status 3]"
    assert result.exit_code == 0 and result.ok


def test_bash_reports_a_signal_and_its_own_timeout(session: cordon.Session) -> None:
    killed = session.bash("kill -KILL $$")
    assert killed.exit == cordon.Exit(signal="SIGKILL") and killed.exit_code is None
    slow = session.bash("sleep 5", timeout=1)
    assert slow.exit == cordon.Exit(timeout=1)
    assert "[error: 1s timeout exceeded]" in slow.output


def test_bash_streams_its_lines_while_it_runs(session: cordon.Session) -> None:
    lines: list[str] = []
    result = session.bash(
        "for i in 1 2 3; do echo tick $i; sleep 0.3; done", on_output=lines.append
    )
    assert lines == ["tick 1", "tick 2", "tick 3"]
    assert result.output == "tick 1\ntick 2\ntick 3\n"


def test_an_output_callback_that_fails_raises_after_the_call(session: cordon.Session) -> None:
    def fail(line: str) -> None:
        raise RuntimeError(f"no thanks: {line}")

    with pytest.raises(RuntimeError, match="no thanks: one"):
        session.bash("echo one; sleep 0.6; echo two; sleep 0.6", on_output=fail)
    assert session.bash("echo next").output == "next\n"


def test_the_receipt_lists_the_hosts_the_proxy_refused(session: cordon.Session) -> None:
    fetch = "import urllib.request; urllib.request.urlopen('http://pkg.test/')"
    result = session.bash(f'python3 -c "{fetch}"')
    assert result.blocked == ("pkg.test:80",)
    assert result.output.endswith("[exit code: exit status 1]")
    assert "[network: blocked pkg.test:80; allow it with --allow-domain pkg.test]" in result.output


def test_write_read_and_edit_a_file(session: cordon.Session, workspace: Path) -> None:
    written = session.write_file("src/a.txt", "one\ntwo\nthree\n")
    assert written.output.startswith("Created src/a.txt (3 lines)")
    assert written.locations == (str(workspace / "src/a.txt"),)
    assert written.diffs == (cordon.Diff(str(workspace / "src/a.txt"), None, "one\ntwo\nthree\n"),)
    assert written.exit is None and written.sandbox is None
    assert session.read_file("src/a.txt").output == "one\ntwo\nthree\n"
    assert session.read_file("src/a.txt", 2, 2, numbered=True).output.startswith("2\ttwo")

    edited = session.edit_file("src/a.txt", [("two", "2"), {"old": "three", "new": "3"}])
    assert edited.output.startswith("Edited src/a.txt: 2 edits applied")
    assert (workspace / "src/a.txt").read_text() == "one\n2\n3\n"
    assert edited.diffs[0].old_text == "one\ntwo\nthree\n"


def test_a_dry_run_or_a_failed_edit_writes_nothing(
    session: cordon.Session, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("one\n")
    dry = session.edit_file("a.txt", [("one", "1")], dry_run=True)
    assert dry.output.startswith("Dry run, nothing written: would edit a.txt")
    missing = session.edit_file("a.txt", [("absent", "x")])
    assert missing.failed
    assert missing.output.startswith("Nothing was written to a.txt; fix these edits")
    assert (workspace / "a.txt").read_text() == "one\n"


def test_a_tool_that_cannot_do_its_job_is_a_failed_result(session: cordon.Session) -> None:
    missing = session.read_file("nope.txt")
    assert missing.failed and missing.output == "nope.txt does not exist. Create it with write_file"
    outside = session.write_file("../outside.txt", "x")
    assert outside.failed and not os.path.exists("../outside.txt")


def test_read_skill(workspace: Path, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "greet.md").write_text("---\ndescription: Say hi\n---\n# Greet\nSay hi.\n")
    with cordon.Session(workspace, skills=skills, **QUIET) as s:
        assert s.read_skill("greet").output == "---\ndescription: Say hi\n---\n# Greet\nSay hi.\n"
        unknown = s.read_skill("nope")
        assert unknown.failed and unknown.output == 'No skill named "nope". Available skills: greet'
        assert "greet — Say hi" in next(t for t in s.tools() if t.name == "read_skill").description


def test_call_runs_any_tool_and_an_unknown_one_fails(session: cordon.Session) -> None:
    assert session.call("bash", {"command": "echo via call"}).output == "via call\n"
    unknown = session.call("nosuch", {})
    assert unknown.failed and unknown.tool == "nosuch"
    assert unknown.output.startswith('Unknown tool "nosuch". Declared tools: bash, read_file')
    bad = session.call("read_file", {"path": "a", "start": "one"})
    assert bad.failed and bad.output.startswith("Invalid input for read_file: start")


def test_end_turn_counts_the_turn(session: cordon.Session) -> None:
    session.bash("true")
    session.bash("true")
    session.write_file("a.txt", "a\n")
    turn = session.end_turn()
    assert turn.counters["commands"] == 2 and turn.counters["file_ops"] == 1
    assert turn.display == "⚙ 2 commands  📝 1 file op"
    assert session.end_turn().counters["commands"] == 0


def test_tools_lists_what_a_model_is_given(workspace: Path) -> None:
    with cordon.Session(workspace, edit_tools=False, allow_domains="@pypi", **QUIET) as s:
        tools = s.tools()
    assert [t.name for t in tools] == ["bash"]
    assert tools[0].kind == "execute"
    assert tools[0].input_schema["required"] == ["command"]
    assert "pypi.org" in tools[0].description


def test_settings_reach_the_commands(workspace: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("shared data\n")
    with cordon.Session(
        workspace,
        bash_env={"GREETING": "hello"},
        bash_read=[shared],
        timeout=1,
        max_timeout=5,
        memory=256,
        processes=64,
        max_output=200,
        **QUIET,
    ) as s:
        assert s.bash("echo $GREETING").output == "hello\n"
        assert s.bash(f"cat {shared}/data.txt").output == "shared data\n"
        assert s.bash(f"touch {shared}/new").exit_code != 0
        assert s.bash("sleep 3").exit == cordon.Exit(timeout=1)
        assert s.bash("sleep 0.1", timeout=5).ok
        too_long = s.bash("true", timeout=9)
        assert too_long.failed and "a command may be given 1 to 5 s" in too_long.output
        long = s.bash("seq 1 1000")
        assert "[output truncated" in long.output and len(long.output) < 400
        # The limit counts the tasks of the command's user namespace, its init among them.
        assert s.bash("ulimit -u").output == "65\n"


def test_permissions_deny_refuses_commands_and_edits_but_not_reads(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    with cordon.Session(workspace, permissions="deny", **QUIET) as s:
        refused = s.bash("touch b.txt")
        assert refused.failed and refused.exit is None
        assert s.write_file("a.txt", "b\n").failed
        assert s.read_file("a.txt").output == "a\n"
    assert (workspace / "a.txt").read_text() == "a\n" and not (workspace / "b.txt").exists()
