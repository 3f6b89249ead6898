//! What is not a regular file, and files too large to take whole: the file tools refuse a FIFO,
//! a socket or a device at once; a call stuck in a blocking open stops neither the session nor
//! an MCP ping; a huge file shows its start, and inputs and files over the limits are refused
//! with texts that name them.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::plugins::hostile;
use crate::util::{Cordon, Run};

/// How long a test waits for cordon before it calls it stuck. A watchdog, not a timing
/// assertion: every call here answers in well under a second, or at a 1–2 s plugin deadline.
const STUCK: Duration = Duration::from_secs(30);

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// Waits for `child` to exit, killing it (and failing the test) past [`STUCK`].
fn wait_unstuck(mut child: Child, what: &str) -> Run {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > STUCK {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: cordon did not answer within {STUCK:?}; it printed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap().into()
}

/// Runs `cordon session` on `requests` (one per line) and returns its answers, in order.
fn session(cordon: &Cordon, requests: &[Value]) -> Vec<Value> {
    let mut child = cordon.spawn(&["session"]);
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let run = wait_unstuck(child, "cordon session");
    let answers: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), requests.len(), "{}", run.stderr);
    answers
}

/// The input of a call of `tool` on `path` that would change it if it were a text file.
fn input_for(tool: &str, path: &str) -> Value {
    match tool {
        "read_file" => json!({"path": path}),
        "write_file" => json!({"path": path, "content": "x\n"}),
        _ => json!({"path": path, "edits": [{"old": "a", "new": "b"}]}),
    }
}

#[test]
fn the_file_tools_refuse_a_fifo_a_socket_and_a_device_at_once_and_change_nothing() {
    let cordon = Cordon::new();
    mkfifo(&cordon.path("pipe"));
    let _socket = std::os::unix::net::UnixListener::bind(cordon.path("sock")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", cordon.path("zero")).unwrap();
    std::os::unix::fs::symlink("pipe", cordon.path("to-pipe")).unwrap();
    // A device inside the workspace needs root; elsewhere the links and absolute paths show it.
    let dev = std::ffi::CString::new(cordon.path("dev").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; /dev/zero's device number.
    let device = unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
    let mut special = vec!["pipe", "sock", "to-pipe"];
    if device == 0 {
        special.push("dev");
    }
    let tools = ["read_file", "write_file", "edit_file"];
    let mut requests = Vec::new();
    for tool in tools {
        for path in special.iter().copied().chain(["zero", "/dev/zero"]) {
            requests.push(json!({"tool": tool, "input": input_for(tool, path)}));
        }
    }
    let answers = session(&cordon, &requests);
    let mut answers = answers.iter();
    for tool in tools {
        for path in &special {
            let answer = answers.next().unwrap();
            assert_eq!(answer["status"], "failed", "{tool} {path}: {answer}");
            assert_eq!(
                answer["output"],
                format!(
                    "{path} is not a regular file (it is a named pipe, a socket or a device); \
                     {tool} works on regular files only"
                ),
                "{tool} {path}"
            );
        }
        // /dev/zero itself is out of reach, through a link or named outright.
        for start in [
            "zero cannot be accessed: it goes through the symbolic link zero",
            "/dev/zero is outside the workspace",
        ] {
            let answer = answers.next().unwrap();
            assert_eq!(answer["status"], "failed", "{tool}: {answer}");
            let output = answer["output"].as_str().unwrap();
            assert!(output.starts_with(start), "{tool}: {output}");
        }
    }
    let kind = |name: &str| {
        std::fs::symlink_metadata(cordon.path(name))
            .unwrap()
            .file_type()
    };
    assert!(kind("pipe").is_fifo(), "the FIFO is still a FIFO");
    assert!(kind("sock").is_socket(), "the socket is still a socket");
    assert!(kind("zero").is_symlink() && kind("to-pipe").is_symlink());
    if device == 0 {
        assert!(kind("dev").is_char_device(), "the device is still a device");
    }
    let names = std::fs::read_dir(cordon.root()).unwrap().count();
    assert_eq!(names, special.len() + 1, "nothing was added beside them");
}

/// The hostile plugin, reading the workspace, with a deadline of `secs`, and a FIFO `pipe`
/// nobody writes to.
fn stuck_plugin(secs: u64) -> (Cordon, tempfile::TempDir, String) {
    let (cordon, dir) = hostile(&format!(
        "[grants]\nread = [\".\"]\n[limits]\ntimeout_secs = {secs}\n"
    ));
    mkfifo(&cordon.path("pipe"));
    let fifo = cordon.path("pipe").to_str().unwrap().to_string();
    (cordon, dir, fifo)
}

#[test]
fn a_call_stuck_opening_a_fifo_is_stopped_at_its_deadline_and_the_session_goes_on() {
    let (cordon, _dir, fifo) = stuck_plugin(1);
    cordon.write("a.txt", "one\n");
    let answers = session(
        &cordon,
        &[
            json!({"tool": "open_path", "input": {"path": fifo}}),
            json!({"tool": "read_file", "input": {"path": "a.txt"}}),
        ],
    );
    assert_eq!(answers[0]["status"], "failed");
    assert_eq!(
        answers[0]["output"],
        "the hostile plugin ran past its 1 s limit and was stopped; the call had no result"
    );
    assert_eq!(answers[1]["status"], "completed", "{}", answers[1]);
    assert_eq!(answers[1]["output"], "one\n");
}

/// Whether a thread of process `pid` waits in `openat` or `openat2` (x86-64 and aarch64
/// numbers): the plugin's open of the FIFO has begun.
fn in_open(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        let syscall = std::fs::read_to_string(task.path().join("syscall")).unwrap_or_default();
        let number = syscall.split(' ').next().unwrap_or("");
        if cfg!(target_arch = "aarch64") {
            ["56", "437"].contains(&number)
        } else {
            ["257", "437"].contains(&number)
        }
    })
}

