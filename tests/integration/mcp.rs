//! `cordon mcp`, driven by the official MCP Python client (`mcp` from PyPI, in the test venv)
//! through tests/integration/mcp_client.py and by the TypeScript SDK through mcp_client.mjs,
//! each over stdio and over Streamable HTTP; by hand for the wire itself; and by the MCP
//! conformance suite.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bash::{LONG_LOG, assert_start_and_end_kept};
use crate::host::{marker, wait_until_gone};
use crate::index::Index;
use crate::mcp_http::{HttpServer, post};
use crate::node::{conformance_bin, typescript_sdk};
use crate::python::python;
use crate::util::{Cordon, cache_dir};

/// How a client script reaches cordon: a `cordon mcp` of its own for each connection, or the
/// sessions of a `cordon mcp --http` that the test starts.
#[derive(Clone, Copy)]
enum Over {
    Stdio,
    Http,
}

/// Two tests of `$body`, with the attributes before them (the doc comment, `ignore`): `$stdio`
/// over stdio, `$http` over HTTP.
macro_rules! over_stdio_and_http {
    ($(#[$attr:meta])* $stdio:ident, $http:ident, $body:ident) => {
        $(#[$attr])*
        #[test]
        fn $stdio() {
            $body(Over::Stdio);
        }

        $(#[$attr])*
        #[test]
        fn $http() {
            $body(Over::Http);
        }
    };
}

/// The options after `mcp` of the servers a client script connects to.
const PLAIN: &[&str] = &[];
const ASK: &[&str] = &["--permissions", "ask"];

/// Runs mcp_client.py `scenario` against `cordon mcp` in `cordon`'s workspace (with its global
/// options) `over` stdio or HTTP, its connections made with each of `servers`' options, and
/// returns what the client saw. `outside` is a path, relative to the workspace, that leads out
/// of it.
fn drive(cordon: &Cordon, scenario: &str, outside: &str, over: Over, servers: &[&[&str]]) -> Value {
    drive_with_stderr(cordon, scenario, outside, over, servers).0
}

/// [`drive`], and what cordon wrote to standard error.
fn drive_with_stderr(
    cordon: &Cordon,
    scenario: &str,
    outside: &str,
    over: Over,
    servers: &[&[&str]],
) -> (Value, String) {
    let client = python_client(scenario, json!({ "outside": outside }));
    run_client(cordon, over, servers, client)
}

/// How mcp_client.py runs `scenario`: with the configuration it is given, and `extra`'s
/// entries added to it.
fn python_client(scenario: &str, extra: Value) -> impl FnOnce(&Value) -> Command + '_ {
    move |config| {
        let mut config = config.clone();
        for (name, value) in extra.as_object().unwrap() {
            config[name] = value.clone();
        }
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/integration/mcp_client.py");
        let mut command = Command::new(python());
        command.arg(script).arg(config.to_string()).arg(scenario);
        command
    }
}

/// Runs a client script, the `command` made for its configuration, against cordon in
/// `cordon`'s workspace, `over` stdio or HTTP: over HTTP it first starts a
/// `cordon mcp --http` with each of `servers`' options, and stops each after (it must end
/// with status 0). Returns what the script printed (JSON) and what cordon wrote to standard
/// error: over stdio the script's own standard error, where the clients pass cordon's on, over
/// HTTP that and what the servers wrote after announcing themselves.
fn run_client(
    cordon: &Cordon,
    over: Over,
    servers: &[&[&str]],
    command: impl FnOnce(&Value) -> Command,
) -> (Value, String) {
    let mut config = client_config(cordon);
    let started: Vec<HttpServer> = match over {
        Over::Stdio => Vec::new(),
        Over::Http => servers
            .iter()
            .map(|args| HttpServer::start(cordon, args))
            .collect(),
    };
    if let Over::Http = over {
        let served = servers.iter().zip(&started);
        config["http"] = served
            .map(|(args, server)| (args.join(" "), server.client_config()))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    let mut command = command(&config);
    let out = command.output().expect("run the client script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{command:?} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    for server in started {
        let (status, said) = server.stop();
        assert!(
            status.success(),
            "cordon mcp --http ended with {status}: {said}"
        );
        stderr.push_str(&said);
    }
    let seen = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("the client script printed no JSON ({e}):\n{stdout}\n{stderr}"));
    (seen, stderr)
}

/// How a client script starts `cordon mcp`: the binary under test, the same options every
/// other test's `cordon` gets (--workspace and the extra ones), and the environment: the
/// compile cache, and the test's data directory, where the homes of bash commands are kept
/// (the clients pass cordon little else of theirs).
fn client_config(cordon: &Cordon) -> Value {
    let args: Vec<String> = cordon
        .command()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    json!({
        "cordon": crate::util::binary(),
        "args": args,
        "env": {"CORDON_CACHE_DIR": cache_dir(), "XDG_DATA_HOME": cordon.data_dir()},
    })
}

/// What both client scripts report of their long calls (`who` names the client): the call
/// after a cancelled `sleep 20` (of a workspace whose `a.txt` holds `one`) answered within
/// 1 s and no process of the cancelled one left, four `sleep 1; echo I` together under 2 s,
/// and at least two progress notifications for a 3 s command.
fn assert_long_calls(seen: &Value, who: &str) {
    assert_eq!(completed(&seen["after_cancel"]), "one\n", "{who}");
    let after = seen["after_cancel_ms"].as_f64().unwrap();
    assert!(after < 1000.0, "{who}: the next call took {after} ms");
    assert_eq!(seen["left_alive"], json!([]), "{who}: {seen:#}");
    let parallel = seen["parallel_ms"].as_f64().unwrap();
    assert!(parallel < 2000.0, "{who}: four sleep 1 took {parallel} ms");
    for (i, call) in seen["parallel"].as_array().unwrap().iter().enumerate() {
        assert_eq!(completed(call), format!("{i}\n"), "{who}");
    }
    let progress = seen["progress"].as_array().unwrap();
    assert!(progress.len() >= 2, "{who}: {seen:#}");
}

/// Panics unless `stderr`, cordon's, says nothing about the calls. The compile cache may say
/// it compiles a component again (a cache written by another build of cordon).
fn assert_quiet(stderr: &str) {
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("cached component"))
        .collect();
    assert!(
        said.is_empty(),
        "cordon mcp wrote to standard error: {said:?}"
    );
}

/// The text of a tool result, and whether it is an error; panics on a JSON-RPC error.
fn result(call: &Value) -> (&str, bool) {
    let r = &call["result"];
    assert!(r.is_object(), "expected a tool result, got {call:#}");
    let content = r["content"].as_array().expect("content");
    assert_eq!(content.len(), 1, "{call:#}");
    assert_eq!(content[0]["type"], "text", "{call:#}");
    (
        content[0]["text"].as_str().unwrap(),
        r["isError"].as_bool().expect("isError"),
    )
}

/// The text of a completed call.
fn completed(call: &Value) -> &str {
    let (text, is_error) = result(call);
    assert!(!is_error, "expected a completed call, got {call:#}");
    text
}

/// The text of a failed call (`isError: true`).
fn failed(call: &Value) -> &str {
    let (text, is_error) = result(call);
    assert!(is_error, "expected isError, got {call:#}");
    text
}

/// The message of a JSON-RPC error, which must be "invalid params".
fn invalid_params(call: &Value) -> &str {
    let e = &call["error"];
    assert_eq!(
        e["code"], -32602,
        "expected an invalid-params error, got {call:#}"
    );
    e["message"].as_str().unwrap()
}

over_stdio_and_http!(
    #[ignore = "network: installs the MCP Python SDK from PyPI"]
    the_official_python_client_lists_and_calls_every_tool,
    the_official_python_client_lists_and_calls_every_tool_over_http,
    python_lists_and_calls_every_tool
);

fn python_lists_and_calls_every_tool(over: Over) {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    cordon.write("loop.txt", "x\n");
    cordon.write(
        "skills/deploy.md",
        "---\nname: deploy\ndescription: How to deploy.\n---\n# Deploy\nsteps\n",
    );
    let skills = cordon.path("skills");
    let cordon = cordon.with_args(&["--skills", skills.to_str().unwrap()]);
    let root = cordon.root();
    let outside_name = format!(
        "{}-outside.txt",
        root.file_name().unwrap().to_string_lossy()
    );
    let outside = format!("../{outside_name}");
    let out = drive(&cordon, "tools", &outside, over, &[PLAIN]);
    eprintln!(
        "initialize answered after {} ms (process start included); calls (ms): {}",
        out["initialize_ms"], out["call_ms"]
    );

    // initialize: cordon's own name and version, tools, instructions naming the workspace.
    let init = &out["initialize"];
    assert_eq!(init["serverInfo"]["name"], "cordon");
    assert_eq!(init["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(init["capabilities"]["tools"].is_object(), "{init:#}");
    let instructions = init["instructions"].as_str().unwrap();
    assert!(
        instructions.contains(root.to_str().unwrap()),
        "{instructions}"
    );

    // tools/list: exactly what `cordon tools --json` declares, with titles and hints.
    let declared: Vec<Value> =
        serde_json::from_str(&cordon.run(&["tools", "--json"]).stdout).unwrap();
    let tools = out["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["bash", "read_file", "write_file", "edit_file", "read_skill"]
    );
    for (tool, declaration) in tools.iter().zip(&declared) {
        assert_eq!(tool["name"], declaration["name"]);
        assert_eq!(tool["description"], declaration["description"]);
        assert_eq!(
            tool["inputSchema"], declaration["input_schema"],
            "{}",
            tool["name"]
        );
    }
    let read = json!({"readOnlyHint": true, "openWorldHint": false});
    let change = json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false});
    for (tool, title, hints) in [
        (&tools[0], "Bash", &change),
        (&tools[1], "Read file", &read),
        (&tools[2], "Write file", &change),
        (&tools[3], "Edit file", &change),
        (&tools[4], "Read skill", &read),
    ] {
        assert_eq!(tool["title"], title);
        let mut expected = hints.clone();
        expected["title"] = title.into();
        assert_eq!(tool["annotations"], expected, "{}", tool["name"]);
    }

    // tools/call, one per tool.
    let calls = &out["calls"];
    assert_eq!(completed(&calls["read"]), "one\ntwo\n");
    assert!(
        completed(&calls["write"]).starts_with("Created sub/new.txt (2 lines)"),
        "{}",
        calls["write"]
    );
    assert!(
        completed(&calls["edit"]).starts_with("Edited sub/new.txt: 1 edit applied"),
        "{}",
        calls["edit"]
    );
    assert_eq!(cordon.read("sub/new.txt"), "alpha\ngamma\n");
    assert_eq!(
        completed(&calls["bash"]),
        format!("hi\n{}\n", root.display())
    );
    assert_eq!(
        completed(&calls["skill"]),
        "---\nname: deploy\ndescription: How to deploy.\n---\n# Deploy\nsteps\n"
    );

    // A failed outcome is a result with isError and the tool's text.
    assert_eq!(
        failed(&calls["missing"]),
        "missing.txt does not exist. Create it with write_file"
    );

    // The loop detector spans the connection: the third identical call is flagged.
    assert_eq!(completed(&calls["loop1"]), "x\n");
    assert_eq!(completed(&calls["loop2"]), "x\n");
    let third = completed(&calls["loop3"]);
    assert!(third.starts_with("x\n[LOOP_DETECTED: "), "{third}");

    // No way out of the workspace.
    let refusal = format!(
        "{outside} is outside the workspace ({}); only paths inside it can be used.",
        root.display()
    );
    assert_eq!(failed(&calls["escape_read"]), refusal);
    assert_eq!(failed(&calls["escape_write"]), refusal);
    // The workspace's parent is in the host's /tmp: the command's write lands in its own
    // private /tmp, never next to the workspace.
    completed(&calls["escape_bash"]);
    assert!(!root.parent().unwrap().join(&outside_name).exists());

    // Arguments that break the schema: a tool execution error the model can act on (MCP
    // 2025-11-25, SEP-1303).
    assert_eq!(
        failed(&calls["invalid"]),
        "Invalid input for read_file: path: 3 is not of type \"string\""
    );
    // An unknown tool and arguments that are not an object: JSON-RPC errors.
    assert_eq!(
        invalid_params(&calls["unknown"]),
        "Unknown tool \"no_such_tool\". Declared tools: bash, read_file, write_file, edit_file, \
         read_skill"
    );
    assert_eq!(
        invalid_params(&calls["not_an_object"]),
        "The input for read_file must be a JSON object, not an array"
    );

    // The 2026-07-28 lifecycle (server/discover, no handshake) is served too.
    let discover = &out["discover"];
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "cordon",
        "{discover:#}"
    );
    assert_eq!(completed(&out["discovered_read"]), "one\ntwo\n");
    // `ping` is answered at any point, in both lifecycles.
    for ping in ["ping", "discovered_ping", "discovered_ping_after"] {
        assert!(out[ping]["result"].is_object(), "{ping}: {}", out[ping]);
    }
}

over_stdio_and_http!(
    #[ignore = "network: installs the MCP Python SDK from PyPI"]
    ask_permission_goes_through_elicitation_and_fails_closed_without_it,
    ask_permission_goes_through_elicitation_and_fails_closed_without_it_over_http,
    ask_permission
);

fn ask_permission(over: Over) {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    let out = drive(&cordon, "ask", "../unused", over, &[ASK]);

    // Asked once per call that changes something, with what it would do; never for a read
    // (two calls in each lifecycle).
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 4, "{out:#}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        message.contains("write_file: ask1.txt") && message.contains("1 + one"),
        "{message}"
    );
    let choices: Vec<&str> = asked[0]["requestedSchema"]["properties"]["answer"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["const"].as_str().unwrap())
        .collect();
    assert_eq!(
        choices,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    // The user reads the message: what the file holds is shown, never obeyed.
    let message = asked[1]["message"].as_str().unwrap();
    assert!(
        message.contains(r"two\x1b[8m") && !message.contains('\x1b'),
        "{message}"
    );

    // Accepted with allow_once: written. Declined: refused, nothing written.
    assert!(completed(&out["allowed"]).starts_with("Created ask1.txt"));
    assert_eq!(cordon.read("ask1.txt"), "one\n");
    let refused = "[write_file rejected by the user: nothing was written]";
    assert_eq!(failed(&out["declined"]), refused);
    assert_eq!(completed(&out["read"]), "one\ntwo\n");

    // A client without elicitation, or on a protocol without server-to-client requests:
    // nobody can be asked, so the call is refused, and the text says nobody was asked.
    let unasked = "[write_file refused: it needs the user's permission, and nobody could be \
                   asked: nothing was written]";
    assert_eq!(failed(&out["no_elicitation"]), unasked);
    for never in ["ask2.txt", "ask3.txt"] {
        assert!(!cordon.path(never).exists(), "{never} was written");
    }

    // The 2026-07-28 lifecycle: the question is the call's first result (input required),
    // answered by the client's elicitation handler, and the call retried with the answer.
    assert_eq!(out["discovered_version"], "2026-07-28", "{out:#}");
    let message = asked[2]["message"].as_str().unwrap();
    assert!(
        message.contains("write_file: ask4.txt") && message.contains("1 + four"),
        "{message}"
    );
    assert!(completed(&out["discovered_allowed"]).starts_with("Created ask4.txt"));
    assert_eq!(cordon.read("ask4.txt"), "four\n");
    assert_eq!(failed(&out["discovered_declined"]), refused);
    assert_eq!(failed(&out["discovered_unasked"]), unasked);
    for never in ["ask5.txt", "ask6.txt"] {
        assert!(!cordon.path(never).exists(), "{never} was written");
    }
}

over_stdio_and_http!(
    #[ignore = "network: installs the MCP Python SDK from PyPI"]
    cancelled_parallel_and_long_calls_behave_as_agents_need,
    cancelled_parallel_and_long_calls_behave_as_agents_need_over_http,
    long_calls
);

/// In both lifecycles: a call the client cancels (on its own one-second timeout) kills its
/// command at once and the next call is answered at once; four one-second commands sent
/// together run together; a long command reports progress; and standard error stays silent.
fn long_calls(over: Over) {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    for edited in ["legacy.txt", "modern.txt"] {
        cordon.write(edited, "a\nb\nc\nd\n");
    }
    let (out, stderr) = drive_with_stderr(&cordon, "long", "../unused", over, &[PLAIN]);
    assert_eq!(out["version"], "2026-07-28", "{out:#}");
    for mode in ["legacy", "modern"] {
        let seen = &out[mode];
        assert_ne!(seen["cancelled"], "not cancelled", "{mode}: {seen:#}");
        assert_long_calls(seen, mode);
        // Four edits of one file sent together: applied one after the other, none lost.
        for edit in seen["edits"].as_array().unwrap() {
            completed(edit);
        }
        assert_eq!(
            cordon.read(&format!("{mode}.txt")),
            "A\nB\nC\nD\n",
            "{mode}"
        );

        assert_eq!(seen["progress_call"]["isError"], false, "{mode}: {seen:#}");
        let last = seen["progress"].as_array().unwrap().last().unwrap();
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains("bytes of output"),
            "{mode}: {last}"
        );
        assert!(last["progress"].as_f64().unwrap() >= 2.0, "{mode}: {last}");
        // The newest lines printed ride on the notifications.
        let messages: Vec<&str> = (seen["progress"].as_array().unwrap().iter())
            .filter_map(|p| p["message"].as_str())
            .collect();
        assert!(
            messages.iter().any(|m| m.contains("\ntick 1")),
            "{mode}: {messages:?}"
        );
    }
    assert_quiet(&stderr);
}

