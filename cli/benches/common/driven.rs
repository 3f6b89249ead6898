//! `cordon session` driven as an agent drives it, shared by the bench targets.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `session` (a `cordon … session` command) answering `calls` requests of `request` (one
/// JSON line), each sent once the one before it was answered, and checks each completed: the
/// time from its start to its exit.
pub fn session(mut session: Command, request: &str, calls: usize) -> Duration {
    let started = Instant::now();
    let mut child = session
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cordon session starts");
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let request = format!("{request}\n");
    for _ in 0..calls {
        input.write_all(request.as_bytes()).unwrap();
        input.flush().unwrap();
        line.clear();
        output.read_line(&mut line).unwrap();
        assert!(line.contains(r#""status":"completed""#), "{line}");
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    started.elapsed()
}
