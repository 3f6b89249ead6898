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

/// The library holds a program that embeds it to the same rules as the command line: the
/// workspace's protected paths are read-only, and the `[bash]` table of the user's config file
/// (here: `toolchains = true`) applies.
#[test]
fn an_embedding_program_gets_the_protected_paths_and_the_config_files_bash_table() {
    let workspace = tempfile::tempdir().unwrap();
    let hooks = workspace.path().join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let home = tempfile::tempdir().unwrap();
    let cargo = home.path().join(".cargo/bin/cargo");
    std::fs::create_dir_all(cargo.parent().unwrap()).unwrap();
    std::fs::write(&cargo, "#!/bin/sh\necho cargo 1.95.0-fake\n").unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = home.path().join(".config/cordon");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), "[bash]\ntoolchains = true\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_embed"))
        .arg(workspace.path())
        .arg("cargo --version; echo x > .git/hooks/pre-commit")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("CARGO_HOME", home.path().join(".cargo"))
        .env("RUSTUP_HOME", home.path().join(".rustup"))
        .env("CORDON_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.starts_with("cargo 1.95.0-fake\n"), "{stdout}");
    assert!(
        stdout.contains(".git/hooks/pre-commit: Read-only file system"),
        "{stdout}"
    );
    assert!(!hooks.join("pre-commit").exists());
}
