//! The `bash` tool through the real binary: statuses, the timeout and process-tree kill, the
//! description, bounds of the output and the settings that widen the confinement. What the
//! confined shell does on its own (output, standard input, what a command may read, write and
//! reach) is tested in the sandbox crate, sandbox/tests/shell.

use std::io::Read;
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::host::{marker, sleeper, wait_until_gone};
use crate::util::{Cordon, Run};

/// The line after a timeout's trailer when commands may be given up to 600 s (the default).
pub const MORE_TIME: &str = "[to give the command more time, call bash again with \"timeout\": \
                             SECONDS in its input, at most 600]";

fn bash(cordon: &Cordon, command: &str) -> Run {
    cordon.call("bash", json!({ "command": command }))
}

/// A first call, so that a timed call does not include compiling the plugins (the compile
/// cache is cold in the first test of a build).
fn warm_up(cordon: &Cordon) {
    assert_eq!(bash(cordon, "echo warm").stdout, "warm\n");
}

/// A command that ran did the tool's job whatever its status: the call completed (exit status
/// 0 of `cordon call`, status `completed` in a session), and the trailer says how it ended.
#[test]
fn exit_codes_and_signals_are_reported() {
    let c = Cordon::new();
    let run = bash(&c, "echo partial; exit 3");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "partial\n[exit code: exit status 3]");
    let run = bash(&c, "kill -9 $$");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .ends_with("[exit code: killed by signal SIGKILL]"),
        "{run:?}"
    );
    let out = c.session(format!(
        "{}\n",
        json!({"tool": "bash", "input": {"command": "exit 2"}})
    ));
    assert_eq!(out[0]["output"], "[exit code: exit status 2]");
    assert_eq!(out[0]["status"], "completed");
    assert_eq!(out[0]["acp"]["status"], "completed");
}

#[test]
fn the_timeout_kills_the_whole_tree() {
    let c = Cordon::new().with_args(&["--timeout", "2"]);
    let mark = marker("tree");
    let sleeper = sleeper(&mark);
    let command = format!(
        "{sleeper} & setsid {sleeper} & ( {sleeper} & ); setsid -f {sleeper}; \
         nohup sh -c \"trap '' TERM HUP INT; sleep 100; : {mark}\" >/dev/null 2>&1 & \
         sleep 0.3; echo \"running $(ps -eo args | grep -c ': {mark}$')\"; sleep 100"
    );
    warm_up(&c);
    let started = Instant::now();
    let run = bash(&c, &command);
    let took = started.elapsed();
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!("running 5\n[error: 2s timeout exceeded]\n{MORE_TIME}")
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert_eq!(
        wait_until_gone(&mark, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

/// A call may ask for a longer timeout, up to `--max-timeout` (or the config file's
/// `max_timeout`); the timeout's trailer says how to ask for more, or that it had the most.
#[test]
fn a_call_may_ask_for_a_longer_timeout_up_to_the_maximum() {
    let c = Cordon::new().with_args(&["--timeout", "1", "--max-timeout", "2"]);
    warm_up(&c);
    let timed = |command: &str, timeout: u32| {
        c.call("bash", json!({"command": command, "timeout": timeout}))
    };
    let run = timed("sleep 1.3; echo done", 2);
    assert_eq!((run.code, run.stdout.as_str()), (0, "done\n"), "{run:?}");
    let run = bash(&c, "sleep 1.3; echo done");
    assert_eq!(
        run.stdout,
        "[error: 1s timeout exceeded]\n[to give the command more time, call bash again with \
         \"timeout\": SECONDS in its input, at most 2]"
    );
    let run = timed("echo started; sleep 5", 2);
    assert_eq!(
        run.stdout,
        "started\n[error: 2s timeout exceeded]\n[2s is the most time a command may be given: \
         split the work into shorter commands]"
    );
    let run = timed("echo ran", 3);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stdout,
        "[error: bash could not run: a timeout of 3 s was asked for; a command may be given 1 to \
         2 s (the user's --max-timeout): ask for 2 or less, or split the work]"
    );
    let run = timed("echo ran", 0);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (
            1,
            "Invalid input for bash: timeout: 0 is less than the minimum of 1"
        )
    );

    // In a session, each command has its own timeout; the next one has the usual again.
    let out = c.session(
        [
            json!({"tool": "bash", "input": {"command": "sleep 1.3; echo long", "timeout": 2}}),
            json!({"tool": "bash", "input": {"command": "sleep 1.3; echo usual"}}),
        ]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>(),
    );
    assert_eq!(out[0]["output"], "long\n");
    assert!(
        out[1]["output"]
            .as_str()
            .unwrap()
            .starts_with("[error: 1s timeout exceeded]\n"),
        "{}",
        out[1]
    );

    // The config file's maximum; the command line's wins over it.
    let user = tempfile::tempdir().unwrap();
    let config = user.path().join("config.toml");
    std::fs::write(&config, "[bash]\nmax_timeout = 2\n").unwrap();
    let config = config.to_str().unwrap();
    let c = Cordon::new().with_args(&["--timeout", "1", "--config", config]);
    let run = c.call(
        "bash",
        json!({"command": "sleep 1.3; echo done", "timeout": 2}),
    );
    assert_eq!(run.stdout, "done\n", "{run:?}");
    let narrower =
        Cordon::new().with_args(&["--timeout", "1", "--config", config, "--max-timeout", "1"]);
    let run = narrower.call("bash", json!({"command": "echo ran", "timeout": 2}));
    assert_eq!(run.code, 1, "{run:?}");
    std::fs::write(user.path().join("config.toml"), "[bash]\nmax_timeout = 0\n").unwrap();
    let run = c.call("bash", json!({"command": "echo ran"}));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("max_timeout = 0 in [bash]"), "{run:?}");
}

