"""N rollouts as Ray tasks, each with a cordon session of its own, collecting each one's output.

A rollout here is a scripted agent (a stand-in for a model's tool calls, which an RL or
evaluation harness would get from its policy): it writes a program with a bug, runs it, edits
the bug away and runs the test, and its reward is whether the test passed, read from the
command's exit code. Every call goes through the rollout's own session, so each rollout's
commands run in their own sandbox, on whichever node Ray schedules the task; the workspace is
a fresh directory on that node, seen through a layer of the rollout's own, so that what the
rollout changed comes back as a patch (``Session.diff``) and the layer is discarded after.

    python examples/ray/rollouts.py --rollouts 8            # a local Ray instance
    RAY_ADDRESS=head:6379 python examples/ray/rollouts.py --rollouts 1000
    python examples/ray/rollouts.py --doctor                 # cordon doctor on every node

docs/scale.md says what each node of a cluster needs.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import cordon

#: The program each rollout starts from: its loop stops one short.
PROGRAM = """import sys

def fib(n):
    a, b = 0, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return a

if __name__ == "__main__":
    print(fib(int(sys.argv[1])))
"""

#: The test: fib(n) for the rollout's n, which the rollout writes beside the program.
TEST = """import sys
from fib import fib

n, want = int(sys.argv[1]), int(sys.argv[2])
got = fib(n)
print(f"fib({n}) = {got}, want {want}")
sys.exit(0 if got == want else 1)
"""


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


@dataclass
class Step:
    """One tool call of a rollout and what the model saw."""

    tool: str
    input: dict[str, Any]
    output: str
    failed: bool
    exit_code: int | None


@dataclass
class Rollout:
    """A rollout's transcript and reward."""

    index: int
    node: str
    steps: list[Step]
    reward: float
    patch: str
    """What the rollout changed in its workspace, as a unified diff ``git apply`` takes."""


def plan(index: int) -> list[tuple[str, dict[str, Any]]]:
    """The calls of rollout ``index``: the ones a model would make to fix the program."""
    n = 10 + index
    fix = {"old": "range(n - 1)", "new": "range(n)"}
    return [
        ("write_file", {"path": "fib.py", "content": PROGRAM}),
        ("write_file", {"path": "test_fib.py", "content": TEST}),
        ("bash", {"command": f"python3 test_fib.py {n} {fib(n)}"}),
        ("edit_file", {"path": "fib.py", "edits": [fix]}),
        ("bash", {"command": f"python3 test_fib.py {n} {fib(n)}"}),
    ]


def run(index: int, root: str | None = None, **settings: Any) -> Rollout:
    """Rollout ``index`` in a fresh workspace (under ``root`` when given), with a session of
    its own made with ``settings``, through a layer of its own (in the node's temporary
    directory, discarded once its patch is read)."""
    workspace = tempfile.mkdtemp(prefix=f"rollout-{index}-", dir=root)
    layer = tempfile.mkdtemp(prefix=f"cordon-layer-{index}-")
    steps = []
    try:
        with cordon.Session(workspace, layer=layer, **settings) as session:
            for tool, input in plan(index):
                result = session.call(tool, input)
                steps.append(Step(tool, input, result.output, result.failed, result.exit_code))
            patch = session.diff()
    finally:
        subprocess.run([cordon.find_binary(), "layer", "discard", layer], capture_output=True)
    reward = 1.0 if steps[-1].exit_code == 0 else 0.0
    return Rollout(index, socket.gethostname(), steps, reward, patch)


@ray.remote
def rollout(index: int, root: str | None = None, **settings: Any) -> Rollout:
    """:func:`run` as a Ray task."""
    return run(index, root, **settings)


def rollouts(count: int, root: str | None = None, **settings: Any) -> list[Rollout]:
    """``count`` rollouts as Ray tasks, on the Ray instance ``ray.init`` connected to."""
    return ray.get([rollout.remote(i, root, **settings) for i in range(count)])


@ray.remote
def doctor() -> tuple[int, str]:
    """``cordon doctor`` on the node that runs the task: its exit status and what it printed."""
    run = subprocess.run([cordon.find_binary(), "doctor"], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


def doctors() -> dict[str, tuple[int, str]]:
    """``cordon doctor`` on every live node of the cluster, by node address."""
    nodes = [node for node in ray.nodes() if node["Alive"]]  # type: ignore[no-untyped-call]
    pinned = [
        doctor.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], False))
        for node in nodes
    ]
    answers = ray.get([task.remote() for task in pinned])
    return {node["NodeManagerAddress"]: answer for node, answer in zip(nodes, answers, strict=True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--root", help="where the workspaces go (default: the temp directory)")
    parser.add_argument("--json", action="store_true", help="print every transcript as JSON")
    parser.add_argument("--doctor", action="store_true", help="run cordon doctor on every node")
    args = parser.parse_args()
    ray.init()  # RAY_ADDRESS, when set, names the cluster
    if args.doctor:
        for address, (status, text) in doctors().items():
            print(f"{address}: {'ok' if status == 0 else 'cannot run commands'}\n{text}")
        return
    done = rollouts(args.rollouts, args.root, bash_home="private")
    if args.json:
        print(json.dumps([asdict(r) for r in done], indent=2))
    for r in done:
        print(f"rollout {r.index} on {r.node}: reward {r.reward}: {r.steps[-1].output.strip()}")
    print(f"mean reward {sum(r.reward for r in done) / len(done):.2f} over {len(done)} rollouts")


if __name__ == "__main__":
    main()
