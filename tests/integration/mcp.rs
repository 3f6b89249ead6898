//! `cordon mcp`, driven by the official MCP Python client (`mcp` from PyPI, in the test venv)
//! through tests/integration/mcp_client.py, and by hand for the wire itself.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::node::typescript_sdk;
use crate::python::python;
use crate::util::{Cordon, cache_dir};

/// Runs mcp_client.py `scenario` against `cordon mcp` in `cordon`'s workspace (with its global
/// options) and returns what the client saw. `outside` is a path, relative to the workspace,
/// that leads out of it.
fn drive(cordon: &Cordon, scenario: &str, outside: &str) -> Value {
    drive_with_stderr(cordon, scenario, outside).0
}

/// [`drive`], and what was written to standard error: cordon's, which the client passes on.
fn drive_with_stderr(cordon: &Cordon, scenario: &str, outside: &str) -> (Value, String) {
    let mut config = client_config(cordon);
    config["outside"] = outside.into();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/integration/mcp_client.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(config.to_string())
        .arg(scenario)
        .output()
        .expect("run mcp_client.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "mcp_client.py {scenario} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let seen = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("mcp_client.py printed no JSON ({e}):\n{stdout}\n{stderr}"));
    (seen, stderr.into_owned())
}

/// How a client script starts `cordon mcp`: the binary, the same options every other test's
/// `cordon` gets (--workspace and the extra ones), and the environment.
fn client_config(cordon: &Cordon) -> Value {
    let args: Vec<String> = cordon
        .command()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    json!({
        "cordon": env!("CARGO_BIN_EXE_cordon"),
        "args": args,
        "env": {"CORDON_CACHE_DIR": cache_dir()},
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

#[test]
fn the_official_python_client_lists_and_calls_every_tool() {
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
    let out = drive(&cordon, "tools", &outside);
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

#[test]
fn ask_permission_goes_through_elicitation_and_fails_closed_without_it() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    let out = drive(&cordon, "ask", "../unused");

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

/// In both lifecycles: a call the client cancels (on its own one-second timeout) kills its
/// command at once and the next call is answered at once; four one-second commands sent
/// together run together; a long command reports progress; and standard error stays silent.
#[test]
fn cancelled_parallel_and_long_calls_behave_as_agents_need() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    for edited in ["legacy.txt", "modern.txt"] {
        cordon.write(edited, "a\nb\nc\nd\n");
    }
    let (out, stderr) = drive_with_stderr(&cordon, "long", "../unused");
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

/// A client that asks for log messages (`logging/setLevel` in 2025-11-25, `_meta` in
/// 2026-07-28) gets a line per call at `info`; one that does not, none.
#[test]
fn log_messages_reach_a_client_that_asks_for_them() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let out = drive(&cordon, "logged", "../unused");
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

/// The official TypeScript SDK (2025-11-25): ping after listing, an elicitation answered allow
/// and reject, a call cancelled on the client's timeout that leaves no process, calls in
/// parallel, progress, and a quiet standard error.
#[test]
fn the_typescript_sdk_asks_cancels_and_runs_calls_in_parallel() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let config = client_config(&cordon);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/integration/mcp_client.mjs");
    let run = Command::new("node")
        .arg(&script)
        .arg(config.to_string())
        .env("CORDON_TS_SDK", typescript_sdk())
        .output()
        .expect("run node (install node and npm)");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "mcp_client.mjs failed ({})\n{stdout}\n{}",
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let out: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));

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
}