/// What the model reads about bash (`cordon tools`, MCP's `tools/list`) is built from the
/// settings in force: the timeout and the most, files, network, limits, programs on `PATH`
/// (a toolchain's too) and what lasts between calls.
#[test]
fn the_description_states_the_settings_in_force() {
    let description = |c: &Cordon| -> String {
        let run = c.run(&["tools", "--json"]);
        assert_eq!(run.code, 0, "{run:?}");
        let tools: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let bash = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "bash");
        bash.unwrap()["description"].as_str().unwrap().to_string()
    };
    let plain = description(&Cordon::new().with_args(&["--bash-home", "private"]));
    for said in [
        "a command is killed after 30 seconds, with everything it started. For a longer build \
         or test run, add \"timeout\": SECONDS to the input (at most 600).",
        "- Network: none. No host can be reached",
        "- Limits: 4096 MiB of memory for all of a command's processes together",
        "at most 512 processes and threads at once.",
        "- Programs: the system's (/usr/bin, /bin) only.",
        "- What lasts between calls: the workspace and not HOME, which is empty at every call; \
         /tmp lasts as long as the session.",
        "The loopback works: a server a command starts on 127.0.0.1 answers its clients \
         within the same command.",
    ] {
        assert!(plain.contains(said), "{said:?} not in {plain}");
    }

    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    crate::util::script(&h.join(".cargo/bin/cargo"), "cargo 1.95.0-fake");
    let extra = tempfile::tempdir().unwrap();
    let extra = extra.path().to_str().unwrap();
    let c = Cordon::new()
        .with_args(&[
            "--toolchains",
            "--timeout",
            "45",
            "--max-timeout",
            "90",
            "--allow-domain",
            "pkg.test:8080",
            "--add-host",
            "pkg.test=127.0.0.1",
            "--bash-memory",
            "512",
            "--bash-max-processes",
            "64",
            "--bash-write",
            extra,
        ])
        .with_env("HOME", &h)
        .with_env("CARGO_HOME", h.join(".cargo"))
        .with_env("RUSTUP_HOME", h.join(".rustup"))
        .with_env("PYENV_ROOT", h.join(".pyenv"))
        .with_env("NVM_DIR", h.join(".nvm"))
        .with_env("GOPATH", h.join("go"))
        .with_env("XDG_CONFIG_HOME", crate::util::config_home());
    let set = description(&c);
    for said in [
        "killed after 45 seconds".to_string(),
        "(at most 90)".into(),
        "cordon's proxy, which HTTP_PROXY and HTTPS_PROXY name".into(),
        ": pkg.test:8080. Any other host is refused. The command's own loopback works".into(),
        "512 MiB of memory".into(),
        "at most 64 processes".into(),
        format!("before them on PATH: {}/.cargo/bin.", h.display()),
        format!(", {extra}; nothing else of the machine."),
        "the workspace and HOME (/home/cordon), where tools keep their caches".into(),
    ] {
        assert!(set.contains(&said), "{said:?} not in {set}");
    }
    let at_most =
        description(&Cordon::new().with_args(&["--timeout", "60", "--max-timeout", "60"]));
    assert!(
        at_most.contains("No command may be given more: split long work into shorter commands."),
        "{at_most}"
    );

    // MCP clients read the same text.
    let answers = c.mcp(&[json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})]);
    let listed = answers[0]["result"]["tools"].as_array().unwrap();
    let bash = listed.iter().find(|t| t["name"] == "bash").unwrap();
    assert_eq!(bash["description"], set);
    assert_eq!(
        bash["inputSchema"]["properties"]["timeout"]["minimum"], 1,
        "{bash}"
    );
}