/// Standard output carries JSON-RPC messages only (the logs go to standard error, quiet unless
/// asked), and end of input ends the server with status 0, before the handshake too.
#[test]
fn stdout_carries_only_protocol_messages() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": "echo out; echo err >&2"}}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let run = cordon.run_with_stdin(&["mcp"], &input);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let messages: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert_eq!(messages.len(), 3, "{}", run.stdout);
    for (message, id) in messages.iter().zip(1..) {
        assert_eq!(message["jsonrpc"], "2.0");
        assert_eq!(message["id"], id);
        assert!(message["result"].is_object(), "{message}");
    }
    assert_eq!(messages[2]["result"]["content"][0]["text"], "out\nerr\n");
    // Clients show standard error to the user: silent for calls that succeed.
    assert_eq!(run.stderr, "");
    // Asked for, the per-call lines are there.
    let run = cordon.run_with_stdin(&["--log-level", "info", "mcp"], &input);
    assert!(
        run.stderr.contains("MCP client raw 1 connected"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("bash: echo out"), "{}", run.stderr);

    let run = cordon.run_with_stdin(&["mcp"], "");
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}

/// `isError` only when the tool could not do its job: a command that ran is a result whatever
/// its exit status or a timeout, its text ending with the trailer; a missing file, input that
/// breaks the schema and a refused command are errors.
#[test]
fn is_error_only_when_the_tool_could_not_do_its_job() {
    let call = |id: u32, name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    };
    let cordon = Cordon::new().with_args(&["--timeout", "1"]);
    let answers = cordon.mcp(&[
        call(1, "bash", json!({"command": "echo failing; exit 1"})),
        call(2, "bash", json!({"command": "echo slow; sleep 10"})),
        call(3, "bash", json!({"command": "kill -9 $$"})),
        call(4, "read_file", json!({"path": "missing.txt"})),
        call(5, "bash", json!({"command": 3})),
    ]);
    assert_eq!(
        completed(&answers[0]),
        "failing\n[exit code: exit status 1]"
    );
    assert!(
        completed(&answers[1]).starts_with("slow\n[error: 1s timeout exceeded]"),
        "{:#}",
        answers[1]
    );
    assert_eq!(
        completed(&answers[2]),
        "[exit code: killed by signal SIGKILL]"
    );
    assert_eq!(
        failed(&answers[3]),
        "missing.txt does not exist. Create it with write_file"
    );
    assert!(failed(&answers[4]).starts_with("Invalid input for bash: command"));

    let denied = Cordon::new().with_args(&["--permissions", "deny"]);
    let answers = denied.mcp(&[call(1, "bash", json!({"command": "echo ran"}))]);
    assert_eq!(failed(&answers[0]), "[command rejected by the user]");
}

