//! Third-party plugins: loading from a plugin directory, grants from the manifest and the
//! user's consent, and the hard limits on each call, shown with a plugin that misbehaves on
//! purpose (tests/plugins/hostile).

mod contract;

use std::path::PathBuf;

use serde_json::json;

use crate::protect::{protected_contents, repository};
use crate::util::{Cordon, Run, plugin_dir, wasm_components};

const HOSTILE_TOOLS: &str = r#"tools = ["spin", "hog", "flood", "crash", "read_path", "write_path", "sneak", "open_path", "env", "change"]"#;

fn component(package: &str) -> PathBuf {
    wasm_components(&[package]).join(format!("{package}.wasm"))
}

/// A workspace with the plugin `name` (the component `from`, the manifest `manifest`, which
/// grants the shell) allowed the shell by the user, its calls under `permissions`; and the
/// plugin directory, which must outlive the runs.
fn with_shell(
    name: &str,
    from: &std::path::Path,
    manifest: &str,
    permissions: &str,
) -> (Cordon, tempfile::TempDir) {
    let dir = plugin_dir(name, from, manifest);
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("[plugins.{name}]\nallow_shell = true\n")).unwrap();
    let cordon = Cordon::new().with_args(&[
        "--plugins",
        dir.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--permissions",
        permissions,
    ]);
    (cordon, dir)
}

/// Loads the component of `package` as plugin `name` under `manifest`, expects cordon to refuse
/// to start (exit 2), and returns what it said.
fn refused_at_load(name: &str, package: &str, manifest: &str) -> String {
    let dir = plugin_dir(name, &component(package), manifest);
    let cordon = Cordon::new().with_args(&["--plugins", dir.path().to_str().unwrap()]);
    let run = cordon.run(&["tools"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    run.stderr
}

/// A workspace with the hostile plugin loaded under `manifest` (after the tools line).
pub(crate) fn hostile(manifest: &str) -> (Cordon, tempfile::TempDir) {
    with_hostile(Cordon::new(), manifest)
}

/// `cordon` with the hostile plugin loaded under `manifest`, and the plugins' directory.
pub(crate) fn with_hostile(cordon: Cordon, manifest: &str) -> (Cordon, tempfile::TempDir) {
    let dir = plugin_dir(
        "hostile",
        &component("hostile"),
        &format!("{HOSTILE_TOOLS}\n{manifest}"),
    );
    let cordon = cordon.with_args(&["--plugins", dir.path().to_str().unwrap()]);
    (cordon, dir)
}

#[test]
fn an_infinite_loop_is_stopped_at_its_deadline_and_the_host_goes_on() {
    let (cordon, _dir) = hostile("[limits]\ntimeout_secs = 1\n");
    let lines = "{\"tool\": \"spin\", \"input\": {}}\n{\"tool\": \"env\", \"input\": {}}\n";
    let started = std::time::Instant::now();
    let out = cordon.session(lines);
    assert_eq!(out[0]["status"], "failed");
    assert_eq!(
        out[0]["output"],
        "the hostile plugin ran past its 1 s limit and was stopped; the call had no result"
    );
    assert_eq!(
        out[1]["status"], "completed",
        "the next call runs: {}",
        out[1]
    );
    assert!(started.elapsed().as_secs() < 20);
}

#[test]
fn a_memory_bomb_is_refused_at_the_cap() {
    let (cordon, _dir) = hostile("[limits]\nmemory_mib = 32\n");
    let run = cordon.call("hog", json!({}));
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "the hostile plugin needed more than its 32 MiB of memory and was stopped; the call had no result"
    );
}

#[test]
fn a_stdout_flood_is_bounded_and_never_reaches_the_host_stdout() {
    let (cordon, _dir) = hostile("");
    let run = cordon.call("flood", json!({}));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "flooded");
    assert!(
        run.stderr.len() < 64 * 1024,
        "stderr got {} bytes",
        run.stderr.len()
    );
}

#[test]
fn a_trap_fails_one_call_and_the_next_succeeds() {
    let (cordon, _dir) = hostile("");
    let lines = "{\"tool\": \"crash\", \"input\": {}}\n{\"tool\": \"env\", \"input\": {}}\n";
    let out = cordon.session(lines);
    assert_eq!(out[0]["status"], "failed");
    let text = out[0]["output"].as_str().unwrap();
    assert!(
        text.starts_with("the hostile plugin crashed while running crash"),
        "{text}"
    );
    assert_eq!(out[1]["status"], "completed");
}

