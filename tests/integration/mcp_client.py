"""Drives `cordon mcp` with the official MCP Python client (`mcp` on PyPI).

Run by tests/integration/mcp.rs with the test venv's Python:

    python mcp_client.py CONFIG_JSON SCENARIO

CONFIG_JSON: {"cordon": binary, "args": [global options], "env": {variables}, "outside": a
path relative to the workspace that leads out of it, and over Streamable HTTP "http": {the
options after `mcp --http` joined by spaces: {"url", "token"} of the `cordon mcp --http` the
test started with them}}. Without "http", each connection starts its own `cordon mcp`.
SCENARIO: `tools` (everything but permissions), `ask` (--permissions ask, with and without
elicitation), `long` (cancellation, calls in parallel, progress) or `logged` (log messages),
each in both lifecycles: 2025-11-25 (the initialize handshake) and 2026-07-28
(server/discover); or `day`, the calls config["steps"] lists ([key, tool, arguments]), in
order, in the 2025-11-25 lifecycle. It prints one JSON document of what the client saw; the
Rust test asserts on it, so that a failure shows the whole exchange.
"""

import contextlib
import json
import os
import sys
import time

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


# The 2026-07-28 lifecycle, chosen rather than probed: a probe that a busy machine slows down
# falls back to the handshake.
MODERN = "2026-07-28"


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def error(e: MCPError):
    return {"error": {"code": e.error.code, "message": e.error.message}}


async def call(session, name, arguments):
    """A tools/call as {"result": CallToolResult} or {"error": {code, message}}."""
    try:
        return {"result": dump(await session.call_tool(name, arguments))}
    except MCPError as e:
        return error(e)


async def run_steps(session, steps):
    """Calls each of `steps`, [key, tool name, arguments], one after another: what each got
    and how long it took (ms), by key."""
    calls, ms = {}, {}
    for key, name, arguments in steps:
        start = time.monotonic()
        calls[key] = await call(session, name, arguments)
        ms[key] = round((time.monotonic() - start) * 1000, 1)
    return calls, ms


async def raw_call(session, params):
    """A tools/call whose params the typed client would refuse to send (arguments not an
    object): straight through the session's JSON-RPC dispatcher."""
    try:
        return {"result": await session._dispatcher.send_raw_request("tools/call", params, {})}
    except MCPError as e:
        return error(e)


async def ping(session):
    """A ping as {"result": {}} or {"error": {code, message}}."""
    try:
        return {"result": dump(await session.send_ping())}
    except MCPError as e:
        return error(e)


