//! Commands in the confined shell: their output, working directory and standard input, a
//! background child, what they may read, write and reach, their process limit and
//! privileges.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use cordon_sandbox::Status;

use crate::host::{marker, sleeper, wait_until_gone};
use crate::util::{Sandbox, bash};

#[test]
fn output_merges_stdout_and_stderr_in_order() {
    let c = Sandbox::new();
    let run = bash(&c, "echo one; echo two >&2; echo three; echo four >&2");
    assert_eq!(run.status, Status::Exited(0), "{run:?}");
    assert_eq!(run.output, "one\ntwo\nthree\nfour\n");
}

#[test]
fn the_working_directory_is_the_workspace() {
    let c = Sandbox::new();
    c.write("here.txt", "found");
    let run = bash(&c, "pwd; cat here.txt");
    assert_eq!(run.output, format!("{}\nfound", c.root().display()));
}

#[test]
fn a_background_child_does_not_hold_the_call() {
    let c = Sandbox::new();
    let mark = marker("background");
    let started = Instant::now();
    let run = bash(&c, &format!("{} & echo started", sleeper(&mark)));
    let took = started.elapsed();
    assert_eq!(run.status, Status::Exited(0), "{run:?}");
    assert_eq!(run.output, "started\n");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(
        wait_until_gone(&mark, Duration::from_millis(500)),
        Vec::<u32>::new()
    );
}

#[test]
fn stdin_is_empty() {
    let c = Sandbox::new().with(|p| p.timeout = Duration::from_secs(5));
    let started = Instant::now();
    let run = bash(&c, "cat; read line; echo \"read: $? [$line]\"");
    assert_eq!(run.output, "read: 1 []\n", "{run:?}");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[test]
fn writing_outside_the_workspace_fails_and_creates_nothing() {
    let c = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("escape");
    let run = bash(
        &c,
        &format!(
            "echo x > {0}; touch {0}2; mkdir {0}3; cp /etc/hostname {0}4; echo inside > ok",
            target.display()
        ),
    );
    // The directory is not in the command's view at all.
    assert!(run.output.contains("No such file or directory"), "{run:?}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert_eq!(c.read("ok"), "inside\n");
    // The private temporary directory is writable, and not the host's.
    let name = marker("tmpdir");
    let run = bash(
        &c,
        &format!("echo t > \"$TMPDIR/{name}\" && cat \"$TMPDIR/{name}\" && echo \"$TMPDIR\""),
    );
    assert_eq!(run.output, "t\n/tmp\n", "{run:?}");
    assert!(!Path::new("/tmp").join(&name).exists());
}

#[test]
fn reading_outside_the_readable_set_fails() {
    let c = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "the-planted-secret").unwrap();
    let run = bash(
        &c,
        &format!(
            "cat {0}; ls {1}; cat /etc/shadow; head -c 1 /etc/passwd",
            secret.display(),
            outside.path().display()
        ),
    );
    assert!(!run.output.contains("the-planted-secret"), "{run:?}");
    assert!(
        run.output
            .contains(&format!("{}: No such file or directory", secret.display())),
        "{run:?}"
    );
    assert!(!run.output.contains("secret.txt\n"), "{run:?}");
    if Path::new("/etc/shadow").exists() {
        assert!(
            run.output.contains("/etc/shadow: Permission denied"),
            "{run:?}"
        );
    }
    // The system is readable: /etc/passwd starts with a user name.
    assert!(
        run.output
            .trim_end()
            .ends_with(|ch: char| ch.is_ascii_alphabetic()),
        "{run:?}"
    );
}

/// The command's loopback is its own: a server and its client in one command work, a
/// listener of the host on 127.0.0.1 is out of reach, and so is every other address.
#[test]
fn the_commands_loopback_is_its_own() {
    let c = Sandbox::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let run = bash(
        &c,
        &format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected; \
             exec 3<>/dev/tcp/192.0.2.1/80 && echo reached"
        ),
    );
    assert!(!run.output.contains("connected"), "{run:?}");
    assert!(run.output.contains("Connection refused"), "{run:?}");
    assert!(run.output.contains("Network is unreachable"), "{run:?}");
    assert!(!run.output.contains("reached"), "{run:?}");
    let run = bash(
        &c,
        "python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 & \
         for i in $(seq 50); do python3 -c \"import urllib.request as u; \
         print(u.urlopen('http://localhost:8765/').status)\" 2>/dev/null && break; sleep 0.1; done",
    );
    assert_eq!(run.output, "200\n", "{run:?}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );

    // Nor can a command reach a host service through a Unix socket.
    if Path::new("/usr/bin/python3").exists() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.sock");
        let _unix = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let script = format!(
            "python3 - <<'EOF'\nimport socket\ns = socket.socket(socket.AF_UNIX)\n\
             s.connect('{}')\nprint('connected')\nEOF",
            path.display()
        );
        let run = bash(&c, &script);
        assert!(!run.output.contains("\nconnected"), "{run:?}");
        assert!(run.output.contains("PermissionError"), "{run:?}");
    }
}

#[test]
fn a_fork_bomb_is_contained_and_the_host_answers() {
    let c = Sandbox::new().with(|p| p.timeout = Duration::from_secs(3));
    let started = Instant::now();
    let run = bash(&c, ":(){ :|:& };:; sleep 1; echo survived");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    assert!(
        run.output.contains("Resource temporarily unavailable"),
        "the process limit did not bind: {run:?}"
    );
    let run = bash(&c, "echo next");
    assert_eq!(run.output, "next\n", "{run:?}");
}

#[test]
fn commands_hold_no_capabilities_and_reach_no_other_process() {
    let c = Sandbox::new();
    let me = std::process::id();
    let run = bash(
        &c,
        &format!("grep -E '^Cap(Eff|Prm|Amb|Bnd)' /proc/self/status; kill -0 {me} || echo denied"),
    );
    for set in ["CapEff", "CapPrm", "CapAmb"] {
        assert!(
            run.output.contains(&format!("{set}:\t0000000000000000")),
            "{run:?}"
        );
    }
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } == 0 {
        assert!(run.output.contains("CapBnd:\t0000000000000000"), "{run:?}");
    }
    // Signals stop at the command's own tree: the test process is not even in its view.
    assert!(run.output.contains("No such process\ndenied"), "{run:?}");
}