/// A coding agent's day through `cordon mcp` with the official Python SDK, with only the
/// options a user gives for it: `--toolchains`, and `--allow-domain` for the package index
/// (the test's own, so `--add-host` names it). In one connection: a venv and a package
/// installed from the index, a failing test run and fixed with `edit_file`, a server and its
/// client in one command, a long log whose last line survives truncation, and a 40 s command
/// that asks for 60. Slow by nature: the 40 s are what is tested. Each step's text is what the
/// model reads, a result and never `isError`, and bash's description told it of all this.
#[test]
#[ignore = "network: installs the MCP Python SDK from PyPI"]
fn a_coding_agents_day_through_the_python_sdk() {
    let index = Index::of(
        "wordsplit",
        "1.0",
        "def words(text):\n    return text.split()\n",
    );
    let host = format!("pkg.test:{}", index.server.port);
    let cordon = Cordon::new().with_args(&[
        "--toolchains",
        "--allow-domain",
        &host,
        "--add-host",
        "pkg.test=127.0.0.1",
    ]);
    let buggy = "    return sorted(wordsplit.words(text), key=len)[0]\n";
    let fixed = "    return max(wordsplit.words(text), key=len)\n";
    let module = |body: &str| {
        format!(
            "import wordsplit\n\n\ndef longest(text):\n    \
             \"\"\"The longest word of text, the first of those as long.\"\"\"\n{body}"
        )
    };
    cordon.write("wordcount.py", module(buggy));
    cordon.write(
        "test_wordcount.py",
        "import unittest\n\nfrom wordcount import longest\n\n\n\
         class LongestTest(unittest.TestCase):\n    def test_the_longest_word(self):\n        \
         self.assertEqual(longest(\"a cordon runs tools\"), \"cordon\")\n",
    );
    // pip takes a plain-HTTP index only from a host it is told to trust.
    let install = format!(
        "python3 -m venv .venv && .venv/bin/pip install --index-url http://{host}/simple/ \
         --trusted-host pkg.test wordsplit"
    );
    let test = ".venv/bin/python -m unittest";
    let fix =
        json!({"path": "wordcount.py", "edits": [{"old": buggy.trim(), "new": fixed.trim()}]});
    // The server takes a moment to listen: the client tries again, as a test suite's would.
    let serve = "python3 -m http.server 8000 >/dev/null 2>&1 & for i in $(seq 50); do \
                 curl -s localhost:8000/wordcount.py && break; sleep 0.1; done";
    let steps = json!([
        ["install", "bash", {"command": install}],
        ["failing", "bash", {"command": test}],
        ["fix", "edit_file", fix],
        ["passing", "bash", {"command": test}],
        ["served", "bash", {"command": serve}],
        ["log", "bash", {"command": LONG_LOG}],
        ["long", "bash", {"command": "sleep 40; echo done", "timeout": 60}],
    ]);
    let (out, stderr) = run_client(
        &cordon,
        Over::Stdio,
        &[PLAIN],
        python_client("day", json!({ "steps": steps })),
    );
    eprintln!("calls (ms): {}", out["call_ms"]);

    let told = out["bash"].as_str().unwrap();
    for line in [
        "For a longer build or test run, add \"timeout\": SECONDS to the input (at most 600).",
        &format!("(curl, pip, npm, cargo and git use it): {host}. Any other host is refused."),
        "The command's own loopback works: a server it starts on 127.0.0.1 answers within the \
         same call.",
    ] {
        assert!(told.contains(line), "{line}\n{told}");
    }

    let calls = &out["calls"];
    let installed = completed(&calls["install"]);
    assert!(
        installed.ends_with("\nSuccessfully installed wordsplit-1.0\n"),
        "{installed}"
    );
    // From the test's own index, through cordon's proxy (pip also asks it for a newer pip).
    let asked: Vec<String> = (index.server.heads().iter())
        .map(|h| h.lines().next().unwrap().to_string())
        .collect();
    for wanted in [
        "GET /simple/wordsplit/ HTTP/1.1".to_string(),
        format!("GET /simple/wordsplit/{} HTTP/1.1", index.wheel),
    ] {
        assert!(asked.contains(&wanted), "{wanted}: {asked:?}");
    }

    // A failing test run is the model's to read, not an error of the tool.
    let failing = completed(&calls["failing"]);
    assert!(
        failing.contains("AssertionError: 'a' != 'cordon'\n")
            && failing.ends_with("\nFAILED (failures=1)\n[exit code: exit status 1]"),
        "{failing}"
    );
    let fix = completed(&calls["fix"]);
    assert!(
        fix.starts_with(
            "Edited wordcount.py: 1 edit applied, +1 -1 lines, first change at line 6\n"
        ),
        "{fix}"
    );
    assert_eq!(cordon.read("wordcount.py"), module(fixed));
    let passing = completed(&calls["passing"]);
    assert!(
        passing.starts_with(".\n") && passing.ends_with("\n\nOK\n"),
        "{passing}"
    );

    assert_eq!(completed(&calls["served"]), module(fixed));
    assert_start_and_end_kept(completed(&calls["log"]));
    assert_eq!(completed(&calls["long"]), "done\n");
    assert_quiet(&stderr);
}