@contextlib.asynccontextmanager
async def connect(config, *args):
    """The (read, write) streams of a new connection to `cordon mcp` with `args`: a process of
    its own over stdio, or a new session of the `cordon mcp --http` started with them."""
    if "http" not in config:
        server = StdioServerParameters(
            command=config["cordon"], args=[*config["args"], *args, "mcp"], env=config["env"]
        )
        async with stdio_client(server) as streams:
            yield streams
        return
    served = config["http"][" ".join(args)]
    headers = {"Authorization": f"Bearer {served['token']}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(served["url"], http_client=http) as streams:
            yield streams


async def tools(config):
    outside = config["outside"]
    out = {}
    start = time.monotonic()
    async with connect(config) as (read, write):
        async with ClientSession(read, write) as session:
            out["initialize"] = dump(await session.initialize())
            out["initialize_ms"] = round((time.monotonic() - start) * 1000, 1)
            out["tools"] = [dump(t) for t in (await session.list_tools()).tools]
            out["ping"] = await ping(session)
            steps = [
                ("read", "read_file", {"path": "a.txt"}),
                ("write", "write_file", {"path": "sub/new.txt", "content": "alpha\nbeta\n"}),
                ("edit", "edit_file", {"path": "sub/new.txt", "edits": [{"old": "beta", "new": "gamma"}]}),
                ("bash", "bash", {"command": "echo hi; pwd"}),
                ("skill", "read_skill", {"name": "deploy"}),
                ("missing", "read_file", {"path": "missing.txt"}),
                ("loop1", "read_file", {"path": "loop.txt"}),
                ("loop2", "read_file", {"path": "loop.txt"}),
                ("loop3", "read_file", {"path": "loop.txt"}),
                ("escape_read", "read_file", {"path": outside}),
                ("escape_write", "write_file", {"path": outside, "content": "pwned\n"}),
                ("escape_bash", "bash", {"command": f"echo pwned > {outside}"}),
                ("invalid", "read_file", {"path": 3}),
                ("unknown", "no_such_tool", {}),
            ]
            out["calls"], out["call_ms"] = await run_steps(session, steps)
            out["calls"]["not_an_object"] = await raw_call(session, {"name": "read_file", "arguments": [1, 2]})
    # The 2026-07-28 lifecycle: server/discover instead of the initialize handshake.
    async with connect(config) as (read, write):
        async with ClientSession(read, write) as session:
            out["discover"] = dump(await session.discover())
            out["discovered_ping"] = await ping(session)
            await session.list_tools()
            out["discovered_read"] = await call(session, "read_file", {"path": "a.txt"})
            out["discovered_ping_after"] = await ping(session)
    return out


async def ask(config):
    out = {"asked": []}
    answers = [
        types.ElicitResult(action="accept", content={"answer": "allow_once"}),
        types.ElicitResult(action="decline"),
    ]

    async def elicit(context, params):
        out["asked"].append(dump(params))
        return answers.pop(0) if answers else types.ElicitResult(action="cancel")

    async with connect(config, "--permissions", "ask") as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            out["allowed"] = await call(session, "write_file", {"path": "ask1.txt", "content": "one\n"})
            out["declined"] = await call(session, "write_file", {"path": "ask2.txt", "content": "two\x1b[8m\n"})
            out["read"] = await call(session, "read_file", {"path": "a.txt"})
    # A client that cannot elicit: nobody can be asked, so the call is refused.
    async with connect(config, "--permissions", "ask") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["no_elicitation"] = await call(session, "write_file", {"path": "ask3.txt", "content": "three\n"})
    # The 2026-07-28 lifecycle has no server-to-client requests: the question comes back as
    # the call's result (input required), and the client retries with the answer.
    answers.extend([
        types.ElicitResult(action="accept", content={"answer": "allow_once"}),
        types.ElicitResult(action="decline"),
    ])
    async with Client(connect(config, "--permissions", "ask"), mode=MODERN, elicitation_callback=elicit) as client:
        out["discovered_version"] = client.protocol_version
        out["discovered_allowed"] = await call(client, "write_file", {"path": "ask4.txt", "content": "four\n"})
        out["discovered_declined"] = await call(client, "write_file", {"path": "ask5.txt", "content": "five\n"})
    # Without an elicitation handler, nobody can be asked.
    async with Client(connect(config, "--permissions", "ask"), mode=MODERN) as client:
        out["discovered_unasked"] = await call(client, "write_file", {"path": "ask6.txt", "content": "six\n"})
    return out


def alive(token):
    """The processes whose command line holds `token`."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            pass
    return found


async def long_calls(session, token, edited):
    """Cancellation, calls in parallel and progress on one connection; `edited` holds the
    lines a, b, c and d, which four edits sent together each make upper case."""
    out = {}
    # The client gives up after a second and cancels; the command must die with the call.
    start = time.monotonic()
    command = f"sleep 20.{token}"
    try:
        await session.call_tool("bash", {"command": command}, read_timeout_seconds=1.0)
        out["cancelled"] = "not cancelled"
    except Exception as e:
        out["cancelled"] = type(e).__name__
    out["cancel_ms"] = round((time.monotonic() - start) * 1000, 1)
    start = time.monotonic()
    out["after_cancel"] = await call(session, "read_file", {"path": "a.txt"})
    out["after_cancel_ms"] = round((time.monotonic() - start) * 1000, 1)
    for _ in range(20):
        if not alive(f"20.{token}"):
            break
        await anyio.sleep(0.05)
    out["left_alive"] = alive(f"20.{token}")

    # Four one-second commands sent together.
    results = {}

    async def one(i):
        results[i] = await call(session, "bash", {"command": f"sleep 1; echo {i}"})

    start = time.monotonic()
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(one, i)
    out["parallel_ms"] = round((time.monotonic() - start) * 1000, 1)
    out["parallel"] = [results[i] for i in range(4)]

    async def edit(line):
        results[line] = await call(session, "edit_file", {"path": edited, "edits": [{"old": line, "new": line.upper()}]})

    async with anyio.create_task_group() as tg:
        for line in "abcd":
            tg.start_soon(edit, line)
    out["edits"] = [results[line] for line in "abcd"]

    # Progress for a three-second command that prints as it goes.
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "message": message})

    out["progress_call"] = dump(await session.call_tool(
        "bash", {"command": "for i in 1 2 3; do echo tick $i; sleep 1; done"}, progress_callback=on_progress
    ))
    out["progress"] = progress
    return out


async def arrived(messages, count):
    """Waits up to 5 s for `count` messages: over HTTP, log messages come on the session's
    standalone stream, not with the call's answer."""
    with anyio.move_on_after(5):
        while len(messages) < count:
            await anyio.sleep(0.01)


async def logged(config):
    """Log messages sent to a client that asks for them, in each lifecycle."""
    out = {"legacy": [], "modern": []}

    def collect(into):
        async def on_message(params):
            into.append(dump(params))
        return on_message

    async with connect(config) as (read, write):
        async with ClientSession(read, write, logging_callback=collect(out["legacy"])) as session:
            await session.initialize()
            await session.call_tool("read_file", {"path": "a.txt"})
            await session.set_logging_level("info")
            await session.call_tool("read_file", {"path": "missing.txt"})
            await arrived(out["legacy"], 1)
    async with Client(connect(config), mode=MODERN, log_level="info", logging_callback=collect(out["modern"])) as client:
        await client.call_tool("read_file", {"path": "a.txt"})
        await arrived(out["modern"], 1)
    return out


async def long(config):
    token = str(os.getpid())
    out = {}
    async with connect(config) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["legacy"] = await long_calls(session, token + "1", "legacy.txt")
    async with Client(connect(config), mode=MODERN) as client:
        out["version"] = client.protocol_version
        out["modern"] = await long_calls(client, token + "2", "modern.txt")
    return out


async def day(config):
    """The steps the test scripted (config["steps"]), on one connection, as a coding agent
    makes them, and bash's description, which the model reads before it starts."""
    out = {}
    async with connect(config) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = (await session.list_tools()).tools
            out["bash"] = next(t.description for t in listed if t.name == "bash")
            out["calls"], out["call_ms"] = await run_steps(session, config["steps"])
    return out


async def main():
    config = json.loads(sys.argv[1])
    scenarios = {"tools": tools, "ask": ask, "long": long, "logged": logged, "day": day}
    scenario = scenarios[sys.argv[2]]
    json.dump(await scenario(config), sys.stdout, ensure_ascii=False, indent=1)
    print()


anyio.run(main)