#[test]
fn reading_or_writing_outside_the_grants_fails() {
    let (cordon, _dir) = hostile("[grants]\nread = [\".\"]\n");
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let read = cordon.call("read_path", json!({"path": secret}));
    assert_eq!(read.code, 1);
    assert!(!read.stdout.contains("top secret"));
    cordon.write("inside.txt", "visible");
    let inside = cordon.call("read_path", json!({"path": cordon.path("inside.txt")}));
    assert_eq!(inside.stdout, "visible", "the read grant works");
    for target in [outside.path().join("new.txt"), cordon.path("new.txt")] {
        let write = cordon.call("write_path", json!({"path": target}));
        assert_eq!(write.code, 1, "{}", write.stdout);
        assert!(!target.exists(), "{} was created", target.display());
    }
}

#[test]
fn a_plugin_sees_only_the_environment_variables_it_declares() {
    let (cordon, _dir) = hostile("[grants]\nenv = [\"CORDON_TEST_VISIBLE\"]\n");
    let run = cordon
        .command()
        .env("CORDON_TEST_VISIBLE", "yes")
        .env("CORDON_TEST_SECRET", "no")
        .args(["call", "env"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "CORDON_TEST_VISIBLE=yes"
    );
}

#[test]
fn importing_the_shell_without_the_grant_is_refused_at_load() {
    let stderr = refused_at_load("sh", "bash", "tools = [\"bash\"]\n");
    assert!(
        stderr.contains("plugin sh imports cordon:tool/shell@0.2.0, which it was not granted"),
        "{stderr}"
    );
}

#[test]
fn the_shell_grant_needs_the_users_consent() {
    let stderr = refused_at_load("sh", "bash", "tools = [\"bash\"]\n[grants]\nshell = true\n");
    assert!(stderr.contains("allow_shell = true"), "{}", stderr);
}

#[test]
fn a_sha256_mismatch_is_refused() {
    let (cordon, _dir) = hostile(&format!("sha256 = \"{}\"\n", "0".repeat(64)));
    let run = cordon.run(&["tools"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("but its manifest pins"),
        "{}",
        run.stderr
    );
    let bytes = std::fs::read(component("hostile")).unwrap();
    let pin = cordon::manifest::sha256_hex(&bytes);
    let (pinned, _dir) = hostile(&format!("sha256 = \"{pin}\"\n"));
    assert_eq!(pinned.run(&["tools"]).code, 0);
}

#[test]
fn a_name_collision_is_refused() {
    let stderr = refused_at_load(
        "reader",
        "read_file",
        "tools = [\"read_file\"]\n[grants]\nread = [\".\"]\n",
    );
    assert!(
        stderr.contains("plugin reader declares the tool \"read_file\", which the built-in tools already declare"),
        "{}",
        stderr
    );
}

#[test]
fn a_one_shot_call_of_a_colliding_tool_is_refused_too() {
    let dir = plugin_dir(
        "reader",
        &component("read_file"),
        "tools = [\"read_file\"]\n[grants]\nread = [\".\"]\n",
    );
    let cordon = Cordon::new().with_args(&["--plugins", dir.path().to_str().unwrap()]);
    cordon.write("a.txt", "x");
    let run = cordon.call("read_file", json!({"path": "a.txt"}));
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("already declare"), "{}", run.stderr);
}

#[test]
fn undeclared_tools_and_missing_manifests_are_refused() {
    let dir = plugin_dir("hostile", &component("hostile"), "tools = [\"spin\"]\n");
    let cordon = Cordon::new().with_args(&["--plugins", dir.path().to_str().unwrap()]);
    let run = cordon.run(&["tools"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("list every tool in the manifest"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(dir.path().join("hostile.toml")).unwrap();
    let run = cordon.run(&["tools"]);
    assert!(run.stderr.contains("has no manifest"), "{}", run.stderr);
}

#[test]
fn grants_outside_the_workspace_and_raised_limits_need_consent() {
    let outside = tempfile::tempdir().unwrap();
    let manifest = format!(
        "[grants]\nread = [{:?}]\n[limits]\ntimeout_secs = 30\n",
        outside.path().to_str().unwrap()
    );
    let (cordon, dir) = hostile(&manifest);
    let refused = cordon.run(&["tools"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("allow_outside_workspace = true"),
        "{}",
        refused.stderr
    );

    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[plugins.hostile]\nallow_outside_workspace = true\n",
    )
    .unwrap();
    let config_arg = ["--config", config.to_str().unwrap()];
    let run = cordon.run(&[&config_arg[..], &["tools"]].concat());
    assert!(
        run.stderr.contains("max_timeout_secs = 30"),
        "{}",
        run.stderr
    );

    std::fs::write(
        &config,
        "[plugins.hostile]\nallow_outside_workspace = true\nmax_timeout_secs = 30\n",
    )
    .unwrap();
    std::fs::write(outside.path().join("granted.txt"), "granted").unwrap();
    let path = outside.path().join("granted.txt");
    let input = json!({"path": path}).to_string();
    let run = cordon.run(&[&config_arg[..], &["call", "read_path", &input]].concat());
    assert_eq!(run.stdout, "granted", "{}", run.stderr);
}

#[test]
fn tools_and_plugins_check_show_where_a_tool_comes_from_and_its_grants() {
    let (cordon, dir) =
        hostile("[grants]\nread = [\".\"]\n[limits]\ntimeout_secs = 2\nmemory_mib = 16\n");
    let wasm = dir.path().join("hostile.wasm");
    let tools = cordon.run(&["tools"]);
    assert!(
        tools
            .stdout
            .lines()
            .any(|l| l.starts_with("spin") && l.contains(wasm.to_str().unwrap())),
        "{}",
        tools.stdout
    );
    let plain = Cordon::new();
    let check = plain.run(&["plugins", "check", wasm.to_str().unwrap()]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check.stdout.contains("tool spin (other)"),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains(&format!("grant read-only: {}", plain.root().display())),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains("limits: 2 s per call, 16 MiB of memory"),
        "{}",
        check.stdout
    );
    let installed = cordon.run(&["plugins", "check", wasm.to_str().unwrap()]);
    assert_eq!(
        installed.code, 0,
        "an installed plugin checks too: {}",
        installed.stderr
    );
}

/// The hostile plugin with a write grant on the workspace: `sneak` declares kind `read` and
/// writes its `path`, so it must be treated as an edit.
fn sneaky(extra_args: &[&str]) -> (Cordon, tempfile::TempDir) {
    let (cordon, dir) = hostile("[grants]\nwrite = [\".\"]\n");
    (cordon.with_args(extra_args), dir)
}

/// A `cordon session` that calls `tool` on `path` and answers `reject_once` if asked; the
/// lines it printed.
fn rejected_in_session(
    cordon: &Cordon,
    tool: &str,
    path: &std::path::Path,
) -> Vec<serde_json::Value> {
    let request = json!({"id": 1, "tool": tool, "input": {"path": path}});
    let lines = format!("{request}\n{{\"permission\": \"reject_once\"}}\n");
    let run = cordon.run_with_stdin(&["session"], &lines);
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_read_tool_of_a_plugin_with_a_write_grant_is_refused_under_deny() {
    let (cordon, _dir) = sneaky(&["--permissions", "deny"]);
    let target = cordon.path("pwned.txt");
    let run = cordon.call("sneak", json!({"path": target}));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "[sneak rejected by the user: nothing was written]"
    );
    assert!(!target.exists(), "the plugin wrote without permission");
}

#[test]
fn a_read_tool_of_a_plugin_with_a_write_grant_is_asked_about() {
    let (cordon, _dir) = sneaky(&["--permissions", "ask"]);
    let target = cordon.path("pwned.txt");
    let out = rejected_in_session(&cordon, "sneak", &target);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0]["permission_request"]["kind"], "edit", "{}", out[0]);
    assert_eq!(
        out[1]["output"],
        "[sneak rejected by the user: nothing was written]"
    );
    assert!(!target.exists(), "the plugin wrote without permission");
}

#[test]
fn a_permission_preview_runs_under_read_only_grants() {
    // write_path ignores the dry run and writes at once: the preview before the question must
    // not be able to.
    let (cordon, _dir) = sneaky(&["--permissions", "ask"]);
    let target = cordon.path("pwned.txt");
    let first = &rejected_in_session(&cordon, "write_path", &target)[0];
    // The preview failed to write, so there is nothing to ask about: the call fails.
    assert_eq!(first["status"], "failed", "{first}");
    assert!(
        first["output"]
            .as_str()
            .unwrap()
            .starts_with("write failed"),
        "{first}"
    );
    assert!(!target.exists(), "the dry run wrote");
}

#[test]
fn tools_and_plugins_check_show_the_kind_the_grants_impose() {
    let (cordon, dir) = sneaky(&[]);
    let tools = cordon.run(&["tools"]);
    let line = tools
        .stdout
        .lines()
        .find(|l| l.starts_with("sneak"))
        .unwrap_or_else(|| panic!("{}", tools.stdout));
    assert!(
        line.contains(" edit ")
            && line.ends_with("(declares read, but its plugin holds a write grant)"),
        "{line}"
    );
    let json = cordon.run(&["tools", "--json"]);
    let tools: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let sneak = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sneak")
        .unwrap();
    assert_eq!(sneak["kind"], "edit");
    assert_eq!(sneak["declared_kind"], "read");
    let wasm = dir.path().join("hostile.wasm");
    let check = cordon.run(&["plugins", "check", wasm.to_str().unwrap()]);
    assert!(
        check
            .stdout
            .contains("tool sneak (edit; declares read, but its plugin holds a write grant)"),
        "{}",
        check.stdout
    );
}

#[test]
fn a_tool_of_a_plugin_with_the_shell_is_an_execute_tool() {
    let manifest = format!("{HOSTILE_TOOLS}\n[grants]\nshell = true\n");
    let (cordon, _dir) = with_shell("hostile", &component("hostile"), &manifest, "deny");
    let run = cordon.call("env", json!({}));
    assert_eq!(
        run.stdout, "[command rejected by the user]",
        "{}",
        run.stderr
    );
}

#[test]
fn limits_out_of_their_range_are_refused_at_load() {
    let huge = "9223372036854775807";
    let dir = plugin_dir(
        "hostile",
        &component("hostile"),
        &format!("{HOSTILE_TOOLS}\n[limits]\ntimeout_secs = {huge}\n"),
    );
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[plugins.hostile]\nmax_timeout_secs = {huge}\nmax_memory_mib = 17592186044416\n"),
    )
    .unwrap();
    let args = [
        "--plugins",
        dir.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "tools",
    ];
    let cordon = Cordon::new();
    let run = cordon.run(&args);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains(&format!(
            "its [limits] timeout_secs = {huge} is out of range: it must be 1 to 3600 seconds"
        )),
        "{}",
        run.stderr
    );
    std::fs::write(
        dir.path().join("hostile.toml"),
        format!("{HOSTILE_TOOLS}\n[limits]\nmemory_mib = 17592186044416\n"),
    )
    .unwrap();
    let run = cordon.run(&args);
    assert!(
        run.stderr
            .contains("memory_mib = 17592186044416 is out of range: it must be 1 to 1024 MiB"),
        "{}",
        run.stderr
    );
    std::fs::write(dir.path().join("hostile.toml"), HOSTILE_TOOLS).unwrap();
    let run = cordon.run(&args);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains(&format!(
            "[plugins.hostile] max_timeout_secs in {} = {huge} is out of range",
            config.display()
        )),
        "{}",
        run.stderr
    );
}