/// The README's Python quick start, run as it is written (with `cordon` on `PATH`, in a
/// workspace), prints exactly what the README shows after it.
#[test]
#[ignore = "network: installs the MCP Python SDK from PyPI"]
fn the_readmes_python_quick_start_prints_what_it_shows() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read the README");
    let section = readme
        .split_once("### Your own agent, with the Python SDK")
        .expect("the section")
        .1;
    let block = |after: &str, fence: &str| -> String {
        let start = after.find(fence).expect("a code block") + fence.len();
        let end = after[start..].find("\n```").expect("its end");
        after[start..start + end + 1].to_string()
    };
    let script = block(section, "```python\n");
    let shown = block(section, "```text\n");
    let cordon = Cordon::new();
    cordon.write("client.py", &script);
    // The SDK passes the server only HOME, PATH and a few more: the compile cache and its key
    // are reached through a home of the test's.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".cache")).unwrap();
    std::os::unix::fs::symlink(cache_dir(), home.path().join(".cache/cordon")).unwrap();
    std::os::unix::fs::symlink(crate::util::config_home(), home.path().join(".config")).unwrap();
    let bin = crate::util::binary();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(python())
        .arg("client.py")
        .current_dir(cordon.root())
        .env("PATH", path)
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, shown);
}

/// The error answer to malformed `tools/call` params quotes a short, marked prefix of them.
#[test]
fn malformed_call_params_are_quoted_short() {
    let big = "x".repeat(1 << 20);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": 12, "arguments": big}});
    let answers = Cordon::new().mcp(std::slice::from_ref(&call));
    let answer = &answers[0];
    assert!(answer.to_string().len() < 1024, "{answer}");
    let total = call["params"].to_string().len();
    assert_eq!(
        invalid_params(answer),
        format!(
            "Invalid tools/call params: expected {{\"name\": string, \"arguments\": object}}, got: {} … ({} more characters, {total} in all)",
            &call["params"].to_string()[..100],
            total - 100
        )
    );
}

