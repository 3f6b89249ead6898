//! The example runs a bash command through the library, confined: what the command writes in
//! the workspace lands there, and nothing outside the workspace can be written or read.

use std::process::Command;

#[test]
fn an_embedding_program_runs_a_confined_bash_call() {
    let workspace = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let probe = outside.path().join("escaped");
    let command = format!(
        "echo inside > made.txt && cat made.txt; echo out > {} || echo refused; \
         cat /etc/shadow >/dev/null 2>&1 || echo unreadable",
        probe.display()
    );
    let run = Command::new(env!("CARGO_BIN_EXE_embed"))
        .arg(workspace.path())
        .arg(&command)
        .env("CORDON_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "inside", "{stdout}");
    assert!(lines.contains(&"refused"), "{stdout}");
    assert!(lines.contains(&"unreadable"), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("made.txt")).unwrap(),
        "inside\n"
    );
    assert!(!probe.exists(), "the command wrote outside the workspace");
}

#[test]
fn without_arguments_it_says_how_to_call_it() {
    let run = Command::new(env!("CARGO_BIN_EXE_embed")).output().unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        "usage: embed WORKSPACE COMMAND\n"
    );
}