/// `cordon mcp` on the stuck plugin, initialized, with a call of `open_path` on the FIFO
/// (id 2) under way.
struct Mcp {
    child: Child,
    stdin: std::process::ChildStdin,
    messages: mpsc::Receiver<Value>,
}

impl Mcp {
    fn stuck(cordon: &Cordon, fifo: &str) -> Self {
        let mut child = cordon.spawn(&["mcp"]);
        let stdin = child.stdin.take().unwrap();
        let (message, messages) = mpsc::channel::<Value>();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = message.send(serde_json::from_str(&line).unwrap());
            }
        });
        let mut mcp = Mcp {
            child,
            stdin,
            messages,
        };
        mcp.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert_eq!(mcp.next()["id"], 1);
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "open_path", "arguments": {"path": fifo}}}));
        // Go on only once the open is under way, so nothing sent next slips in before it.
        let started = Instant::now();
        while !in_open(mcp.child.id()) && started.elapsed() < STUCK {
            std::thread::sleep(Duration::from_millis(10));
        }
        mcp
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
    }

    fn next(&self) -> Value {
        self.messages
            .recv_timeout(STUCK)
            .expect("cordon mcp did not answer")
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_mcp_ping_is_answered_while_a_call_is_stuck_opening_a_fifo() {
    let (cordon, _dir, fifo) = stuck_plugin(2);
    let mut mcp = Mcp::stuck(&cordon, &fifo);
    mcp.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let first = mcp.next();
    let second = mcp.next();
    assert_eq!(first["id"], 3, "the ping is answered first: {first}");
    assert!(first["result"].is_object(), "{first}");
    assert_eq!(second["id"], 2, "{second}");
    assert_eq!(second["result"]["isError"], true, "{second}");
    assert_eq!(
        second["result"]["content"][0]["text"],
        "the hostile plugin ran past its 2 s limit and was stopped; the call had no result"
    );
}

#[test]
fn a_cancelled_mcp_call_stuck_opening_a_fifo_does_not_hold_up_the_next_call() {
    // A deadline past the test's patience (the user's consent allows it): only the
    // cancellation lets call 3 run.
    let (cordon, dir, fifo) = stuck_plugin(120);
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[plugins.hostile]\nmax_timeout_secs = 120\n").unwrap();
    let cordon = cordon.with_args(&["--config", config.to_str().unwrap()]);
    cordon.write("a.txt", "one\n");
    let mut mcp = Mcp::stuck(&cordon, &fifo);
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user gave up"}}),
    );
    mcp.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}));
    let answer = loop {
        let message = mcp.next();
        if message["id"] == 3 {
            break message;
        }
        assert_eq!(message["id"], 2, "{message}");
        assert_eq!(
            message["error"]["message"], "the open_path call was cancelled",
            "{message}"
        );
    };
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "one\n");
}

