"""`AsyncSession`: the same calls from asyncio, many at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import cordon
from cordon import procs

from .helpers import QUIET


def test_calls_from_concurrent_tasks_are_served_in_turn(workspace: Path) -> None:
    async def main() -> list[str]:
        async with cordon.AsyncSession(workspace, **QUIET) as s:
            commands = [s.bash(f"sleep 0.0{i}; echo {i}") for i in range(5)]
            return [r.output for r in await asyncio.gather(*commands)]

    assert asyncio.run(main()) == [f"{i}\n" for i in range(5)]


def test_a_session_starts_on_its_first_call_and_closes_with_everything(workspace: Path) -> None:
    async def main() -> None:
        s = cordon.AsyncSession(workspace, **QUIET)
        assert s.pid is None
        written = await s.write_file("a.txt", "a\n")
        assert written.output.startswith("Created a.txt")
        assert (await s.edit_file("a.txt", [("a", "b")])).output.startswith("Edited a.txt")
        assert (await s.read_file("a.txt")).output == "b\n"
        assert (await s.read_skill("x")).failed  # no skills directory: no read_skill
        assert [t.name for t in await s.tools()] == ["bash", "read_file", "write_file", "edit_file"]
        assert (await s.end_turn()).counters["file_ops"] == 3
        assert s.pid is not None
        tree = procs.tree(s.pid)
        await s.close()
        assert procs.alive(tree) == set()

    asyncio.run(main())


def test_an_async_output_callback_is_awaited(workspace: Path) -> None:
    seen: list[str] = []

    async def show(line: str) -> None:
        await asyncio.sleep(0)
        seen.append(line)

    async def main() -> None:
        async with cordon.AsyncSession(workspace, **QUIET) as s:
            await s.bash("echo a; sleep 0.4; echo b; sleep 0.4", on_output=show)

    asyncio.run(main())
    assert seen == ["a", "b"]
