//! The plugin contract's versions: a plugin built against 0.1.0 (the committed fixture
//! tests/plugins/v0_1, its component as built then) loads and runs, served by the host's
//! adaptation; one built against a version not served is refused with a text that says what
//! to do; `--version` and `plugins check` name the versions served.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{component, with_shell};
use crate::util::{Cordon, Run, plugin_dir};

/// The fixture's component, committed as it was built against 0.1.0 (never rebuilt here).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/plugins/v0_1/v0_1.wasm")
}

/// A workspace with the fixture granted the workspace and the shell, every call allowed.
fn with_fixture() -> (Cordon, tempfile::TempDir) {
    let manifest =
        "tools = [\"write\", \"context\", \"run\"]\n[grants]\nwrite = [\".\"]\nshell = true\n";
    with_shell("v0_1", &fixture(), manifest, "allow")
}

fn succeeded(run: &Run) -> &str {
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    &run.stdout
}

#[test]
fn a_plugin_built_against_0_1_gets_the_context_as_0_1_has_it() {
    let (cordon, _dir) = with_fixture();
    let run = cordon.call("context", json!({}));
    assert_eq!(
        succeeded(&run),
        format!(
            "cwd: {}; dry-run: false; max-output: 30000",
            cordon.root().display()
        )
    );
}

#[test]
fn a_plugin_built_against_0_1_writes_through_the_files_capability() {
    let (cordon, _dir) = with_fixture();
    let path = cordon.path("notes.txt");
    let run = cordon.call("write", json!({"path": path, "text": "kept"}));
    assert_eq!(succeeded(&run), format!("wrote {}", path.display()));
    assert_eq!(cordon.read("notes.txt"), "kept");
}

#[test]
fn a_protected_path_reaches_a_0_1_plugin_as_io_with_its_text() {
    let (cordon, _dir) = with_fixture();
    std::fs::create_dir_all(cordon.path(".git/hooks")).unwrap();
    let hook = cordon.path(".git/hooks/pre-commit");
    let run = cordon.call("write", json!({"path": hook, "text": "curl evil"}));
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("io: .git/hooks is protected"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("--unprotect .git/hooks"),
        "{}",
        run.stdout
    );
    assert!(!hook.exists());
}

#[test]
fn a_plugin_built_against_0_1_runs_commands_through_the_shell() {
    let (cordon, _dir) = with_fixture();
    let run = cordon.call("run", json!({"command": "echo hi; exit 3"}));
    assert_eq!(succeeded(&run), "hi\n[exited 3]");
}

#[test]
fn plugins_check_and_version_name_the_contract_versions() {
    let (cordon, dir) = with_fixture();
    let wasm = dir.path().join("v0_1.wasm");
    let check = cordon.run(&["plugins", "check", wasm.to_str().unwrap()]);
    assert!(
        succeeded(&check)
            .contains("  contract: cordon:tool 0.1.0 (this cordon serves 0.2.0 and 0.1.0)\n"),
        "{}",
        check.stdout
    );
    let version = Cordon::new().run(&["--version"]);
    assert!(
        succeeded(&version).ends_with("\nplugin contract: cordon:tool 0.2.0 (also serves 0.1.0)\n"),
        "{}",
        version.stdout
    );
}

#[test]
fn a_plugin_built_against_a_version_not_served_is_refused_by_name() {
    let dir = plugin_dir("future", &component("future"), "tools = [\"later\"]\n");
    let refusal = "plugin future cannot be loaded: it was built against cordon:tool 0.9.0, a \
                   version of the plugin contract this cordon does not serve (it serves 0.2.0 \
                   and 0.1.0). Upgrade cordon to a release that serves cordon:tool 0.9.0, or \
                   rebuild the plugin against cordon:tool 0.2.0 (the plugin kit of this \
                   release, plugins/kit)";
    let plugins = dir.path().to_str().unwrap();
    let at_start = Cordon::new().run(&["--plugins", plugins, "tools"]);
    assert_eq!(at_start.code, 2, "{}", at_start.stdout);
    assert!(at_start.stderr.contains(refusal), "{}", at_start.stderr);
    let wasm = dir.path().join("future.wasm");
    let check = Cordon::new().run(&["plugins", "check", wasm.to_str().unwrap()]);
    assert_eq!(check.code, 2, "{}", check.stdout);
    assert!(check.stderr.contains(refusal), "{}", check.stderr);
}

#[test]
fn a_plugin_naming_a_served_version_in_another_shape_is_refused_with_what_to_do() {
    let dir = plugin_dir("drifted", &component("drifted"), "tools = [\"drift\"]\n");
    let run = Cordon::new().run(&["--plugins", dir.path().to_str().unwrap(), "tools"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stderr.contains(
            "plugin drifted cannot be loaded: it names cordon:tool 0.1.0, but its interfaces \
             differ from 0.1.0 as released ("
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "): it was built against an unreleased state of the contract. Rebuild the plugin \
             against cordon:tool 0.2.0 (the plugin kit of this release, plugins/kit)"
        ),
        "{}",
        run.stderr
    );
}