const MIB: usize = 1 << 20;

/// Writes `size` bytes of `a` to `rel` in the workspace, a MiB at a time, with no newline.
fn write_large(cordon: &Cordon, rel: &str, size: usize) -> std::path::PathBuf {
    let path = cordon.path(rel);
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let block = vec![b'a'; MIB];
    for _ in 0..size / MIB {
        file.write_all(&block).unwrap();
    }
    file.write_all(&block[..size % MIB]).unwrap();
    file.flush().unwrap();
    path
}

#[test]
fn read_file_shows_the_start_of_a_huge_single_line() {
    let cordon = Cordon::new().with_args(&["--max-output", "1000"]);
    write_large(&cordon, "huge.txt", 200 * MIB);
    let run = cordon.call("read_file", json!({"path": "huge.txt"}));
    assert_eq!(run.code, 0, "{}", run.stdout);
    // Reading stops inside the line once it holds more than the limit's characters (as many
    // bytes as four characters each could take); the host cuts the rest and counts the unread.
    let read = 4 * 1001;
    assert_eq!(
        run.stdout,
        format!(
            "{}\n[output truncated: {} more characters and then {} more bytes omitted. Ask for \
             a smaller part, e.g. a line range or a filtered command]\n[output limit reached: \
             line 1 is longer than the limit and only its start is shown; continue with start 2]",
            "a".repeat(1000),
            read - 1000,
            200 * MIB - read
        )
    );
    // Reading past it goes through it a piece at a time.
    let past = cordon.call("read_file", json!({"path": "huge.txt", "start": 2}));
    assert_eq!(
        (past.code, past.stdout.as_str()),
        (1, "start 2 is past the end of huge.txt, which has 1 line")
    );
}

#[test]
fn an_input_over_the_limit_is_refused_before_the_plugin_runs() {
    let cordon = Cordon::new();
    let content = "a".repeat(200 * MIB);
    let input = json!({"path": "big.txt", "content": content}).to_string();
    let run = cordon.run_with_stdin(&["call", "write_file", "-"], &input);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "The input for write_file is 200.0 MiB, more than the 64 MiB a call may carry; send less \
         in one call (a file this large is better produced by a command)"
    );
    assert!(!cordon.path("big.txt").exists(), "nothing was written");
}

#[test]
fn write_file_and_edit_file_refuse_an_existing_file_over_the_limit() {
    let cordon = Cordon::new();
    let path = write_large(&cordon, "big.txt", 65 * MIB);
    for (tool, input) in [
        (
            "edit_file",
            json!({"path": "big.txt", "edits": [{"old": "aaa", "new": "b"}]}),
        ),
        (
            "write_file",
            json!({"path": "big.txt", "content": "small\n"}),
        ),
    ] {
        let run = cordon.call(tool, input);
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (
                1,
                format!(
                    "big.txt is 65.0 MiB, more than the 64 MiB {tool} works on; change a file \
                     this large with a command instead. Nothing was written."
                )
                .as_str()
            )
        );
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 65 * MIB as u64);
}
