//! The harness: a throwaway workspace and a way to run `cordon` in it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tempfile::TempDir;

use crate::workspace::Workspace;

/// A temporary workspace and the options every `cordon` run in it gets.
pub struct Cordon {
    dir: Workspace,
    /// cordon's data directory (`XDG_DATA_HOME`), where the homes of bash commands are kept.
    data: TempDir,
    args: Vec<String>,
    env: Vec<(String, PathBuf)>,
}

/// What one run of `cordon` printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl From<Output> for Run {
    fn from(out: Output) -> Self {
        Run {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code().unwrap_or(-1),
        }
    }
}

/// The workspace's files: `root`, `path`, `write`, `read`.
impl std::ops::Deref for Cordon {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.dir
    }
}

impl Cordon {
    /// A fresh, empty workspace.
    pub fn new() -> Self {
        Cordon {
            dir: Workspace::new(),
            data: tempfile::Builder::new()
                .prefix("cordon-data-")
                .tempdir()
                .expect("create a temporary data directory"),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Adds global options (placed before the subcommand) to every run.
    pub fn with_args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Sets an environment variable of every run.
    pub fn with_env(mut self, name: &str, value: impl Into<PathBuf>) -> Self {
        self.env.push((name.to_string(), value.into()));
        self
    }

    /// cordon's data directory for this workspace's runs.
    pub fn data_dir(&self) -> &Path {
        self.data.path()
    }

    /// A `cordon` command with this workspace and the global options, ready for a subcommand.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(binary());
        cmd.env("CORDON_CACHE_DIR", cache_dir())
            .env("XDG_DATA_HOME", self.data.path())
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG")
            .arg("--workspace")
            .arg(self.dir.root())
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `cordon <args>` and collects what it printed.
    pub fn run(&self, args: &[&str]) -> Run {
        self.command()
            .args(args)
            .output()
            .expect("run cordon")
            .into()
    }

    /// Runs `cordon call TOOL INPUT`.
    pub fn call(&self, tool: &str, input: serde_json::Value) -> Run {
        self.run(&["call", tool, &input.to_string()])
    }

    /// Runs `cordon session` over `input` (request lines) and returns its response lines,
    /// parsed; the session must end with status 0.
    pub fn session(&self, input: impl AsRef<[u8]>) -> Vec<serde_json::Value> {
        let run = self.run_with_stdin(&["session"], input);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    /// Runs `cordon mcp`: the handshake, then `requests` (JSON-RPC messages); returns the
    /// answers to the requests, parsed, in the order of their ids (calls run concurrently, so
    /// they may finish in any order). The server must end with status 0.
    pub fn mcp(&self, requests: &[serde_json::Value]) -> Vec<serde_json::Value> {
        let handshake = [
            serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}}),
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        let input: String = handshake
            .iter()
            .chain(requests)
            .map(|l| format!("{l}\n"))
            .collect();
        let run = self.run_with_stdin(&["mcp"], input);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let mut answers: Vec<serde_json::Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect();
        answers.sort_by_key(|a| a["id"].as_i64().unwrap_or(i64::MAX));
        answers.remove(0);
        answers
    }

    /// Starts `cordon <args>` with its standard input, output and error piped.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cordon")
    }

    /// Runs `cordon <args>` with `stdin` as standard input. The input is fed while the output
    /// is read, so that a large answer to an early line cannot stall both sides.
    pub fn run_with_stdin(&self, args: &[&str], stdin: impl AsRef<[u8]>) -> Run {
        use std::io::Write;
        let mut child = self.spawn(args);
        let mut pipe = child.stdin.take().unwrap();
        let stdin = stdin.as_ref().to_vec();
        // A cordon that stops reading early shows in what it printed and its exit status.
        let feeder = std::thread::spawn(move || drop(pipe.write_all(&stdin)));
        let run = child.wait_with_output().expect("wait for cordon").into();
        feeder.join().unwrap();
        run
    }
}

/// Makes `path` (and its parents) an executable script that prints `line`: a stand-in for a
/// tool such as `cargo`.
pub fn script(path: &Path, line: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\necho {line}\n")).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// The `cordon` binary under test: `$CORDON_TEST_BIN` when set (`.ci/run` runs the sandbox
/// tests again as an unprivileged user, with a copy of the binary that user can reach), else
/// the one cargo built.
pub fn binary() -> PathBuf {
    std::env::var_os("CORDON_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cordon")))
}

