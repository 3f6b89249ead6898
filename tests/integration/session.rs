//! The agent-facing rules: `cordon session`'s protocol, the loop detector, the display, turn
//! counters, permissions and the ACP view of each call.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::host::{marker, wait_until_gone};
use crate::util::{Cordon, Live};

/// Runs a session over `lines` (one request each) and returns the response lines.
fn session(cordon: &Cordon, lines: &[Value]) -> Vec<Value> {
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    cordon.session(input)
}

fn call(tool: &str, input: Value) -> Value {
    json!({"tool": tool, "input": input})
}

#[test]
fn a_call_reports_status_output_display_and_acp_and_echoes_the_id() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    let out = session(
        &cordon,
        &[json!({"id": "r1", "tool": "read_file", "input": {"path": "a.txt"}})],
    );
    let r = &out[0];
    assert_eq!(r["id"], "r1");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["output"], "one\ntwo\n");
    assert_eq!(r["display"], "📖 read_file: a.txt\n  one\n  two");
    assert_eq!(r["acp"]["kind"], "read");
    assert_eq!(r["acp"]["status"], "completed");
    assert_eq!(r["acp"]["title"], "read_file: a.txt");
    let location = cordon.path("a.txt");
    assert_eq!(r["acp"]["locations"][0]["path"], location.to_str().unwrap());
}

#[test]
fn malformed_lines_get_an_error_and_the_session_goes_on() {
    let cordon = Cordon::new();
    let input = "not json\n[1,2]\n{\"id\": 5, \"what\": 1}\n{\"tool\": 3}\n\n{\"id\": 6, \"end_turn\": true}\n";
    let out = cordon.session(input);
    assert_eq!(out.len(), 5, "{out:?}");
    for r in &out[..4] {
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    }
    assert_eq!(out[2]["id"], 5);
    assert_eq!(out[4]["id"], 6);
    assert!(out[4]["counters"].is_object());
}

#[test]
fn a_line_that_is_not_utf8_gets_an_error_and_the_session_goes_on() {
    let cordon = Cordon::new();
    let input = b"{\"id\": 1, \"tool\": \"\xff\xfe\"}\n{\"id\": 2, \"end_turn\": true}\n";
    let out = cordon.session(input);
    refused_then_answered(&out, "the line is not UTF-8 text: invalid utf-8 sequence");
    assert!(out[1]["counters"].is_object());
}

/// `out` is an error that starts with `error`, then the answer to the next line (id 2).
fn refused_then_answered(out: &[Value], error: &str) {
    assert_eq!(out.len(), 2, "{out:?}");
    let got = out[0]["error"].as_str().unwrap_or_default();
    assert!(got.starts_with(error), "{got}");
    assert_eq!(out[1]["id"], 2);
}