/// Without the kernel confinement, a call's timeout holds the same way.
#[test]
fn an_unconfined_command_has_its_own_timeout_too() {
    let c = Cordon::new().with_args(&["--unconfined-bash", "--timeout", "1", "--max-timeout", "2"]);
    let run = c.call(
        "bash",
        json!({"command": "sleep 1.3; echo done", "timeout": 2}),
    );
    assert_eq!(run.stdout, "done\n", "{run:?}");
    let run = c.call(
        "bash",
        json!({"command": "echo started; sleep 5", "timeout": 2}),
    );
    assert!(
        run.stdout
            .starts_with("started\n[error: 2s timeout exceeded]\n"),
        "{run:?}"
    );
}

#[test]
fn a_command_longer_than_an_argument_may_be_fails_with_a_clear_text_and_the_next_runs() {
    let c = Cordon::new();
    let long = json!({"tool": "bash", "input": {"command": format!(": {}", "a".repeat(200_000))}});
    let next = json!({"tool": "bash", "input": {"command": "echo next"}});
    let out = c.session(format!("{long}\n{next}\n"));
    let text = out[0]["output"].as_str().unwrap();
    assert!(
        text.contains(
            "the command is too long for bash -c (the kernel limits one argument to 128 KiB)"
        ),
        "{text}"
    );
    assert_eq!(out[1]["output"], "next\n");
}

