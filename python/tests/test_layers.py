"""A session over a layer: its diff, checkpoints, rollback and forks, and what the workspace
sees of them (nothing, until the layer is accepted)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import cordon

from .helpers import QUIET


def layered(workspace: Path, layer: Path) -> cordon.Session:
    """A session over ``workspace`` through the layer in the directory ``layer``."""
    return cordon.Session(workspace, layer=layer, **QUIET)


def test_a_layer_holds_the_changes_until_accepted(workspace: Path, tmp_path: Path) -> None:
    (workspace / "a.txt").write_text("one\n")
    layer = tmp_path / "layer"
    with layered(workspace, layer) as s:
        assert s.edit_file("a.txt", [("one", "two")]).ok
        assert s.bash("echo new > b.txt").ok
        diff = s.diff()
        assert "+++ b/a.txt" in diff and "-one" in diff and "+two" in diff
        assert "+++ b/b.txt" in diff and "+new" in diff
        assert "2 files changed" in s.diff(stat=True)
    assert (workspace / "a.txt").read_text() == "one\n"
    assert not (workspace / "b.txt").exists()
    subprocess.run(
        [cordon.find_binary(), "layer", "accept", str(layer)], check=True, capture_output=True
    )
    assert (workspace / "a.txt").read_text() == "two\n"
    assert (workspace / "b.txt").read_text() == "new\n"


def test_accept_and_discard_while_the_session_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("one\n")
    with layered(workspace, tmp_path / "layer") as s:
        s.bash("echo two >> a.txt; echo b > b.txt")
        s.bash("mkdir -p .git/hooks; echo x > .git/hooks/post-merge")
        assert s.accept(["a.txt"]) == [("modified", "a.txt")]
        assert (workspace / "a.txt").read_text() == "one\ntwo\n"
        with pytest.raises(cordon.LayerError) as refused:
            s.accept()
        assert ".git/hooks is protected" in refused.value.text
        assert not (workspace / "b.txt").exists()
        taken = s.accept(unprotect=[".git/hooks"])
        assert sorted(taken) == [("added", ".git/hooks/post-merge"), ("added", "b.txt")]
        assert s.diff() == ""
        assert s.bash("cat a.txt b.txt").output == "one\ntwo\nb\n"
        s.bash("printf x > \"$(printf 'odd\\377')\"")
        assert s.accept() == [("added", os.fsdecode(b"odd\xff"))]
        assert (workspace / os.fsdecode(b"odd\xff")).read_bytes() == b"x"
        s.bash("echo c > c.txt")
        s.discard()
        assert s.diff() == "" and s.checkpoints() == []
        assert s.bash("test -e c.txt || echo gone").output == "gone\n"
    assert (workspace / ".git/hooks/post-merge").read_text() == "x\n"
    assert not (tmp_path / "layer").exists()


def test_rollback_restores_a_checkpoint_and_each_turn_ends_in_one(
    workspace: Path, tmp_path: Path
) -> None:
    with layered(workspace, tmp_path / "layer") as s:
        s.write_file("kept.txt", "kept\n")
        turn = s.end_turn()
        assert turn.checkpoint is not None and turn.checkpoint in s.checkpoints()
        before = s.diff()
        s.bash("rm kept.txt; echo later > later.txt")
        named = s.checkpoint("after")
        assert named == "after" and s.checkpoints()[-1] == "after"
        s.rollback(turn.checkpoint)
        assert s.diff() == before
        assert s.read_file("kept.txt").output.endswith("kept\n")
        assert s.bash("test -e later.txt || echo gone").output == "gone\n"


def test_a_fork_goes_on_apart_from_its_parent(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    with layered(workspace, tmp_path / "layer") as parent:
        parent.write_file("shared.txt", "both\n")
        assert parent.fork("child") == "child"
        parent.write_file("parent.txt", "mine\n")
        with cordon.Session(workspace, layer="child", **QUIET) as child:
            assert child.read_file("shared.txt").output.endswith("both\n")
            child.write_file("child.txt", "theirs\n")
            assert "parent.txt" not in child.diff()
        assert "child.txt" not in parent.diff()
    assert list(workspace.iterdir()) == []


def test_layer_operations_without_a_layer_are_layer_errors(session: cordon.Session) -> None:
    with pytest.raises(cordon.LayerError) as refused:
        session.diff()
    assert "--layer" in refused.value.text
    assert session.end_turn().checkpoint is None


def test_a_rollback_to_no_checkpoint_is_a_layer_error(workspace: Path, tmp_path: Path) -> None:
    with layered(workspace, tmp_path / "layer") as s:
        with pytest.raises(cordon.LayerError):
            s.rollback("never-taken")
        assert s.bash("true").ok