/// Error answers quote a short, marked prefix of bad input, never all of it.
#[test]
fn the_error_answer_to_a_huge_bad_line_is_short_and_names_its_length() {
    let cordon = Cordon::new();
    let big = "x".repeat(50 << 20);
    let lines = [
        format!("\"{big}\""),
        format!("{{\"tool\": [\"{big}\"]}}"),
        "{\"id\": 3, \"end_turn\": true}".to_string(),
    ];
    let run = cordon.run_with_stdin(&["session"], lines.join("\n"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(out.len(), 3, "{} bytes of output", run.stdout.len());
    assert_eq!(serde_json::from_str::<Value>(out[2]).unwrap()["id"], 3);
    for (answer, line) in out.iter().zip(&lines[..2]) {
        assert!(answer.len() < 1024, "{} bytes", answer.len());
        let error: Value = serde_json::from_str(answer).unwrap();
        let error = error["error"].as_str().unwrap();
        // What is quoted: the line itself, or its "tool" (the line less `{"tool": ` and `}`).
        let total = if line.starts_with('"') {
            line.len()
        } else {
            line.len() - 10
        };
        assert!(error.contains(&format!("{total} in all)")), "{error}");
        assert!(error.contains(" … ("), "{error}");
    }
}

/// A call larger than an input may be is refused before it is parsed, nothing is written, and
/// the session goes on.
#[test]
fn a_line_over_the_input_limit_is_refused_and_the_session_goes_on() {
    let cordon = Cordon::new();
    let content = "a".repeat(65 << 20);
    let lines = [
        call("write_file", json!({"path": "big.txt", "content": content})).to_string(),
        json!({"id": 2, "end_turn": true}).to_string(),
    ];
    let out = cordon.session(lines.join("\n"));
    refused_then_answered(
        &out,
        "the line is 65.0 MiB, more than the 64 MiB a request may carry",
    );
    assert!(!cordon.path("big.txt").exists(), "nothing was written");
}

/// An unknown tool name is bad input too: the answer shows a short, marked prefix of it.
#[test]
fn the_answer_to_a_huge_unknown_tool_name_is_short() {
    let cordon = Cordon::new();
    let name = "x".repeat(1 << 20);
    let run = cordon.run_with_stdin(&["session"], call(&name, json!({})).to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.len() < 2048, "{} bytes", run.stdout.len());
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    let quoted = format!(
        "{} … ({} more characters, {} in all)",
        &name[..100],
        name.len() - 100,
        name.len()
    );
    assert_eq!(answer["status"], "failed");
    assert!(
        answer["output"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Unknown tool \"{quoted}\". Declared tools: ")),
        "{answer}"
    );
    let display = answer["display"].as_str().unwrap();
    assert!(display.starts_with(&format!("❓ {quoted}\n")), "{display}");
    assert_eq!(answer["acp"]["title"], quoted);
}

#[test]
fn end_of_input_ends_the_session_with_status_0() {
    let run = Cordon::new().run_with_stdin(&["session"], "");
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "");
}

#[test]
fn the_loop_detector_fires_on_the_third_identical_call() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "x\n");
    let read = call("read_file", json!({"path": "a.txt"}));
    let out = session(&cordon, &[read.clone(), read.clone(), read.clone()]);
    assert!(!out[0]["output"].as_str().unwrap().contains("LOOP_DETECTED"));
    assert!(!out[1]["output"].as_str().unwrap().contains("LOOP_DETECTED"));
    let third = out[2]["output"].as_str().unwrap();
    assert!(third.starts_with("x\n[LOOP_DETECTED: "), "{third}");
}

#[test]
fn a_different_call_in_between_resets_the_loop_detector() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "x\n");
    cordon.write("b.txt", "y\n");
    let a = call("read_file", json!({"path": "a.txt"}));
    let b = call("read_file", json!({"path": "b.txt"}));
    let out = session(&cordon, &[a.clone(), a.clone(), b, a.clone(), a.clone()]);
    for r in &out {
        assert!(
            !r["output"].as_str().unwrap().contains("LOOP_DETECTED"),
            "{r}"
        );
    }
}

#[test]
fn a_different_output_resets_the_loop_detector() {
    let cordon = Cordon::new();
    let run = call("bash", json!({"command": "echo $RANDOM$RANDOM"}));
    let out = session(&cordon, &[run.clone(), run.clone(), run.clone()]);
    for r in &out {
        assert!(
            !r["output"].as_str().unwrap().contains("LOOP_DETECTED"),
            "{r}"
        );
    }
}

#[test]
fn display_shows_preview_lines_or_no_output() {
    let cordon = Cordon::new().with_args(&["--preview-lines", "2"]);
    let out = session(
        &cordon,
        &[
            call("bash", json!({"command": "printf 'a\\nb\\nc\\n'"})),
            call("bash", json!({"command": "true"})),
        ],
    );
    assert_eq!(
        out[0]["display"],
        "🛠️ bash: printf 'a\\nb\\nc\\n'\n  a\n  b\n  … (1 more lines)"
    );
    assert_eq!(out[1]["display"], "🛠️ bash: true\n  (no output)");
}

