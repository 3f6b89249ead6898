// Drives `cordon mcp` with the official MCP TypeScript SDK (`@modelcontextprotocol/sdk` on
// npm), which speaks the 2025-11-25 lifecycle (`initialize`).
//
// Run by tests/integration/mcp.rs with the harness's node and SDK:
//
//     CORDON_TS_SDK=DIR node mcp_client.mjs CONFIG_JSON
//
// CORDON_TS_SDK: the SDK's package directory. CONFIG_JSON: {"cordon": binary, "args": [global
// options], "env": {variables}}, and over Streamable HTTP "http": {the options after
// `mcp --http` joined by spaces: {"url", "token"} of the `cordon mcp --http` the test started
// with them}; without "http", each connection starts its own `cordon mcp`. It prints one JSON
// document of what the client saw; the Rust test asserts on it.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const sdk = (path) => import(pathToFileURL(join(process.env.CORDON_TS_SDK, "dist/esm", path)).href);
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { ElicitRequestSchema } = await sdk("types.js");

const config = JSON.parse(process.argv[2]);

/** The transport of a new connection to `cordon mcp` with `args`, and the server's standard
 * error so far: a process of its own over stdio, or a new session of the `cordon mcp --http`
 * started with them (whose standard error the Rust test reads). */
function transport(args) {
  const served = config.http?.[args.join(" ")];
  if (served) {
    const headers = { Authorization: `Bearer ${served.token}` };
    return [new StreamableHTTPClientTransport(new URL(served.url), { requestInit: { headers } }), () => ""];
  }
  const stdio = new StdioClientTransport({
    command: config.cordon,
    args: [...config.args, ...args, "mcp"],
    env: config.env,
    stderr: "pipe",
  });
  let stderr = "";
  stdio.stderr.on("data", (chunk) => (stderr += chunk));
  return [stdio, () => stderr];
}

/** A connected client of `cordon mcp` with `args` (see `transport`). */
async function connect(args, onElicit) {
  const [connection, stderr] = transport(args);
  const capabilities = onElicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "cordon-test", version: "1" }, { capabilities });
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, onElicit);
  await client.connect(connection);
  return { client, stderr };
}

/** A tools/call as {result} or {error: message}. */
async function call(client, name, args, options) {
  try {
    return { result: await client.callTool({ name, arguments: args }, undefined, options) };
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
}

/** The processes whose command line holds `token`. */
function alive(token) {
  return readdirSync("/proc").filter((pid) => {
    try {
      return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`).includes(token);
    } catch {
      return false;
    }
  });
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const out = {};

// Listing, then ping; permissions through elicitation, answered allow then reject.
const asked = [];
const answers = [{ action: "accept", content: { answer: "allow_once" } }, { action: "decline" }];
const ask = await connect(["--permissions", "ask"], async (request) => {
  asked.push(request.params.message);
  return answers.shift() ?? { action: "cancel" };
});
out.tools = (await ask.client.listTools()).tools.map((t) => t.name);
out.ping = await ask.client.ping().then((r) => ({ result: r }), (e) => ({ error: String(e) }));
out.allowed = await call(ask.client, "write_file", { path: "ts1.txt", content: "one\n" });
out.declined = await call(ask.client, "write_file", { path: "ts2.txt", content: "two\n" });
out.asked = asked;
await ask.client.close();

// Cancellation on the client's own timeout, calls in parallel, progress; standard error.
const long = await connect([]);
const token = `${process.pid}3`;
let start = Date.now();
out.cancelled = await call(long.client, "bash", { command: `sleep 20.${token}` }, { timeout: 1000 });
start = Date.now();
out.after_cancel = await call(long.client, "read_file", { path: "a.txt" });
out.after_cancel_ms = Date.now() - start;
for (let i = 0; i < 20 && alive(`20.${token}`).length; i++) await sleep(50);
out.left_alive = alive(`20.${token}`);
start = Date.now();
out.parallel = await Promise.all(
  [0, 1, 2, 3].map((i) => call(long.client, "bash", { command: `sleep 1; echo ${i}` })),
);
out.parallel_ms = Date.now() - start;
const progress = [];
out.progress_call = await call(
  long.client,
  "bash",
  { command: "for i in 1 2 3; do echo tick $i; sleep 1; done" },
  { onprogress: (p) => progress.push(p) },
);
out.progress = progress;
await long.client.close();
out.stderr = long.stderr();

console.log(JSON.stringify(out, null, 1));
