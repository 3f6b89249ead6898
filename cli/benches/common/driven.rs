//! `cordon session` driven as an agent drives it, shared by the bench targets.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `session` (a `cordon … session` command) answering `calls` requests of `request` (one
/// JSON line), each sent once the one before it was answered, and checks each completed: the
/// time from its start to its exit.
pub fn session(session: Command, request: &str, calls: usize) -> Duration {
    round_trips(session, request, calls, |line| {
        assert!(line.contains(r#""status":"completed""#), "{line}")
    })
}

/// Runs `command`, sending it `calls` lines of `request`, each once the line answering the one
/// before it came back, and checks each answer with `check`: the time from its start to its
/// exit.
pub fn round_trips(
    mut command: Command,
    request: &str,
    calls: usize,
    check: impl Fn(&str),
) -> Duration {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let request = format!("{request}\n");
    for _ in 0..calls {
        input.write_all(request.as_bytes()).unwrap();
        input.flush().unwrap();
        line.clear();
        output.read_line(&mut line).unwrap();
        check(&line);
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    started.elapsed()
}