#[test]
fn a_plugin_granted_a_secret_header_never_holds_the_secret() {
    let dir = plugin_dir(
        "hostile",
        &component("hostile"),
        &format!(
            "{HOSTILE_TOOLS}\n[grants]\nhttp = [\"pkg.test\"]\n\
             [grants.http_headers.\"pkg.test\"]\nAuthorization = \"Bearer ${{CORDON_TEST_HELD}}\"\n"
        ),
    );
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[plugins.hostile]\nallow_http = [\"pkg.test\"]\nallow_secrets = [\"CORDON_TEST_HELD\"]\n",
    )
    .unwrap();
    let cordon = Cordon::new()
        .with_args(&["--plugins", dir.path().to_str().unwrap()])
        .with_args(&["--config", config.to_str().unwrap()])
        .with_env("CORDON_TEST_HELD", "held-secret-value");
    let run = cordon.call("env", json!({}));
    assert_eq!(run.code, 0, "{run:?}");
    // Not in its environment (the value would be redacted from the output; the name would not).
    assert!(!run.stdout.contains("CORDON_TEST_HELD"), "{run:?}");
}

/// A plugin that writes through WASI directly, not the `files` capability, is held to the
/// workspace's protected paths all the same (root only: the unprivileged pass cannot build
/// the hostile component).
#[test]
fn a_plugin_changing_files_through_wasi_is_refused_protected_paths() {
    let (c, _plugin) = with_hostile(repository(), "[grants]\nwrite = [\".\"]\n");
    std::fs::create_dir(c.path("g")).unwrap();
    let before = protected_contents(&c);
    // The hostile plugin's `change` of `path` (and `to`, both in the workspace).
    fn change(c: &Cordon, op: &str, path: &str, to: &str) -> Run {
        let at = |p: &str| c.path(p).to_string_lossy().into_owned();
        let to = if op == "symlink" { to.into() } else { at(to) };
        c.call("change", json!({"op": op, "path": at(path), "to": to}))
    }
    std::os::unix::fs::symlink(".git", c.path("git-link")).unwrap();
    std::os::unix::fs::symlink(".git/hooks/post-merge", c.path("dangling")).unwrap();
    for (op, path, to, shown) in [
        ("append", ".git/config", "", ".git/config"),
        ("append", ".git/hooks/post-merge", "", ".git/hooks"),
        ("append", ".vscode/tasks.json", "", ".vscode"),
        ("append", ".envrc", "", ".envrc"),
        // Through a link to the git directory, and a dangling link to a new hook.
        ("append", "git-link/hooks/pre-commit", "", ".git/hooks"),
        ("append", "dangling", "", ".git/hooks"),
        ("mkdir", ".devcontainer", "", ".devcontainer"),
        ("remove", ".git/hooks/pre-commit", "", ".git/hooks"),
        // A hard link to a protected file would change it; a moved git directory would no
        // longer protect its hooks.
        ("link", ".git/config", "config-copy", ".git/config"),
        ("rename", ".git", "g/moved", ".git"),
        ("rename", "a.txt", ".git/hooks/pre-push", ".git/hooks"),
        (
            "symlink",
            ".git/hooks/pre-push",
            "/etc/passwd",
            ".git/hooks",
        ),
    ] {
        let run = change(&c, op, path, to);
        assert_eq!(run.code, 1, "{op} {path}: {run:?}");
        assert!(
            run.stdout
                .contains(&format!("[cordon: refused: {shown} is protected (")),
            "{op} {path}: {run:?}"
        );
        assert!(
            run.stdout
                .contains(&format!("allow it with --unprotect {shown}]")),
            "{op} {path}: {run:?}"
        );
    }
    assert_eq!(protected_contents(&c), before);
    for absent in [
        ".git/hooks/post-merge",
        ".devcontainer",
        "config-copy",
        "g/moved",
        ".envrc",
    ] {
        assert!(!c.path(absent).exists(), "{absent} was created");
    }
    // The rest of the workspace, the git objects included, is the plugin's to change.
    for (op, path, to) in [
        ("append", "notes.txt", ""),
        ("mkdir", "src", ""),
        ("rename", "notes.txt", "src/notes.txt"),
        ("append", "src/.vscode-like", ""),
        ("append", ".git/objects/new", ""),
    ] {
        let run = change(&c, op, path, to);
        assert_eq!(run.stdout, "changed", "{op} {path}");
    }
    // `--unprotect` relaxes the one path for the plugin too.
    let c = c.with_args(&["--unprotect", ".vscode"]);
    let run = change(&c, "append", ".vscode/tasks.json", "");
    assert_eq!(run.stdout, "changed", "{run:?}");
}

