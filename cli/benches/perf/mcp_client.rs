//! A minimal MCP client (newline-delimited JSON-RPC over a child's standard input and output),
//! enough to start a server, initialize, list and call tools, and close; and how to start
//! `cordon mcp` on the fixture. The `mcp` and `rss` sections talk to servers through it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fixture::{CORDON, Dirs};

/// A minimal MCP client: newline-delimited JSON-RPC over a child's stdin and stdout.
pub(crate) struct Client {
    pub(crate) child: Child,
    stdin: Box<dyn Write>,
    stdout: BufReader<Box<dyn Read>>,
    next_id: u64,
}

impl Client {
    /// Starts the server with pipes for its standard input and output, as MCP clients do.
    pub(crate) fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP server starts");
        Client {
            stdin: Box::new(child.stdin.take().unwrap()),
            stdout: BufReader::new(Box::new(child.stdout.take().unwrap())),
            child,
            next_id: 1,
        }
    }

    /// Starts the server with a Unix socket for its standard input and output: `cordon mcp`
    /// then falls back to Tokio's blocking standard streams (its transport before it used
    /// non-blocking pipes), which shows what that change bought.
    pub(crate) fn spawn_on_socket(command: &mut Command) -> Self {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let child = command
            .stdin(Stdio::from(OwnedFd::from(theirs.try_clone().unwrap())))
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP server starts");
        Client {
            stdin: Box::new(ours.try_clone().unwrap()),
            stdout: BufReader::new(Box::new(ours)),
            child,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and waits for its response, answering any request of the server's on
    /// the way with an error.
    pub(crate) fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server closed its output waiting for {method}");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("method").is_some() {
                if let Some(server_id) = message.get("id") {
                    self.send(&json!({"jsonrpc": "2.0", "id": server_id,
                        "error": {"code": -32601, "message": "not supported"}}));
                }
                continue;
            }
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Value {
        let result = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cordon-perf", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    pub(crate) fn call(&mut self, tool: &str, arguments: &Value) -> String {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_ne!(result["isError"], json!(true), "{tool}: {result}");
        result["content"][0]["text"].as_str().unwrap().to_string()
    }

    pub(crate) fn close(mut self) {
        // End of input: the server's cue to exit. (A socket needs its other half shut too.)
        drop(self.stdin);
        drop(self.stdout);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cordon mcp` on the fixture's workspace, warm cache and skills.
pub(crate) fn cordon_mcp(dirs: &Dirs) -> Command {
    let mut command = dirs.cordon(&dirs.cache);
    command.arg("--skills").arg(&dirs.skills).arg("mcp");
    command
}

/// Whether this build of cordon has the `mcp` subcommand.
pub(crate) fn cordon_supports_mcp() -> bool {
    Command::new(CORDON)
        .args(["mcp", "--help"])
        .output()
        .is_ok_and(|o| o.status.success())
}
