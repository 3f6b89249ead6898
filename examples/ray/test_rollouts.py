"""The Ray example on a local Ray instance: every rollout ran in its own session, its output
came back, and no session of it is left running."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
import rollouts


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # The workers import the tasks' module from this directory, whatever pytest's is.
    here = str(Path(__file__).resolve().parent)
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": here}})
    yield
    ray.shutdown()


def cordons_in(root: Path) -> list[str]:
    """The command lines of cordon processes working under ``root``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                args = file.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "session" in args and any(a.startswith(str(root)) for a in args):
            found.append(" ".join(args))
    return found


def test_rollouts_run_as_ray_tasks_each_in_its_own_session(local_ray: None, tmp_path: Path) -> None:
    done = rollouts.rollouts(4, str(tmp_path), bash_home="private")
    assert [r.index for r in done] == [0, 1, 2, 3]
    for r in done:
        first, last = r.steps[2], r.steps[-1]
        n = 10 + r.index
        assert first.exit_code == 1
        assert first.output.startswith(f"fib({n}) = {rollouts.fib(n - 1)}, want {rollouts.fib(n)}")
        assert r.steps[3].output.startswith("Edited fib.py: 1 edit applied")
        assert (
            last.exit_code == 0
            and last.output == f"fib({n}) = {rollouts.fib(n)}, want {rollouts.fib(n)}\n"
        )
        assert r.reward == 1.0
        assert "+++ b/fib.py" in r.patch and "+    for _ in range(n):" in r.patch
        assert "+++ b/test_fib.py" in r.patch
    workspaces = sorted(p.name.split("-")[1] for p in tmp_path.iterdir())
    assert workspaces == ["0", "1", "2", "3"]  # a workspace of its own each
    assert cordons_in(tmp_path) == []
    assert all(not any(Path(tmp_path, w).iterdir()) for w in os.listdir(tmp_path))


def test_doctor_runs_on_every_node(local_ray: None) -> None:
    [(status, text)] = rollouts.doctors().values()
    assert status == 0, text
    assert "bash commands run with these layers of confinement:" in text