#[test]
fn a_manifest_entry_that_matches_nothing_is_refused_at_load_and_by_plugins_check() {
    let header = |key: &str| {
        format!(
            "{HOSTILE_TOOLS}\n[grants]\nhttp = [\"localhost:8080\"]\n\
             [grants.http_headers.{key:?}]\nAuthorization = \"Bearer ${{CORDON_TEST_HELD}}\"\n"
        )
    };
    for (manifest, refusal) in [
        (
            header("localhost:8080"),
            "plugin hostile cannot be loaded: its [grants.http_headers.\"localhost:8080\"] adds \
             its headers to no request: a request's headers are chosen by its host as its URL \
             names it, without a scheme, port or path; write [grants.http_headers.\"localhost\"]",
        ),
        (
            header("api.test"),
            "plugin hostile cannot be loaded: its [grants.http_headers.\"api.test\"] adds its \
             headers to no request: api.test is not a host its [grants] http allows \
             (localhost:8080); add it there, or correct the name",
        ),
        (
            format!("{HOSTILE_TOOLS}\n[grants]\nenv = [\"HOME=/tmp\"]\n"),
            "plugin hostile cannot be loaded: its [grants] env entry \"HOME=/tmp\" passes \
             nothing",
        ),
    ] {
        let stderr = refused_at_load("hostile", "hostile", &manifest);
        assert!(stderr.contains(refusal), "{stderr}");
        let dir = plugin_dir("hostile", &component("hostile"), &manifest);
        let wasm = dir.path().join("hostile.wasm");
        let check = Cordon::new().run(&["plugins", "check", wasm.to_str().unwrap()]);
        assert_eq!(check.code, 2, "{}", check.stdout);
        assert!(check.stderr.contains(refusal), "{}", check.stderr);
    }
}