/// The compile cache shared by every test run, so components compile once per build:
/// `$CORDON_TEST_CACHE` when set (for the unprivileged run), else one in cargo's target
/// directory.
pub fn cache_dir() -> &'static Path {
    static DIR: std::sync::LazyLock<PathBuf> = std::sync::LazyLock::new(|| {
        std::env::var_os("CORDON_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_TARGET_TMPDIR"), "/cordon-cache")))
    });
    &DIR
}

/// The config home every test's `cordon` reads its cache key from (`$XDG_CONFIG_HOME`, else
/// `~/.config`): a test that gives cordon another home keeps this one, since a key of its own
/// would make the shared compile cache fail authentication for the other tests.
pub fn config_home() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .expect("HOME or XDG_CONFIG_HOME")
}

/// Builds the wasm32-wasip2 components of the given workspace packages (once per package per
/// test run) and returns the directory holding `<package>.wasm`.
pub fn wasm_components(packages: &[&str]) -> PathBuf {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashSet::new);
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !built.contains(*p))
        .collect();
    if !missing.is_empty() {
        cordon_wasm_build::build(root, &missing).unwrap_or_else(|e| panic!("{e}"));
        built.extend(missing.iter().map(|p| p.to_string()));
    }
    cordon_wasm_build::out_dir(root)
}

/// A plugin directory holding the component `from` (a path) as `<name>.wasm` with `manifest`
/// as `<name>.toml`.
pub fn plugin_dir(name: &str, from: &Path, manifest: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix("cordon-plugins-")
        .tempdir()
        .unwrap();
    std::fs::copy(from, dir.path().join(format!("{name}.wasm"))).unwrap();
    std::fs::write(dir.path().join(format!("{name}.toml")), manifest).unwrap();
    dir
}

/// The page [`Server`] answers `/page` with.
pub const PAGE: &str = "<html><head><title>Test page</title><script>x()</script></head>\
    <body><h1>Hello</h1><p>fish &amp; chips</p></body></html>";

/// An HTTP server on 127.0.0.1 that keeps each request head and answers as it was made to
/// ([`Server::start`], [`Server::files`]).
pub struct Server {
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

/// What a [`Server`] answers a request with: the status (and any further header lines), the
/// content type and the body.
type Answer = (&'static str, &'static str, Vec<u8>);

impl Server {
    /// A server that answers `/echo` with the request head, `/page` with [`PAGE`], `/moved`
    /// with a redirect to `/page`, and any other path with `served PATH`.
    pub fn start() -> Server {
        Server::answering(|path, head| match path {
            "/echo" => ("200 OK", "text/plain", head.into()),
            "/page" => ("200 OK", "text/html; charset=utf-8", PAGE.into()),
            "/moved" => ("302 Found\r\nLocation: /page", "text/plain", Vec::new()),
            _ => ("200 OK", "text/plain", format!("served {path}\n").into()),
        })
    }

    /// A server of the files under `root` (a path that ends in `/` is its directory's
    /// `index.html`); any other path, and one that would leave `root`, is 404.
    pub fn files(root: &Path) -> Server {
        let root = root.to_path_buf();
        Server::answering(move |path, _| {
            let mut file = root.join(path.trim_start_matches('/'));
            let kind = if path.ends_with('/') {
                file.push("index.html");
                "text/html"
            } else {
                "application/octet-stream"
            };
            match std::fs::read(&file) {
                Ok(body) if !path.split('/').any(|part| part == "..") => ("200 OK", kind, body),
                _ => ("404 Not Found", "text/plain", Vec::new()),
            }
        })
    }

    /// A server that answers each request with `answer(path, head)`, one request per
    /// connection.
    fn answering(answer: impl Fn(&str, &str) -> Answer + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("?");
                let (status, kind, body) = answer(path, &head);
                kept.lock().unwrap().push(head);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                )
                .and_then(|()| stream.write_all(&body));
            }
        });
        Server { port, heads }
    }

    /// The request heads received so far, in order.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// A `cordon session` kept open, driven a line at a time (to answer permission requests as
/// they come, or to run commands one after another in one session).
pub struct Live {
    /// The `cordon session` process.
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Live {
    pub fn start(cordon: &Cordon) -> Self {
        let mut child = cordon
            .command()
            .arg("session")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Live {
            child,
            stdin,
            stdout,
        }
    }

    pub fn send(&mut self, line: Value) {
        self.send_raw(format!("{line}\n").as_bytes());
    }

    /// Sends `bytes` as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// Runs `command` with the bash tool: the output the model sees.
    pub fn bash(&mut self, command: &str) -> String {
        self.send(serde_json::json!({"tool": "bash", "input": {"command": command}}));
        let answer = self.receive();
        answer["output"].as_str().unwrap_or_default().to_string()
    }

    pub fn finish(mut self) {
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
    }
}
