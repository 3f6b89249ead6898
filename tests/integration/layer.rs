//! Workspaces in layers (`--layer`, `cordon layer`): bash and the file tools change a
//! copy-on-write layer, the user's tree changes only at accept, and a protected path is
//! judged there.

use std::process::Command;

use serde_json::json;

use crate::util::{Cordon, Live, Run};

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
    git_apply(copy.path(), &diff);
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
    let dir = c.data_dir().join("cordon/layers/work");
    assert!(!dir.exists());
    assert!(!c.path("new.txt").exists());
    // No mount is left either: it lived in its keeper's mount namespace, and no keeper of the
    // layer runs; none was ever in this one.
    let dir = dir.to_string_lossy();
    assert_eq!(crate::host::processes_with(&dir), Vec::<u32>::new());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*dir), "{mounts}");
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

/// `cordon layer accept` relaxes what the config file's `[bash] unprotect` names, as the
/// calls do.
#[test]
fn accept_takes_the_config_files_unprotect() {
    let user = tempfile::tempdir().unwrap();
    let config = user.path().join("config.toml");
    std::fs::write(&config, "[bash]\nunprotect = [\".envrc\"]\n").unwrap();
    let c = layered().with_args(&["--config", config.to_str().unwrap()]);
    ok(c.call("bash", json!({"command": "echo 'use nix' > .envrc"})));
    ok(c.run(&["layer", "accept", "work"]));
    assert_eq!(c.read(".envrc"), "use nix\n");
}

/// Applies `diff` in `dir` with `git apply`, which must take it.
fn git_apply(dir: &std::path::Path, diff: &str) {
    let mut git = Command::new("git")
        .args(["apply", "-"])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("run git");
    std::io::Write::write_all(&mut git.stdin.take().unwrap(), diff.as_bytes()).unwrap();
    assert!(git.wait().unwrap().success(), "git apply refused:\n{diff}");
}

