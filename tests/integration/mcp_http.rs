//! `cordon mcp --http` for the tests: a server started on a free loopback port, and plain
//! HTTP/1.1 requests to it for what no client library sends (no token, a foreign `Origin`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::util::Cordon;

/// A running `cordon mcp --http 127.0.0.1:0`.
pub struct HttpServer {
    child: Child,
    /// Where it serves MCP: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The token it made and printed, if it made one.
    pub token: Option<String>,
    /// The two lines it announced itself with on standard error.
    pub announced: [String; 2],
    /// What it wrote to standard error after those.
    stderr: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Starts `cordon <global options> mcp --http 127.0.0.1:0 <args>` in `cordon`'s workspace
    /// and waits until it announces where it listens.
    pub fn start(cordon: &Cordon, args: &[&str]) -> HttpServer {
        let mut child = cordon
            .command()
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn cordon mcp --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut announce = || {
            lines
                .next()
                .and_then(Result::ok)
                .expect("cordon mcp --http ended before announcing itself")
        };
        // A warning may come first (the compile cache written with another key, say).
        let mut first = announce();
        let mut before = String::new();
        while !first.starts_with("cordon mcp: serving MCP at ") && before.len() < 64 << 10 {
            before.push_str(&first);
            before.push('\n');
            first = announce();
        }
        let announced = [first, announce()];
        let url = announced[0]
            .strip_prefix("cordon mcp: serving MCP at ")
            .unwrap_or_else(|| panic!("not an announcement: {announced:?}"))
            .to_string();
        let token = announced[1]
            .strip_prefix("cordon mcp: clients must send \"Authorization: Bearer ")
            .and_then(|rest| rest.split('"').next())
            .map(str::to_string);
        let stderr = Arc::new(Mutex::new(before));
        let kept = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut kept = kept.lock().unwrap();
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        HttpServer {
            child,
            url,
            token,
            announced,
            stderr,
            reader: Some(reader),
        }
    }

    /// The `host:port` it listens on.
    pub fn authority(&self) -> &str {
        let rest = self.url.strip_prefix("http://").unwrap();
        &rest[..rest.find('/').unwrap()]
    }

    /// Sends SIGTERM and waits (up to 10 s) for the server to end; how it ended, and what it
    /// wrote to standard error after announcing itself.
    pub fn stop(mut self) -> (ExitStatus, String) {
        // SAFETY: kill(2) with the pid of a child this harness started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for cordon mcp --http") {
                break status;
            }
            assert!(
                Instant::now() < until,
                "cordon mcp --http still runs 10 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        self.reader.take().unwrap().join().unwrap();
        let stderr = self.stderr.lock().unwrap().clone();
        (status, stderr)
    }

    /// The server's address and token as a client script's configuration takes them.
    pub fn client_config(&self) -> serde_json::Value {
        serde_json::json!({"url": self.url, "token": self.token})
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // A test that failed before `stop`: leave no server behind.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP answer: the status (0 when none came), the head's lines and the body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The value of header `name` (case-insensitive), if the answer has it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// A POST of `body` (JSON) to the MCP path of the server at `authority` (`host:port`) with
/// `headers`, besides the content type, the accepted types, and the body's length and a
/// `Host` naming the server unless `headers` have them; answered whole (the connection is
/// closed after it).
pub fn post(authority: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
                    Accept: application/json, text/event-stream\r\nConnection: close\r\n"
        .to_string();
    if !has("Host") {
        head.push_str(&format!("Host: {authority}\r\n"));
    }
    if !has("Content-Length") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (key, value) in headers {
        head.push_str(&format!("{key}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let mut stream = TcpStream::connect(authority).expect("connect to cordon mcp --http");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    // The server may end the connection as it stops: what arrived is the answer.
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}