#[test]
fn call_display_goes_to_stderr_dimmed_only_on_a_terminal() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "hello\n");
    let run = cordon.run(&["call", "--display", "read_file", r#"{"path": "a.txt"}"#]);
    assert_eq!(run.stdout, "hello\n");
    assert!(
        run.stderr.contains("📖 read_file: a.txt\n  hello\n"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains('\x1b'),
        "no ANSI off a terminal: {:?}",
        run.stderr
    );
    let quiet = cordon.run(&["call", "read_file", r#"{"path": "a.txt"}"#]);
    assert!(!quiet.stderr.contains("read_file"), "{}", quiet.stderr);
}

#[test]
fn counters_count_per_turn_with_singular_and_plural() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "x\n");
    let out = session(
        &cordon,
        &[
            call("bash", json!({"command": "true"})),
            call("bash", json!({"command": "true"})),
            call("read_file", json!({"path": "a.txt"})),
            json!({"end_turn": true}),
            call("bash", json!({"command": "true"})),
            call("write_file", json!({"path": "b.txt", "content": "b"})),
            call(
                "edit_file",
                json!({"path": "b.txt", "edits": [{"old": "b", "new": "c"}]}),
            ),
            json!({"end_turn": true}),
            json!({"end_turn": true}),
        ],
    );
    assert_eq!(
        out[3]["counters"],
        json!({"commands": 2, "file_ops": 1, "skills": 0})
    );
    assert_eq!(out[3]["display"], "⚙ 2 commands  📝 1 file op");
    assert_eq!(
        out[7]["counters"],
        json!({"commands": 1, "file_ops": 2, "skills": 0})
    );
    assert_eq!(out[7]["display"], "⚙ 1 command  📝 2 file ops");
    assert_eq!(out[8]["display"], "");
}

#[test]
fn skills_have_a_counter_of_their_own() {
    let skills = tempfile::tempdir().unwrap();
    std::fs::write(skills.path().join("deploy.md"), "# Deploy\n").unwrap();
    let cordon = Cordon::new().with_args(&["--skills", skills.path().to_str().unwrap()]);
    let out = session(
        &cordon,
        &[
            call("read_skill", json!({"name": "deploy"})),
            json!({"end_turn": true}),
        ],
    );
    assert_eq!(
        out[0]["display"], "📖 read_skill: deploy",
        "the skill is not echoed"
    );
    assert_eq!(out[1]["display"], "📖 1 skill");
}

#[test]
fn deny_refuses_commands_and_edits_but_not_reads() {
    let cordon = Cordon::new().with_args(&["--permissions", "deny"]);
    cordon.write("a.txt", "x\n");
    let out = session(
        &cordon,
        &[
            call("bash", json!({"command": "touch ran"})),
            call("write_file", json!({"path": "new.txt", "content": "x"})),
            call(
                "edit_file",
                json!({"path": "a.txt", "edits": [{"old": "x", "new": "y"}]}),
            ),
            call("read_file", json!({"path": "a.txt"})),
        ],
    );
    assert_eq!(out[0]["output"], "[command rejected by the user]");
    assert_eq!(out[0]["status"], "failed");
    assert_eq!(out[1]["status"], "failed");
    assert!(
        out[1]["output"]
            .as_str()
            .unwrap()
            .contains("rejected by the user")
    );
    assert_eq!(out[2]["status"], "failed");
    assert_eq!(out[3]["status"], "completed");
    assert!(!cordon.path("ran").exists());
    assert!(!cordon.path("new.txt").exists());
    assert_eq!(cordon.read("a.txt"), "x\n");
}

#[test]
fn ask_sends_the_diff_and_honours_each_answer() {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    cordon.write("a.txt", "old\n");
    let mut live = Live::start(&cordon);

    live.send(
        json!({"id": 1, "tool": "write_file", "input": {"path": "new.txt", "content": "hi\n"}}),
    );
    let request = live.receive();
    assert_eq!(request["id"], 1);
    let tool_call = &request["permission_request"];
    assert_eq!(tool_call["kind"], "edit");
    let diff = &tool_call["content"][0];
    assert_eq!(diff["type"], "diff");
    assert_eq!(diff["path"], cordon.path("new.txt").to_str().unwrap());
    assert!(
        diff.get("oldText").is_none_or(Value::is_null),
        "a new file has no old text"
    );
    assert_eq!(diff["newText"], "hi\n");
    let options: Vec<&str> = request["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        options,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    assert!(
        !cordon.path("new.txt").exists(),
        "nothing is written before the answer"
    );
    live.send(json!({"permission": "reject_once"}));
    let refused = live.receive();
    assert_eq!(refused["status"], "failed");
    assert!(!cordon.path("new.txt").exists());

    live.send(json!({"tool": "edit_file", "input": {"path": "a.txt", "edits": [{"old": "old", "new": "new"}]}}));
    let request = live.receive();
    let diff = &request["permission_request"]["content"][0];
    assert_eq!(diff["oldText"], "old\n");
    assert_eq!(diff["newText"], "new\n");
    assert_eq!(cordon.read("a.txt"), "old\n");
    live.send(json!({"permission": "allow_once"}));
    assert_eq!(live.receive()["status"], "completed");
    assert_eq!(cordon.read("a.txt"), "new\n");

    live.send(json!({"tool": "bash", "input": {"command": "echo ran"}}));
    let request = live.receive();
    assert_eq!(request["permission_request"]["kind"], "execute");
    live.send(json!({"permission": "allow_always"}));
    assert_eq!(live.receive()["output"], "ran\n");
    live.send(json!({"tool": "bash", "input": {"command": "echo again"}}));
    assert_eq!(
        live.receive()["output"],
        "again\n",
        "always holds for the session"
    );

    live.send(json!({"tool": "write_file", "input": {"path": "b.txt", "content": "b"}}));
    live.receive();
    live.send(json!({"permission": "reject_always"}));
    assert_eq!(live.receive()["status"], "failed");
    live.send(json!({"tool": "write_file", "input": {"path": "c.txt", "content": "c"}}));
    let refused = live.receive();
    assert_eq!(
        refused["status"], "failed",
        "reject_always holds: {refused}"
    );
    assert!(!cordon.path("b.txt").exists() && !cordon.path("c.txt").exists());
    live.finish();
}

/// An answer that is no answer, or not even text, refuses its call with an error line that
/// quotes it, and the session goes on.
#[test]
fn a_bad_permission_answer_refuses_the_call() {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    let mut live = Live::start(&cordon);
    let answers: [(&[u8], &str); 2] = [
        (
            b"{\"permission\": \"sure\"}\n",
            "got: {\"permission\": \"sure\"}",
        ),
        (
            b"{\"permission\": \"allow_once\xff\"}\n",
            "got: the line is not UTF-8 text: invalid utf-8 sequence",
        ),
    ];
    for (answer, got) in answers {
        live.send(json!({"tool": "bash", "input": {"command": "touch ran"}}));
        assert!(live.receive()["permission_request"].is_object());
        live.send_raw(answer);
        let error = live.receive();
        let error = error["error"].as_str().unwrap_or_default();
        assert!(
            error.contains(got) && error.ends_with("; the call is refused"),
            "{error}"
        );
        assert_eq!(live.receive()["output"], "[command rejected by the user]");
    }
    assert!(!cordon.path("ran").exists());
    live.finish();
}

#[test]
fn ask_without_a_terminal_refuses_a_one_shot_call() {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    let mut command = cordon.command();
    command.args(["call", "bash", r#"{"command": "touch ran"}"#]);
    // A new session has no controlling terminal, so there is nobody to ask.
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let run = command.output().unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "[command refused: it needs the user's permission, and nobody could be asked]"
    );
    assert!(!cordon.path("ran").exists());
}

#[test]
fn the_display_field_shows_control_characters_as_escapes_and_the_output_keeps_them() {
    let cordon = Cordon::new();
    let command = "printf 'a\\033[2Jb\\n' # \u{202e}x";
    let out = session(&cordon, &[call("bash", json!({ "command": command }))]);
    assert_eq!(out[0]["output"], "a\x1b[2Jb\n");
    assert_eq!(
        out[0]["display"],
        "🛠️ bash: printf 'a\\033[2Jb\\n' # \\u{202e}x\n  a\\x1b[2Jb"
    );
}

#[test]
fn acp_view_of_an_edit_carries_old_and_new_text_and_the_absolute_path() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\ntwo\n");
    let out = session(
        &cordon,
        &[call(
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old": "two", "new": "2"}]}),
        )],
    );
    let acp = &out[0]["acp"];
    assert_eq!(acp["kind"], "edit");
    assert_eq!(acp["status"], "completed");
    let path = cordon.path("a.txt");
    assert_eq!(acp["locations"][0]["path"], path.to_str().unwrap());
    assert_eq!(acp["content"][0]["type"], "diff");
    assert_eq!(acp["content"][0]["oldText"], "one\ntwo\n");
    assert_eq!(acp["content"][0]["newText"], "one\n2\n");
    assert_eq!(acp["rawInput"]["path"], "a.txt");
}

/// Runs `cordon <args>` on a pseudo-terminal (util-linux `script`), typing `typed`, and
/// returns everything the terminal showed.
fn on_terminal(cordon: &Cordon, args: &[&str], typed: &str, no_color: bool) -> String {
    let program = cordon.command();
    let mut line = vec![program.get_program().to_string_lossy().into_owned()];
    line.extend(program.get_args().map(|a| a.to_string_lossy().into_owned()));
    line.extend(args.iter().map(|a| a.to_string()));
    let quoted: Vec<String> = line
        .iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let mut script = std::process::Command::new("script");
    script
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("CORDON_CACHE_DIR", crate::util::cache_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if no_color {
        script.env("NO_COLOR", "1");
    } else {
        script.env_remove("NO_COLOR");
    }
    let mut child = script.spawn().expect("util-linux script runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(typed.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

#[test]
fn on_a_terminal_the_preview_is_dimmed_unless_no_color() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "hello\n");
    let args = ["call", "--display", "read_file", r#"{"path": "a.txt"}"#];
    let shown = on_terminal(&cordon, &args, "", false);
    assert!(
        shown.contains("📖 read_file: a.txt\n\x1b[2m  hello\x1b[0m"),
        "{shown:?}"
    );
    let plain = on_terminal(&cordon, &args, "", true);
    assert!(plain.contains("📖 read_file: a.txt\n  hello"), "{plain:?}");
    assert!(!plain.contains("\x1b[2m"), "{plain:?}");
}

#[test]
fn ask_on_a_terminal_shows_the_diff_and_takes_the_answer() {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    let write = [
        "call",
        "write_file",
        r#"{"path": "t.txt", "content": "hi\n"}"#,
    ];
    let shown = on_terminal(&cordon, &write, "n\n", true);
    assert!(shown.contains("would create t.txt"), "{shown:?}");
    assert!(shown.contains("Allow this call?"), "{shown:?}");
    assert!(!cordon.path("t.txt").exists());
    on_terminal(&cordon, &write, "y\n", true);
    assert_eq!(cordon.read("t.txt"), "hi\n");
}

#[test]
fn a_cancel_line_kills_the_running_command_and_the_session_goes_on() {
    let cordon = Cordon::new();
    cordon.write("a.txt", "one\n");
    let mark = marker("cancel");
    let mut live = Live::start(&cordon);
    live.send(
        json!({"id": "slow", "tool": "bash", "input": {"command": format!("sleep 20; : {mark}")}}),
    );
    let until = Instant::now() + Duration::from_secs(20);
    while wait_until_gone(&mark, Duration::ZERO).is_empty() {
        assert!(Instant::now() < until, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A line read while the call runs waits its turn; the cancel stops the call at once.
    live.send(json!({"id": 2, "tool": "read_file", "input": {"path": "a.txt"}}));
    live.send(json!({"cancel": "slow"}));
    assert_eq!(live.receive(), json!({"id": "slow", "status": "cancelled"}));
    let next = live.receive();
    assert_eq!(
        (next["id"].clone(), next["output"].clone()),
        (json!(2), json!("one\n"))
    );
    assert_eq!(
        wait_until_gone(&mark, Duration::from_secs(2)),
        Vec::<u32>::new()
    );
    // Nothing runs by that id any more.
    live.send(json!({"cancel": "slow"}));
    let error = live.receive();
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("no call with the id \"slow\" is running"),
        "{error}"
    );
    live.finish();
}

#[test]
fn a_cancelled_plugin_call_is_stopped_while_its_guest_spins() {
    let (cordon, _dir) = crate::plugins::hostile("");
    let mut live = Live::start(&cordon);
    live.send(json!({"id": 1, "tool": "spin", "input": {}}));
    std::thread::sleep(Duration::from_millis(300));
    live.send(json!({"cancel": 1}));
    assert_eq!(live.receive(), json!({"id": 1, "status": "cancelled"}));
    // The guest no longer runs: cordon burns no CPU, where the spin, left to its 10 s
    // deadline, would burn a core.
    let before = cpu_time(live.child.id());
    std::thread::sleep(Duration::from_secs(1));
    let burnt = cpu_time(live.child.id()) - before;
    assert!(
        burnt < Duration::from_millis(250),
        "cordon used {burnt:?} of CPU"
    );
    live.send(json!({"id": 2, "tool": "env", "input": {}}));
    assert_eq!(live.receive()["status"], "completed");
    live.finish();
}

/// The CPU time process `pid` has used, user and system.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: a plain sysconf.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// A call that asks for it gets the lines its command prints while it runs, each message
/// echoing its id, before its answer, which is as without.
#[test]
fn a_call_may_stream_its_output_lines_before_its_answer() {
    let c = Cordon::new();
    let out = session(
        &c,
        &[
            json!({"id": 7, "stream": true, "tool": "bash",
                   "input": {"command": "for i in 1 2 3; do echo tick $i; sleep 0.4; done"}}),
            json!({"id": 8, "stream": "yes", "tool": "bash", "input": {"command": "true"}}),
        ],
    );
    let (answers, streamed): (Vec<&Value>, Vec<&Value>) = out
        .iter()
        .partition(|line| line.get("output_lines").is_none());
    let lines: Vec<&str> = (streamed.iter())
        .inspect(|line| assert_eq!(line["id"], 7, "{line}"))
        .flat_map(|line| line["output_lines"].as_array().unwrap())
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(lines.starts_with(&["tick 1", "tick 2"]), "{out:?}");
    assert_eq!(answers[0]["output"], "tick 1\ntick 2\ntick 3\n", "{out:?}");
    assert_eq!(answers[0]["status"], "completed");
    assert!(
        answers[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("\"stream\" must be true or false, got: \"yes\""),
        "{out:?}"
    );
}

/// A call that ran a command says how it ended in `exit`, which a command's own output cannot
/// forge: a command that exits 0 after printing a trailer's text still reports code 0.
#[test]
fn a_call_that_ran_a_command_reports_how_it_ended() {
    let c = Cordon::new().with_args(&["--timeout", "1"]);
    let out = session(
        &c,
        &[
            call(
                "bash",
                json!({"command": "printf '[exit code: exit status 3]'"}),
            ),
            call("bash", json!({"command": "exit 3"})),
            call("bash", json!({"command": "kill -TERM $$"})),
            call("bash", json!({"command": "sleep 5"})),
            call("read_file", json!({"path": c.write("a.txt", "a\n")})),
        ],
    );
    assert_eq!(out[0]["output"], out[1]["output"], "{out:?}");
    assert_eq!(out[0]["exit"], json!({"code": 0}), "{out:?}");
    assert_eq!(out[1]["exit"], json!({"code": 3}), "{out:?}");
    assert_eq!(out[2]["exit"], json!({"signal": "SIGTERM"}), "{out:?}");
    assert_eq!(out[3]["exit"], json!({"timeout": 1}), "{out:?}");
    assert!(out[4].get("exit").is_none(), "{out:?}");
}