/// A name made in the layer with control characters, a tab or a quote is quoted in the diff
/// as git quotes it: no terminal obeys it, and `git apply` reads it back.
#[test]
fn odd_names_are_quoted_in_the_diff_as_git_quotes_them() {
    let c = layered();
    let command = r#"printf 'x\n' > "$(printf 'esc\033[2Kname')"; printf 'y\n' > "$(printf 'tab\tname')"; printf 'z\n' > 'say "hi"'"#;
    ok(c.call("bash", json!({ "command": command })));
    let diff = ok(c.run(&["layer", "diff", "work"]));
    assert!(!diff.contains('\x1b'), "{diff:?}");
    assert!(diff.contains(r#"+++ "b/esc\033[2Kname""#), "{diff}");
    assert!(diff.contains(r#"+++ "b/tab\tname""#), "{diff}");
    assert!(diff.contains(r#"+++ "b/say \"hi\"""#), "{diff}");
    let stat = ok(c.run(&["layer", "diff", "work", "--stat"]));
    assert!(
        !stat.contains('\x1b') && stat.contains(r#""esc\033[2Kname""#),
        "{stat:?}"
    );
    let copy = tempfile::tempdir().unwrap();
    git_apply(copy.path(), &diff);
    assert_eq!(
        std::fs::read_to_string(copy.path().join("esc\x1b[2Kname")).unwrap(),
        "x\n"
    );
    assert_eq!(
        std::fs::read_to_string(copy.path().join("tab\tname")).unwrap(),
        "y\n"
    );
    assert_eq!(
        std::fs::read_to_string(copy.path().join("say \"hi\"")).unwrap(),
        "z\n"
    );
}

#[test]
fn a_layer_in_use_accepts_names_that_are_not_utf8_or_hold_escapes() {
    use std::os::unix::ffi::OsStrExt;
    let c = Cordon::new().with_args(&["--layer", "w"]);
    let mut live = Live::start(&c);
    live.bash(r#"printf x > "$(printf 'odd\377')"; printf y > "$(printf 'esc\033[2K')"; printf z > plain.txt"#);
    // Chosen by its exact bytes, from another terminal, while the session runs.
    let odd = std::ffi::OsStr::from_bytes(b"odd\xff");
    let run: Run = c
        .command()
        .args(["layer", "accept", "w"])
        .arg(odd)
        .output()
        .unwrap()
        .into();
    assert_eq!(run.stdout, "added    odd\u{fffd}\n", "{run:?}");
    assert_eq!(std::fs::read(c.root().join(odd)).unwrap(), b"x");
    // The session's answer carries a name that is not UTF-8 as its bytes; the terminal gets
    // an escape shown, not obeyed.
    live.send(json!({"layer": "accept", "paths": ["plain.txt"]}));
    assert_eq!(
        live.receive(),
        json!({"accepted": [{"path": "plain.txt", "kind": "added"}]})
    );
    let run = ok(c.run(&["layer", "accept", "w"]));
    assert_eq!(run, "added    esc\\x1b[2K\n");
    assert_eq!(c.read("esc\x1b[2K"), "y");
    live.bash(r#"printf w > "$(printf 'odd\376')""#);
    live.send(json!({"layer": "accept"}));
    assert_eq!(
        live.receive(),
        json!({"accepted": [{"path": [111, 100, 100, 254], "kind": "added"}]})
    );
    live.finish();
}

/// Runs a bash command in the layer `layer` over the workspace of `c`.
/// Asserts that the data directory holds no layer, nor anything a layer left.
fn assert_no_layer_left(c: &Cordon) {
    let left: Vec<_> = std::fs::read_dir(c.data_dir().join("cordon/layers"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn bash_in(c: &Cordon, layer: &str, command: &str) -> String {
    let input = json!({ "command": command }).to_string();
    ok(c.run(&["--layer", layer, "call", "bash", &input]))
}

/// The paths a unified diff names, in order.
fn paths_of(diff: &str) -> Vec<String> {
    let heads = diff.lines().filter_map(|l| l.strip_prefix("diff --git a/"));
    heads
        .map(|l| l.split(" b/").next().unwrap().to_string())
        .collect()
}

#[test]
fn rollback_restores_a_checkpoint_byte_for_byte() {
    let c = Cordon::new();
    c.write("a.txt", "one\ntwo\n");
    c.write("gone.txt", "bye\n");
    c.write("d/keep", "keep\n");
    let state = "cat a.txt; ls -R; od -c bin; stat -c '%n %a' run.sh; cat d/new 2>&1";
    bash_in(
        &c,
        "work",
        "echo three >> a.txt; rm gone.txt; printf 'x\\0y' > bin; echo hi > run.sh; chmod 755 run.sh; rm -r d; mkdir d; echo n > d/new; mkdir ro; echo f > ro/f; chmod 555 ro",
    );
    let first = ok(c.run(&["layer", "checkpoint", "work", "first"]));
    assert_eq!(first, "first\n");
    let diff_then = ok(c.run(&["layer", "diff", "work"]));
    let seen_then = bash_in(&c, "work", state);

    // Changed, added and deleted after the checkpoint, over two more levels.
    bash_in(
        &c,
        "work",
        "echo four >> a.txt; echo later > later.txt; rm bin; chmod 644 run.sh; echo again > gone.txt",
    );
    assert_eq!(ok(c.run(&["layer", "checkpoint", "work"])), "2\n");
    bash_in(
        &c,
        "work",
        "rm -r d later.txt; echo x > a.txt; mkdir e; echo e > e/f",
    );
    let diff_now = ok(c.run(&["layer", "diff", "work"]));
    assert_eq!(
        paths_of(&diff_now),
        ["a.txt", "d/keep", "e/f", "gone.txt", "ro/f", "run.sh"],
        "{diff_now}"
    );
    assert_eq!(ok(c.run(&["layer", "checkpoints", "work"])), "first\n2\n");

    ok(c.run(&["layer", "rollback", "work", "first"]));
    assert_eq!(ok(c.run(&["layer", "diff", "work"])), diff_then);
    assert_eq!(bash_in(&c, "work", state), seen_then);
    assert_eq!(ok(c.run(&["layer", "checkpoints", "work"])), "first\n");
    // The workspace never changed.
    assert_eq!(c.read("a.txt"), "one\ntwo\n");
    assert_eq!(c.read("gone.txt"), "bye\n");

    let unknown = c.run(&["layer", "rollback", "work", "2"]);
    assert_eq!(unknown.code, 2);
    assert!(
        unknown
            .stderr
            .contains("there is no checkpoint \"2\" in the layer")
            && unknown
                .stderr
                .contains("`cordon layer checkpoints` lists them"),
        "{}",
        unknown.stderr
    );
    let taken = c.run(&["layer", "checkpoint", "work", "first"]);
    assert!(
        taken
            .stderr
            .contains("there is a checkpoint \"first\" already"),
        "{}",
        taken.stderr
    );
    let bad = c.run(&["layer", "checkpoint", "work", "a/b"]);
    assert!(
        bad.stderr
            .contains("cannot use \"a/b\" as a checkpoint label"),
        "{}",
        bad.stderr
    );

    // Accept takes the layer's levels and its upper directory together, into directories
    // a command made read-only too.
    bash_in(&c, "work", "chmod 755 ro; echo g > ro/g; chmod 555 ro");
    ok(c.run(&["layer", "accept", "work"]));
    assert_eq!(c.read("ro/f") + &c.read("ro/g"), "f\ng\n");
    assert_eq!(c.read("a.txt"), "one\ntwo\nthree\n");
    assert!(!c.path("gone.txt").exists() && !c.path("d/keep").exists());
    assert_eq!(c.read("d/new"), "n\n");
    assert_eq!(ok(c.run(&["layer", "diff", "work"])), "");
    assert_eq!(ok(c.run(&["layer", "checkpoints", "work"])), "");
    // What a command made read-only does not keep the layer from being discarded.
    ok(c.run(&["layer", "discard", "work"]));
    assert!(!c.data_dir().join("cordon/layers/work").exists());
}

#[test]
fn twenty_forks_each_end_in_their_own_patch() {
    let c = Cordon::new();
    c.write("a.txt", "one\n");
    bash_in(&c, "base", "echo two >> a.txt");
    ok(c.run(&["layer", "checkpoint", "base", "start"]));
    for i in 0..20 {
        ok(c.run(&["layer", "fork", "base", &format!("f{i}")]));
    }
    for i in 0..20 {
        bash_in(&c, &format!("f{i}"), &format!("echo {i} > f{i}.txt"));
    }
    for i in 0..20 {
        let diff = ok(c.run(&["layer", "diff", &format!("f{i}")]));
        assert_eq!(paths_of(&diff), ["a.txt", &format!("f{i}.txt")], "{diff}");
        assert!(diff.contains(&format!("+++ b/f{i}.txt\n@@ -0,0 +1 @@\n+{i}\n")));
    }
    // The parent is as it was, and so is the workspace.
    let parent = ok(c.run(&["layer", "diff", "base"]));
    assert_eq!(paths_of(&parent), ["a.txt"], "{parent}");
    assert_eq!(bash_in(&c, "base", "ls"), "a.txt\n");
    assert_eq!(c.read("a.txt"), "one\n");

    // A fork keeps the checkpoints; rolling it back leaves the others alone.
    ok(c.run(&["layer", "rollback", "f0", "start"]));
    assert_eq!(paths_of(&ok(c.run(&["layer", "diff", "f0"]))), ["a.txt"]);
    assert_eq!(bash_in(&c, "f1", "cat f1.txt"), "1\n");

    // Accepting a layer whose levels others stack would change their view: refused.
    let refused = c.run(&["layer", "accept", "f1"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("shares its levels with forks"),
        "{}",
        refused.stderr
    );
    assert_eq!(c.read("a.txt"), "one\n");
    let taken = c.run(&["layer", "fork", "base", "f2"]);
    assert!(
        taken.stderr.contains("is a layer already"),
        "{}",
        taken.stderr
    );

    // A fork never used is discarded as any layer.
    ok(c.run(&["layer", "fork", "base", "unused"]));
    ok(c.run(&["layer", "discard", "unused"]));
    assert!(!c.data_dir().join("cordon/layers/unused").exists());

    // Discarding the parent leaves the forks whole; the last one leaves nothing behind.
    ok(c.run(&["layer", "discard", "base"]));
    assert_eq!(bash_in(&c, "f3", "cat a.txt f3.txt"), "one\ntwo\n3\n");
    for i in 0..20 {
        if i != 1 {
            ok(c.run(&["layer", "discard", &format!("f{i}")]));
        }
    }
    // The last fork holds the levels alone, and can be accepted.
    ok(c.run(&["layer", "accept", "f1"]));
    assert_eq!(c.read("a.txt"), "one\ntwo\n");
    assert_eq!(c.read("f1.txt"), "1\n");
    ok(c.run(&["layer", "discard", "f1"]));
    assert_no_layer_left(&c);
}

#[test]
fn a_session_checkpoints_rolls_back_and_forks_its_layer_while_it_runs() {
    let c = Cordon::new().with_args(&["--layer", "work"]);
    c.write("a.txt", "one\n");
    let lines = [
        json!({"tool": "bash", "input": {"command": "echo two >> a.txt"}}),
        json!({"id": "c", "layer": "checkpoint", "label": "first"}),
        json!({"tool": "bash", "input": {"command": "echo three >> a.txt; echo b > b.txt"}}),
        json!({"end_turn": true}),
        json!({"tool": "write_file", "input": {"path": "a.txt", "content": "gone\n"}}),
        json!({"layer": "checkpoints"}),
        json!({"layer": "rollback", "label": "first"}),
        json!({"tool": "bash", "input": {"command": "cat a.txt; ls"}}),
        json!({"tool": "read_file", "input": {"path": "a.txt"}}),
        json!({"layer": "fork", "name": "side"}),
        json!({"tool": "bash", "input": {"command": "echo mine > mine.txt"}}),
        json!({"layer": "diff", "stat": true}),
        json!({"layer": "rollback", "label": "nope"}),
        json!({"layer": "launch"}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = c.session(input);
    assert_eq!(out[1], json!({"id": "c", "checkpoint": "first"}));
    assert_eq!(out[3]["checkpoint"], "2", "{}", out[3]);
    assert_eq!(out[5], json!({"checkpoints": ["first", "2"]}));
    assert_eq!(out[6], json!({"rolled_back": "first"}));
    // The session's commands and file tools see the state of the checkpoint.
    assert_eq!(out[7]["output"], "one\ntwo\na.txt\n", "{}", out[7]);
    assert!(
        out[8]["output"].as_str().unwrap().contains("two"),
        "{}",
        out[8]
    );
    assert_eq!(out[9], json!({"fork": "side"}));
    let stat = out[11]["diff"].as_str().unwrap();
    assert!(
        stat.starts_with(" a.txt    | 1 +\n mine.txt | 1 +\n 2 files changed"),
        "{stat}"
    );
    assert!(
        out[12]["error"]
            .as_str()
            .unwrap()
            .contains("there is no checkpoint \"nope\""),
        "{}",
        out[12]
    );
    assert!(
        out[13]["error"]
            .as_str()
            .unwrap()
            .contains("\"layer\" must be"),
        "{}",
        out[13]
    );
    // The fork is as the layer was when forked.
    let fork = ok(c.run(&["layer", "diff", "side"]));
    assert_eq!(paths_of(&fork), ["a.txt"], "{fork}");
    assert_eq!(c.read("a.txt"), "one\n");
    // Without a layer, the operations are refused with what to do.
    let plain = Cordon::new().session(format!("{}\n", json!({"layer": "diff"})));
    assert!(
        plain[0]["error"]
            .as_str()
            .unwrap()
            .contains("start it with --layer NAME"),
        "{}",
        plain[0]
    );
}

#[test]
fn another_terminal_changes_a_layer_in_use_between_its_calls() {
    let c = Cordon::new().with_args(&["--layer", "deep"]);
    c.write("a.txt", "one\n");
    let mut live = Live::start(&c);
    assert_eq!(live.bash("echo two >> a.txt; cat a.txt"), "one\ntwo\n");
    // From another terminal, the running cordon checkpoints, rolls back and forks its layer
    // between its calls, and its commands see each change.
    assert_eq!(ok(c.run(&["layer", "checkpoint", "deep", "mid"])), "mid\n");
    assert_eq!(
        live.bash("echo three >> a.txt; echo x > x.txt; cat a.txt"),
        "one\ntwo\nthree\n"
    );
    ok(c.run(&["layer", "rollback", "deep", "mid"]));
    assert_eq!(live.bash("cat a.txt; ls"), "one\ntwo\na.txt\n");
    // Forked with the changes since its last checkpoint.
    live.bash("echo four > four.txt");
    ok(c.run(&["layer", "fork", "deep", "other"]));
    assert_eq!(
        paths_of(&ok(c.run(&["layer", "diff", "other"]))),
        ["a.txt", "four.txt"]
    );
    assert_eq!(live.bash("cat four.txt"), "four\n");
    assert_eq!(ok(c.run(&["layer", "checkpoints", "deep"])), "mid\n");
    // Discarded while in use: every change and checkpoint goes at once, the session goes on
    // over the workspace as it is, and the layer goes when the session ends.
    let discarded = c.run(&["layer", "discard", "deep"]);
    assert_eq!(discarded.code, 0, "{discarded:?}");
    assert!(
        discarded.stderr.contains("removes the layer when it ends"),
        "{}",
        discarded.stderr
    );
    assert_eq!(live.bash("cat a.txt; ls"), "one\na.txt\n");
    assert_eq!(ok(c.run(&["layer", "checkpoints", "deep"])), "");
    assert_eq!(ok(c.run(&["layer", "diff", "deep"])), "");
    live.finish();
    let gone = c.run(&["layer", "diff", "deep"]);
    assert!(gone.stderr.contains("there is no layer"), "{gone:?}");
    // The fork keeps the levels it shared.
    assert_eq!(
        paths_of(&ok(c.run(&["layer", "diff", "other"]))),
        ["a.txt", "four.txt"]
    );
    ok(c.run(&["layer", "discard", "other"]));
    assert_no_layer_left(&c);
}

#[test]
fn another_terminal_waits_for_the_running_call_and_accepts_while_the_session_goes_on() {
    let c = Cordon::new().with_args(&["--layer", "w"]);
    c.write("a.txt", "one\n");
    let upper = c.data_dir().join("cordon/layers/w/upper");
    let mut live = Live::start(&c);
    live.send(json!({"tool": "bash", "input": {"command": "echo > started; sleep 1; echo late > late.txt"}}));
    let started = std::time::Instant::now();
    while !upper.join("started").exists() {
        assert!(
            started.elapsed().as_secs() < 30,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The checkpoint is taken once the call has ended: what it wrote last is in it.
    let run = c.run(&["layer", "checkpoint", "w", "after"]);
    assert_eq!(run.stdout, "after\n", "{run:?}");
    assert!(
        run.stderr
            .contains("is running a call; waiting for it to end"),
        "{}",
        run.stderr
    );
    assert_eq!(live.receive()["status"], "completed");
    assert!(
        !upper.join("late.txt").exists(),
        "late.txt was written after the checkpoint"
    );
    // Accepted while the session runs: the user's tree gets it, and the session goes on.
    assert_eq!(
        ok(c.run(&["layer", "accept", "w", "late.txt"])),
        "added    late.txt\n"
    );
    assert_eq!(c.read("late.txt"), "late\n");
    assert_eq!(
        live.bash("cat late.txt; echo two >> a.txt; ls"),
        "late\na.txt\nlate.txt\nstarted\n"
    );
    assert_eq!(
        paths_of(&ok(c.run(&["layer", "diff", "w"]))),
        ["a.txt", "started"]
    );
    // A protected change is refused from there as from an ended session.
    live.bash("mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit");
    let refused = c.run(&["layer", "accept", "w"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("refused, nothing was accepted"),
        "{}",
        refused.stderr
    );
    assert!(!c.root().join(".git").exists());
    live.finish();
}

#[test]
fn no_tool_may_write_the_layers_whose_files_say_what_cordon_mounts() {
    // A command that could write a layer's stack file could have its keeper mount any
    // directory of the user's under the workspace; its workspace file, have accept write there.
    let c = Cordon::new();
    let layers = c.data_dir().join("cordon/layers");
    std::fs::create_dir_all(&layers).unwrap();
    let refused = |args: &[&str]| {
        let refused = c.run(&[args, &["call", "bash", r#"{"command": "true"}"#]].concat());
        assert_eq!(refused.code, 2, "{refused:?}");
        assert!(
            refused.stderr.contains("cordon's layer directory")
                && refused.stderr.contains("XDG_DATA_HOME"),
            "{}",
            refused.stderr
        );
    };
    let data = c.data_dir().display().to_string();
    refused(&["--layer", "w", "--bash-write", &data]);
    refused(&[
        "--layer",
        "w",
        "--bash-write",
        &layers.join("w/levels").display().to_string(),
    ]);
    // Without a layer too: the next cordon with one would mount what was forged.
    refused(&["--bash-write", &data]);
}

#[test]
fn a_command_cannot_change_its_own_layer_through_the_control_socket() {
    // Granted to see the layer's directory, with sockets of any family: the socket is in
    // reach, and the running cordon refuses what comes from its sandbox.
    let c = Cordon::new();
    let data = c.data_dir().display().to_string();
    let c = c.with_args(&["--layer", "w", "--bash-read", &data, "--bash-network"]);
    c.write("a.txt", "one\n");
    c.write(
        "poke.py",
        format!(
            "import socket\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.connect('{data}/cordon/layers/w/control.sock')\n\
             s.sendall(b'{{\"layer\": \"accept\", \"paths\": [], \"unprotect\": [\"/\"]}}\\n')\n\
             print(s.recv(4096).decode())\n"
        ),
    );
    let mut live = Live::start(&c);
    let out =
        live.bash("mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit; python3 poke.py");
    assert!(out.contains("{\"error\":\"refused: "), "{out}");
    assert!(!c.root().join(".git").exists());
    assert_eq!(live.bash("cat .git/hooks/pre-commit"), "evil\n");
    live.finish();
}

#[test]
fn a_session_accepts_its_layers_changes_and_refuses_a_protected_one() {
    let c = Cordon::new().with_args(&["--layer", "work"]);
    c.write("a.txt", "one\n");
    let command =
        "echo two >> a.txt; echo b > b.txt; mkdir -p .git/hooks; echo x > .git/hooks/pre-commit";
    let lines = [
        json!({"tool": "bash", "input": {"command": command}}),
        json!({"layer": "accept", "paths": ["a.txt"]}),
        json!({"layer": "accept"}),
        json!({"layer": "accept", "paths": "b.txt"}),
        json!({"layer": "accept", "paths": ["b.txt", "nope.txt"]}),
        json!({"tool": "bash", "input": {"command": "cat a.txt b.txt"}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = c.session(input);
    assert_eq!(
        out[1],
        json!({"accepted": [{"path": "a.txt", "kind": "modified"}]})
    );
    let refused = out[2]["error"].as_str().unwrap();
    assert!(
        refused.starts_with("refused, nothing was accepted: .git/hooks is protected"),
        "{refused}"
    );
    assert!(
        out[3]["error"]
            .as_str()
            .unwrap()
            .contains("\"paths\" must be a list of paths"),
        "{}",
        out[3]
    );
    assert!(
        out[4]["error"]
            .as_str()
            .unwrap()
            .contains("no change in the layer at nope.txt"),
        "{}",
        out[4]
    );
    assert_eq!(out[5]["output"], "one\ntwo\nb\n");
    assert_eq!(c.read("a.txt"), "one\ntwo\n");
    assert!(!c.root().join("b.txt").exists());
    assert!(!c.root().join(".git").exists());
    // Named with --unprotect when the session started, it is accepted.
    let c = c.with_args(&["--unprotect", ".git/hooks"]);
    let lines = [
        json!({"layer": "accept"}),
        json!({"tool": "bash", "input": {"command": "echo c > c.txt"}}),
        json!({"layer": "discard"}),
        json!({"tool": "bash", "input": {"command": "ls"}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = c.session(input);
    let accepted = out[0]["accepted"].as_array().unwrap();
    assert_eq!(accepted.len(), 2, "{}", out[0]);
    assert_eq!(c.read(".git/hooks/pre-commit"), "x\n");
    // Discarded, the session goes on over the workspace as it is; the layer goes at its end.
    assert_eq!(out[2], json!({"discarded": {"pending": true}}));
    assert_eq!(out[3]["output"], "a.txt\nb.txt\n");
    assert!(!c.root().join("c.txt").exists());
    assert!(!c.data_dir().join("cordon/layers/work").exists());
}

#[test]
fn a_layer_in_use_is_changed_from_its_session_and_a_deep_stack_is_merged() {
    let c = Cordon::new().with_args(&["--layer", "deep"]);
    c.write("a.txt", "one\n");
    let mut live = Live::start(&c);
    assert_eq!(live.bash("echo two >> a.txt; cat a.txt"), "one\ntwo\n");
    // Thirty turns, each a checkpoint: past 24 levels, the lowest are merged.
    for i in 1..=30 {
        live.bash(&format!("echo {i} > f{i}.txt"));
        live.send(json!({"end_turn": true}));
        assert_eq!(live.receive()["checkpoint"], i.to_string());
    }
    ok(c.run(&["layer", "fork", "deep", "other"]));
    live.finish();
    let stack = std::fs::read_to_string(c.data_dir().join("cordon/layers/deep/stack")).unwrap();
    assert_eq!(stack.lines().count(), 24);
    let labels: Vec<String> = (7..=30).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        ok(c.run(&["layer", "checkpoints", "deep"])),
        labels.concat()
    );
    let mut files: Vec<String> = (1..=30).map(|i| format!("f{i}.txt")).collect();
    files.sort();
    files.insert(0, "a.txt".into());
    assert_eq!(paths_of(&ok(c.run(&["layer", "diff", "deep"]))), files);
    assert_eq!(paths_of(&ok(c.run(&["layer", "diff", "other"]))), files);
    ok(c.run(&["layer", "rollback", "deep", "7"]));
    let listed = ok(c.call("bash", json!({"command": "ls | tr '\\n' ' '"})));
    assert_eq!(
        listed,
        "a.txt f1.txt f2.txt f3.txt f4.txt f5.txt f6.txt f7.txt "
    );
    assert_eq!(paths_of(&ok(c.run(&["layer", "diff", "other"]))), files);
}

/// `cordon mcp` driven one request at a time, so that calls run in order.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Mcp {
    fn start(c: &Cordon, args: &[&str]) -> Mcp {
        let mut child = c.spawn(args);
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut mcp = Mcp {
            child,
            stdin,
            stdout,
            id: 0,
        };
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}});
        mcp.ask("initialize", params);
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, line: serde_json::Value) {
        use std::io::Write;
        writeln!(self.stdin, "{line}").unwrap();
    }

    fn ask(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        use std::io::BufRead;
        self.id += 1;
        let id = self.id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        let mut answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        answer["result"].take()
    }

    /// A tool's text, and whether it is an error.
    fn call(&mut self, name: &str, arguments: serde_json::Value) -> (String, bool) {
        let result = self.ask("tools/call", json!({"name": name, "arguments": arguments}));
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        (text.to_string(), result["isError"] == true)
    }
}

#[test]
fn mcp_offers_the_model_diff_checkpoint_and_rollback_never_accept() {
    let c = Cordon::new().with_args(&["--layer", "model"]);
    c.write("a.txt", "one\n");
    let mut mcp = Mcp::start(&c, &["mcp", "--layer-tools"]);
    let listed = mcp.ask("tools/list", json!({}));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("layer_"))
        .collect();
    assert_eq!(names, ["layer_diff", "layer_checkpoint", "layer_rollback"]);

    let edit = json!({"path": "a.txt", "content": "two\n"});
    assert!(!mcp.call("write_file", edit).1);
    let (taken, failed) = mcp.call("layer_checkpoint", json!({"label": "mine"}));
    assert!(
        !failed && taken.starts_with("Checkpoint mine taken"),
        "{taken}"
    );
    mcp.call(
        "bash",
        json!({"command": "echo three > a.txt; echo b > b.txt"}),
    );
    let (diff, _) = mcp.call("layer_diff", json!({}));
    assert!(
        diff.contains("+three") && diff.contains("+++ b/b.txt"),
        "{diff}"
    );
    let (back, failed) = mcp.call("layer_rollback", json!({"label": "mine"}));
    assert!(
        !failed && back.starts_with("Rolled back to checkpoint mine"),
        "{back}"
    );
    let (seen, _) = mcp.call("bash", json!({"command": "cat a.txt; ls"}));
    assert_eq!(seen, "two\na.txt\n");
    let (none, failed) = mcp.call("layer_rollback", json!({}));
    assert!(failed && none.contains("\"label\" is required"), "{none}");
    // Accept is the user's: no such tool.
    let accept = mcp.ask(
        "tools/call",
        json!({"name": "layer_accept", "arguments": {}}),
    );
    assert!(accept.is_null(), "{accept}");
    drop(mcp.stdin);
    assert!(mcp.child.wait().unwrap().success());
    assert_eq!(c.read("a.txt"), "one\n");

    // Without the flag the model gets no such tool; the flag needs a layer.
    let plain = Cordon::new();
    let refused = plain.run(&["mcp", "--layer-tools"]);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("start cordon mcp with --layer NAME too"),
        "{refused:?}"
    );
}

#[test]
fn a_turn_without_changes_keeps_the_sandbox() {
    let c = Cordon::new().with_args(&["--layer", "calm"]);
    let mut live = Live::start(&c);
    let mark = "test -e /tmp/mark && echo kept || echo new";
    live.bash("echo > /tmp/mark");
    live.send(json!({"end_turn": true}));
    assert_eq!(live.receive()["checkpoint"], "1");
    assert_eq!(live.bash(mark), "kept\n");
    // After a change, the checkpoint remounts: a new sandbox over the new mount.
    live.bash("echo x > x.txt");
    live.send(json!({"end_turn": true}));
    assert_eq!(live.receive()["checkpoint"], "2");
    assert_eq!(live.bash(&format!("{mark}; cat x.txt")), "new\nx\n");
    live.finish();
}