/// Runs `cordon call bash` and returns what it printed and its peak resident memory (KiB,
/// the largest of cordon and its sandbox helper).
fn bash_measured(cordon: &Cordon, command: &str) -> (String, i64) {
    // Reaped below with wait4, which also reports the peak memory.
    #[allow(clippy::zombie_processes)]
    let mut child = cordon
        .command()
        .args(["call", "bash", &json!({ "command": command }).to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child, with valid out-pointers.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(
            libc::wait4(child.id() as i32, &mut status, 0, &mut usage),
            child.id() as i32
        );
        usage
    };
    (stdout, usage.ru_maxrss)
}

#[test]
fn an_output_bomb_stays_bounded() {
    let c = Cordon::new().with_args(&["--timeout", "2"]);
    let (_, baseline) = bash_measured(&c, "echo small");
    let (stdout, peak) = bash_measured(&c, "yes");
    assert!(stdout.starts_with("y\ny\n"), "{}", &stdout[..100]);
    assert!(
        stdout.contains("[output truncated:"),
        "{}",
        &stdout[stdout.len() - 300..]
    );
    assert!(stdout.ends_with(&format!("\n[error: 2s timeout exceeded]\n{MORE_TIME}")));
    assert!(stdout.len() < 31_000, "{} bytes", stdout.len());
    // Gigabytes went through; memory grew by the output bound (1 MiB of each end, the end's
    // twice while it is read) and buffers at most.
    assert!(
        peak < baseline + 16 * 1024,
        "peak {peak} KiB, baseline {baseline} KiB"
    );
}

/// A build log over the output limit whose last line is the error that matters.
pub const LONG_LOG: &str = "seq 1 200000; echo \"error[E0308]: mismatched types\"; exit 1";

/// Panics unless `text`, what the model sees of [`LONG_LOG`] at the default limit, keeps the
/// log's start and its end, whole lines each, with the notice between them counting what was
/// left out: the last error line survives, and the trailer follows.
pub fn assert_start_and_end_kept(text: &str) {
    let (start, rest) = text.split_once("[output truncated: ").unwrap();
    let (notice, end) = rest.split_once('\n').unwrap();
    assert!(start.starts_with("1\n2\n3\n"), "{}", &start[..20]);
    assert!(start.ends_with('\n'));
    assert!(
        end.ends_with("199999\n200000\nerror[E0308]: mismatched types\n[exit code: exit status 1]"),
        "{}",
        &end[end.len() - 100..]
    );
    let total: usize = (1..=200_000)
        .map(|i: u32| i.to_string().len() + 1)
        .sum::<usize>()
        + "error[E0308]: mismatched types\n".len();
    let shown = start.len() + end.len() - "[exit code: exit status 1]".len();
    assert_eq!(
        notice,
        format!(
            "{} characters omitted here, between the start and the end of the output. Ask for \
             a smaller part, e.g. a line range or a filtered command]",
            total - shown
        )
    );
    assert!(
        text.chars().count() <= 30_000 + "\n[exit code: exit status 1]".len(),
        "{}",
        text.len()
    );
}

/// Over the limit, a command's output keeps its start and its end, whole lines each, with the
/// notice between them: the last error line survives, and the trailer follows.
#[test]
fn long_output_keeps_its_start_and_its_end() {
    let c = Cordon::new();
    assert_start_and_end_kept(&bash(&c, LONG_LOG).stdout);

    // Past what the sandbox keeps of each end (1 MiB), the bytes between are counted too:
    // 3,000,015 bytes printed, less twice 1 MiB.
    let run = bash(
        &c,
        "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo the last line",
    );
    assert!(run.stdout.starts_with("xxx"), "{}", &run.stdout[..20]);
    assert!(
        run.stdout
            .contains(" characters and 902863 bytes omitted here, between the start"),
        "{}",
        &run.stdout[run.stdout.len() - 400..]
    );
    assert!(
        run.stdout.ends_with("xxx\nthe last line\n"),
        "{}",
        &run.stdout[run.stdout.len() - 100..]
    );
}

#[test]
fn the_environment_holds_no_host_secrets() {
    let c = Cordon::new();
    let input = json!({
        "command": "env | cut -d= -f1 | sort | tr '\\n' ' '; echo; \
                    cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c CORDON_TEST_SECRET"
    });
    // A home without a git identity, which would be passed on (see `workday`).
    let home = tempfile::tempdir().unwrap();
    let out = c
        .command()
        .env("CORDON_TEST_SECRET", "hunter2-value")
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["call", "bash", &input.to_string()])
        .output()
        .unwrap();
    let run = Run::from(out);
    assert!(!run.stdout.contains("hunter2-value"), "{run:?}");
    let mut lines = run.stdout.lines();
    assert_eq!(
        lines.next(),
        Some(
            "ALL_PROXY CARGO_NET_RETRY HOME HTTPS_PROXY HTTP_PROXY LANG LC_ALL NO_PROXY PATH \
             PIP_RETRIES PWD SHLVL TERM TMPDIR _ all_proxy http_proxy https_proxy no_proxy \
             npm_config_fetch_retries "
        ),
        "{run:?}"
    );
    assert_eq!(lines.next(), Some("0"), "{run:?}");
}

#[test]
fn unconfined_bash_lifts_the_confinement_only() {
    let c = Cordon::new().with_args(&["--unconfined-bash", "--timeout", "2"]);
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("readable.txt");
    std::fs::write(&file, "visible").unwrap();
    let run = bash(&c, &format!("cat {}; echo; sleep 100", file.display()));
    assert_eq!(
        run.stdout,
        format!("visible\n[error: 2s timeout exceeded]\n{MORE_TIME}"),
        "{run:?}"
    );
}

#[test]
fn opt_in_settings_widen_only_what_they_name() {
    let extra = tempfile::tempdir().unwrap();
    let target = extra.path().join("out.txt");
    let write = format!(
        "echo granted > {} && cat {}",
        target.display(),
        target.display()
    );
    let denied = bash(&Cordon::new(), &write);
    assert!(
        denied.stdout.ends_with("[exit code: exit status 1]"),
        "{denied:?}"
    );
    assert!(!target.exists());
    let dir = extra.path().to_str().unwrap();
    let granted = bash(&Cordon::new().with_args(&["--bash-write", dir]), &write);
    assert_eq!(granted.stdout, "granted\n", "{granted:?}");

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let networked = bash(&Cordon::new().with_args(&["--bash-network"]), &connect);
    assert_eq!(networked.stdout, "connected\n", "{networked:?}");

    let missing = bash(
        &Cordon::new().with_args(&["--bash-read", "/nonexistent/cordon"]),
        "true",
    );
    assert_eq!(missing.code, 1);
    assert!(
        missing.stdout.contains("/nonexistent/cordon"),
        "{missing:?}"
    );
}
