"""Drives `cordon mcp` with the official MCP Python client (`mcp` on PyPI).

Run by tests/integration/mcp.rs with the test venv's Python:

    python mcp_client.py CONFIG_JSON SCENARIO

CONFIG_JSON: {"cordon": binary, "args": [global options], "env": {variables}, "outside": a
path relative to the workspace that leads out of it}.
SCENARIO: `tools` (everything but permissions) or `ask` (--permissions ask, with and without
elicitation). It prints one JSON document of what the client saw; the Rust test asserts on it,
so that a failure shows the whole exchange.
"""

import json
import sys
import time

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError


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


def server(config, *args):
    return StdioServerParameters(
        command=config["cordon"], args=[*config["args"], *args, "mcp"], env=config["env"]
    )


async def tools(config):
    outside = config["outside"]
    out = {}
    start = time.monotonic()
    async with stdio_client(server(config)) as (read, write):
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
            out["calls"] = {}
            out["call_ms"] = {}
            for key, name, arguments in steps:
                start = time.monotonic()
                out["calls"][key] = await call(session, name, arguments)
                out["call_ms"][key] = round((time.monotonic() - start) * 1000, 1)
            out["calls"]["not_an_object"] = await raw_call(session, {"name": "read_file", "arguments": [1, 2]})
    # The 2026-07-28 lifecycle: server/discover instead of the initialize handshake.
    async with stdio_client(server(config)) as (read, write):
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

    async with stdio_client(server(config, "--permissions", "ask")) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.initialize()
            out["allowed"] = await call(session, "write_file", {"path": "ask1.txt", "content": "one\n"})
            out["declined"] = await call(session, "write_file", {"path": "ask2.txt", "content": "two\x1b[8m\n"})
            out["read"] = await call(session, "read_file", {"path": "a.txt"})
    # A client that cannot elicit: nobody can be asked, so the call is refused.
    async with stdio_client(server(config, "--permissions", "ask")) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            out["no_elicitation"] = await call(session, "write_file", {"path": "ask3.txt", "content": "three\n"})
    # The 2026-07-28 lifecycle forbids server-to-client requests: no elicitation, refused.
    async with stdio_client(server(config, "--permissions", "ask")) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as session:
            await session.discover()
            out["discovered"] = await call(session, "write_file", {"path": "ask4.txt", "content": "four\n"})
    return out


async def main():
    config = json.loads(sys.argv[1])
    scenario = {"tools": tools, "ask": ask}[sys.argv[2]]
    json.dump(await scenario(config), sys.stdout, ensure_ascii=False, indent=1)
    print()


anyio.run(main)