over_stdio_and_http!(
    /// A client that asks for log messages (`logging/setLevel` in 2025-11-25, `_meta` in
    /// 2026-07-28) gets a line per call at `info`; one that does not, none.
    #[ignore = "network: installs the MCP Python SDK from PyPI"]
    log_messages_reach_a_client_that_asks_for_them,
    log_messages_reach_a_client_that_asks_for_them_over_http,
    log_messages
);

fn log_messages(over: Over) {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let out = drive(&cordon, "logged", "../unused", over, &[PLAIN]);
    let lines = |mode: &str| -> Vec<(String, String)> {
        out[mode]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["level"].as_str().unwrap().into(),
                    m["data"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    // Before the level was set nothing came; after, the failed read's line.
    assert_eq!(
        lines("legacy"),
        [("info".into(), "📖 read_file: missing.txt (failed)".into())],
        "{out:#}"
    );
    assert_eq!(
        lines("modern"),
        [("info".into(), "📖 read_file: a.txt (completed)".into())],
        "{out:#}"
    );
}

over_stdio_and_http!(
    /// The official TypeScript SDK (2025-11-25): ping after listing, an elicitation answered allow
    /// and reject, a call cancelled on the client's timeout that leaves no process, calls in
    /// parallel, progress, and a quiet standard error.
    #[ignore = "network: installs the MCP TypeScript SDK from npm"]
    the_typescript_sdk_asks_cancels_and_runs_calls_in_parallel,
    the_typescript_sdk_asks_cancels_and_runs_calls_in_parallel_over_http,
    typescript_sdk_calls
);

fn typescript_sdk_calls(over: Over) {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/integration/mcp_client.mjs");
    let (out, stderr) = run_client(&cordon, over, &[ASK, PLAIN], |config| {
        let mut command = Command::new("node");
        command
            .arg(&script)
            .arg(config.to_string())
            .env("CORDON_TS_SDK", typescript_sdk());
        command
    });

    assert!(
        out["tools"].as_array().unwrap().contains(&json!("bash")),
        "{out:#}"
    );
    assert_eq!(out["ping"], json!({"result": {}}), "{out:#}");
    assert_eq!(out["asked"].as_array().unwrap().len(), 2, "{out:#}");
    assert!(completed(&out["allowed"]).starts_with("Created ts1.txt"));
    assert_eq!(cordon.read("ts1.txt"), "one\n");
    assert_eq!(
        failed(&out["declined"]),
        "[write_file rejected by the user: nothing was written]"
    );
    assert!(!cordon.path("ts2.txt").exists());

    assert!(out["cancelled"]["error"].is_string(), "{out:#}");
    assert_long_calls(&out, "typescript");
    completed(&out["progress_call"]);
    assert_quiet(out["stderr"].as_str().unwrap());
    assert_quiet(&stderr);
}

/// `cordon mcp --http` lets in only requests with the token (401 otherwise, naming the
/// scheme), from its own origin or none and naming its own host (403 otherwise: DNS
/// rebinding), of a session it knows (404 otherwise), and of a bounded size (413 beyond).
#[test]
fn over_http_only_requests_with_the_token_an_allowed_origin_and_a_live_session_get_in() {
    let cordon = Cordon::new();
    let file = tempfile::NamedTempFile::new().unwrap();
    let token = "a-token-for-this-test-0123456789";
    std::fs::write(file.path(), format!("{token}\n")).unwrap();
    let server = HttpServer::start(
        &cordon,
        &["--http-token-file", file.path().to_str().unwrap()],
    );
    assert!(
        server.announced[1].contains(file.path().to_str().unwrap()),
        "{:?}",
        server.announced
    );
    let initialize = initialize();
    let initialize = initialize.as_bytes();
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());

    let anonymous = post(server.authority(), &[], initialize);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert_eq!(anonymous.header("WWW-Authenticate"), Some("Bearer"));
    let wrong = post(
        server.authority(),
        &[("Authorization", "Bearer not-the-token-0123456789")],
        initialize,
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");

    let foreign = post(
        server.authority(),
        &[auth, ("Origin", "http://evil.example.com")],
        initialize,
    );
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let rebound = post(
        server.authority(),
        &[auth, ("Host", "evil.example.com")],
        initialize,
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");

    let own = format!("http://{}", server.authority());
    let welcome = post(
        server.authority(),
        &[auth, ("Origin", own.as_str())],
        initialize,
    );
    assert_eq!(welcome.status, 200, "{welcome:?}");
    assert!(welcome.header("Mcp-Session-Id").is_some(), "{welcome:?}");
    assert!(welcome.body.contains(r#""name":"cordon""#), "{welcome:?}");

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let unknown = post(
        server.authority(),
        &[
            auth,
            ("Mcp-Session-Id", "no-such-session"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        list.as_bytes(),
    );
    assert_eq!(unknown.status, 404, "{unknown:?}");

    let huge = post(
        server.authority(),
        &[auth, ("Content-Length", "4194305")],
        b"",
    );
    assert_eq!(huge.status, 413, "{huge:?}");

    let (status, stderr) = server.stop();
    assert!(status.success(), "{status}: {stderr}");
}

/// An HTTP session that hears nothing for `--http-session-idle` seconds is closed: its id is
/// then unknown (404), and the client must start a new one.
#[test]
fn over_http_a_session_left_idle_is_closed() {
    let cordon = Cordon::new();
    let server = HttpServer::start(&cordon, &["--http-session-idle", "2"]);
    let bearer = format!("Bearer {}", server.token.as_deref().unwrap());
    let welcome = post(
        server.authority(),
        &[("Authorization", &bearer)],
        initialize().as_bytes(),
    );
    let session = welcome.header("Mcp-Session-Id").expect("a session");
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let answered = post(server.authority(), &headers, ping.as_bytes());
    assert_eq!(answered.status, 200, "{answered:?}");
    std::thread::sleep(Duration::from_secs(3));
    let expired = post(server.authority(), &headers, ping.as_bytes());
    assert_eq!(expired.status, 404, "{expired:?}");
    let (status, stderr) = server.stop();
    assert!(status.success(), "{status}: {stderr}");
}

/// An `initialize` request of the 2025-11-25 lifecycle, as text.
fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

/// `cordon mcp --http` listens beyond loopback only when told to, never without a token there,
/// and takes only a token file that holds a real token and origins that are origins; each
/// refusal says what to do.
#[test]
fn over_http_cordon_refuses_to_listen_wider_than_asked() {
    let cordon = Cordon::new();
    let short = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(short.path(), "short\n").unwrap();
    let short = short.path().to_str().unwrap();
    for (args, says) in [
        (
            &["--http", "0.0.0.0:8931"][..],
            "add --http-allow-remote to mean it",
        ),
        (
            &[
                "--http",
                "0.0.0.0:8931",
                "--http-allow-remote",
                "--http-no-auth",
            ],
            "--http-no-auth is accepted only on a loopback address",
        ),
        (
            &["--http", "127.0.0.1:0", "--http-token-file", short],
            "must hold a token of at least 16 visible ASCII characters",
        ),
        (
            &[
                "--http",
                "127.0.0.1:0",
                "--http-allow-origin",
                "example.com",
            ],
            "is not an origin: write scheme://host:port",
        ),
    ] {
        let mut full = vec!["mcp"];
        full.extend(args);
        let run = cordon.run(&full);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
}

/// SIGTERM ends `cordon mcp --http` at once and cleanly: the running call is cancelled, its
/// command killed, and the server exits with status 0.
#[test]
fn over_http_sigterm_cancels_the_running_calls_and_kills_their_commands() {
    let cordon = Cordon::new();
    let server = HttpServer::start(&cordon, &[]);
    let bearer = format!("Bearer {}", server.token.as_deref().unwrap());
    let authority = server.authority().to_string();
    let welcome = post(
        &authority,
        &[("Authorization", &bearer)],
        initialize().as_bytes(),
    );
    let session = welcome
        .header("Mcp-Session-Id")
        .expect("a session")
        .to_string();
    let headers = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let send = |message: Value| post(&authority, &headers, message.to_string().as_bytes());
    let initialized = send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    assert_eq!(initialized.status, 202, "{initialized:?}");

    let mark = marker("sigterm");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": format!("sleep 20; : {mark}")}}});
    std::thread::scope(|scope| {
        let answer = scope.spawn(|| send(call));
        let until = Instant::now() + Duration::from_secs(20);
        while wait_until_gone(&mark, Duration::ZERO).is_empty() {
            assert!(Instant::now() < until, "the command did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        // `stop` waits 10 s at most: the 20 s command did not hold the server up.
        let (status, stderr) = server.stop();
        assert!(status.success(), "{status}: {stderr}");
        assert_eq!(
            wait_until_gone(&mark, Duration::from_secs(2)),
            Vec::<u32>::new()
        );
        // The call's stream ended with the server, the command's output never in it.
        assert!(!answer.join().unwrap().body.contains("\"result\""));
    });
}

/// The official conformance suite's server scenarios that apply to a server of tools only
/// (with logging, over Streamable HTTP) pass against `cordon mcp --http`, without a token: the
/// suite cannot send one. The README says why the others do not apply.
#[test]
#[ignore = "network: installs node 22 and the MCP conformance suite from npm"]
fn the_conformance_suites_server_scenarios_pass_over_http() {
    let bin = conformance_bin();
    let cordon = Cordon::new();
    let server = HttpServer::start(&cordon, &["--http-no-auth"]);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "dns-rebinding-protection",
        "logging-set-level",
        "server-sse-multiple-streams",
        "server-sse-polling",
    ] {
        let run = Command::new(bin.join("node"))
            .arg(bin.join("conformance"))
            .args(["server", "--url", &server.url, "--scenario", scenario])
            .env("PATH", &path)
            .output()
            .expect("run the conformance suite");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success(),
            "{scenario}: {}\n{stdout}\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let (status, stderr) = server.stop();
    assert!(status.success(), "{status}: {stderr}");
}
