//! The example third-party plugins (`examples/`), each loaded from a plugins directory with its
//! shipped manifest and called through `cordon call`, as docs/plugins.md tells a newcomer to do:
//! `grep`, written in Rust with cordon-kit, `fetch`, which speaks HTTP through the host, and
//! `word_count`, written in Python and built with componentize-py.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use serde_json::json;
use tempfile::TempDir;

use crate::util::{Cordon, Server, plugin_dir, wasm_components};

const GREP_MANIFEST: &str = include_str!("../../examples/grep/grep.toml");
const WORD_COUNT_MANIFEST: &str = include_str!("../../examples/python/word_count.toml");

/// The repository root.
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// A plugins directory holding the `grep` example with its shipped manifest.
fn grep_plugins() -> TempDir {
    let component = wasm_components(&["grep"]).join("grep.wasm");
    plugin_dir("grep", &component, GREP_MANIFEST)
}

/// `cordon` in a fresh workspace with the plugins directory `dir`.
fn with_plugins(dir: &TempDir) -> Cordon {
    Cordon::new().with_args(&["--plugins", dir.path().to_str().unwrap()])
}

/// A workspace to search: matches in several files and directories, and the entries grep
/// leaves out (hidden, too large, not UTF-8).
fn grep_workspace(dir: &TempDir) -> Cordon {
    let cordon = with_plugins(dir);
    cordon.write(
        "src/main.rs",
        "fn main() {\n    let needle = 1;\n    println!(\"{needle}\");\n}\n",
    );
    cordon.write("src/deep/mod.rs", "// a Needle in capitals\n");
    cordon.write("notes.txt", "no match here\nthe needle\r\n");
    cordon.write(".hidden/secret.rs", "needle\n");
    cordon.write(".env", "needle\n");
    cordon.write("big.txt", format!("needle\n{}", "x".repeat(1 << 20)));
    cordon.write("binary.dat", b"needle\n\xff\xfe\n");
    cordon
}

#[test]
fn grep_finds_matches_as_path_line_text() {
    let plugins = grep_plugins();
    let cordon = grep_workspace(&plugins);

    let run = cordon.call("grep", json!({"pattern": "needle"}));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "notes.txt:2:the needle\n\
         src/main.rs:2:    let needle = 1;\n\
         src/main.rs:3:    println!(\"{needle}\");\n\
         [2 files skipped (over 1 MiB, not UTF-8 or unreadable)]"
    );

    let run = cordon.call(
        "grep",
        json!({"pattern": "NEEDLE", "case_insensitive": true, "path": "src", "glob": "*.rs"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "src/deep/mod.rs:1:// a Needle in capitals\n\
         src/main.rs:2:    let needle = 1;\n\
         src/main.rs:3:    println!(\"{needle}\");"
    );

    // A file named explicitly is searched whatever its name.
    let run = cordon.call("grep", json!({"pattern": "needle", "path": ".env"}));
    assert_eq!((run.code, run.stdout.as_str()), (0, ".env:1:needle"));

    let run = cordon.call("grep", json!({"pattern": "haystack", "path": "src"}));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "No matches for \"haystack\" in src (2 files searched)."
    );
}

#[test]
fn grep_stops_at_its_match_cap_with_a_note() {
    let plugins = grep_plugins();
    let cordon = with_plugins(&plugins);
    cordon.write("many.txt", "hit\n".repeat(500));
    let run = cordon.call("grep", json!({"pattern": "hit"}));
    assert_eq!(run.code, 0, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 201, "{}", run.stdout);
    assert_eq!(lines[199], "many.txt:200:hit");
    assert_eq!(
        lines[200],
        "[stopped after 200 matches: there may be more; narrow `pattern`, `path` or `glob`]"
    );
}

#[test]
fn grep_refuses_paths_outside_the_workspace() {
    let plugins = grep_plugins();
    let cordon = grep_workspace(&plugins);
    // A file beside the workspace that a way out would reach.
    let outside = cordon.root().parent().unwrap().join("x");
    for path in ["../x", outside.to_str().unwrap(), "/etc", "~/x"] {
        let run = cordon.call("grep", json!({"pattern": "root", "path": path}));
        assert_eq!(run.code, 1, "{path}: {run:?}");
        assert!(
            run.stdout.contains("is outside the workspace"),
            "{path}: {}",
            run.stdout
        );
    }
    let run = cordon.call("grep", json!({"pattern": "x", "path": "missing"}));
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (1, "missing does not exist")
    );
}

#[test]
fn grep_is_listed_with_its_source_and_checked_with_its_grant() {
    let plugins = grep_plugins();
    let cordon = with_plugins(&plugins);
    let component = plugins.path().join("grep.wasm");

    let run = cordon.run(&["tools"]);
    assert_eq!(run.code, 0, "{run:?}");
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("grep "))
        .unwrap_or_else(|| panic!("grep is not listed:\n{}", run.stdout));
    assert!(line.contains(" search "), "{line}");
    assert!(line.contains(component.to_str().unwrap()), "{line}");

    let run = cordon.run(&["tools", "--json"]);
    let tools: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    let grep = tools.iter().find(|t| t["name"] == "grep").unwrap();
    assert_eq!(grep["kind"], "search");
    assert_eq!(grep["source"], component.to_str().unwrap());
    assert_eq!(grep["input_schema"]["required"], json!(["pattern"]));

    // `plugins check` loads the file as the one plugin (not also through `--plugins`).
    let checker = Cordon::new();
    let run = checker.run(&["plugins", "check", component.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let root = checker.root();
    for expected in [
        format!("plugin grep ({})", component.display()),
        "tool grep (search)".to_string(),
        format!("grant read-only: {}", root.display()),
        "limits: 5 s per call, 64 MiB of memory".to_string(),
    ] {
        assert!(
            run.stdout.contains(&expected),
            "{expected}:\n{}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains("read-write"), "{}", run.stdout);
    assert!(!run.stdout.contains("shell"), "{}", run.stdout);
}

#[test]
fn grep_pinned_to_its_sha256_loads() {
    let component = wasm_components(&["grep"]).join("grep.wasm");
    let pin = sha256_of(&component);
    let plugins = plugin_dir(
        "grep",
        &component,
        &format!("sha256 = \"{pin}\"\n{GREP_MANIFEST}"),
    );
    let cordon = with_plugins(&plugins);
    cordon.write("a.txt", "pinned\n");
    let run = cordon.call("grep", json!({"pattern": "pinned"}));
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "a.txt:1:pinned"),
        "{run:?}"
    );
}

/// The SHA-256 of `file` as `sha256sum` prints it (docs/plugins.md tells users to pin it so).
fn sha256_of(file: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(file)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    text.split_whitespace().next().unwrap().to_string()
}

/// The `word_count` example, built from `examples/python` with componentize-py (from the test
/// venv) into the target's temporary directory once per test run, and only when a source is
/// newer than the last build: the Python component is tens of MB and takes a while to build.
/// The first test to ask also has cordon compile it into the shared cache, so the tests that
/// run at the same time do not all compile it at once.
fn word_count_component() -> &'static Path {
    static COMPONENT: OnceLock<PathBuf> = OnceLock::new();
    COMPONENT.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-example");
        let component = out.join("word_count.wasm");
        let python = crate::python::python();
        let venv = python.parent().unwrap().parent().unwrap();
        let sources = [
            root().join("examples/python/app.py"),
            root().join("wit/cordon.wit"),
            venv.join("cordon-packages.txt"),
        ];
        if !is_newer_than(&component, &sources) {
            build_word_count(&python, &out, &component);
        }
        // Compile it into the shared cache once.
        let plugins = plugin_dir("word_count", &component, WORD_COUNT_MANIFEST);
        let run = Cordon::new().run(&[
            "plugins",
            "check",
            plugins.path().join("word_count.wasm").to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        component
    })
}

/// Whether `file` exists and was modified after every one of `sources`.
fn is_newer_than(file: &Path, sources: &[PathBuf]) -> bool {
    let modified = |path: &Path| path.metadata().and_then(|m| m.modified()).ok();
    let Some(built) = modified(file) else {
        return false;
    };
    sources
        .iter()
        .all(|source| modified(source).is_some_and(|m: SystemTime| m < built))
}

fn build_word_count(python: &Path, out: &Path, component: &Path) {
    // Build from a copy of the app: componentize-py leaves a __pycache__ beside the module.
    let src = out.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::copy(root().join("examples/python/app.py"), src.join("app.py")).unwrap();
    let partial = out.join(format!("word_count.wasm.{}", std::process::id()));
    let componentize_py = python.with_file_name("componentize-py");
    let result = Command::new(&componentize_py)
        .current_dir(&src)
        .arg("-d")
        .arg(root().join("wit"))
        .args(["-w", "plugin", "componentize", "app", "-o"])
        .arg(&partial)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", componentize_py.display()));
    assert!(
        result.status.success(),
        "componentize-py failed to build examples/python:\n{}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    // Renamed into place whole, so a concurrent test run never loads half a component.
    std::fs::rename(&partial, component).unwrap();
}

/// A plugins directory holding the `word_count` example with its shipped manifest.
fn word_count_plugins() -> TempDir {
    plugin_dir("word_count", word_count_component(), WORD_COUNT_MANIFEST)
}

#[test]
#[ignore = "network: installs componentize-py from PyPI"]
fn python_word_count_counts_a_workspace_file() {
    let plugins = word_count_plugins();
    let cordon = with_plugins(&plugins);
    cordon.write("docs/poem.txt", "one two\nthree  four five\n\nsix é");
    let run = cordon.call("word_count", json!({"path": "docs/poem.txt"}));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "docs/poem.txt: 4 lines, 7 words, 31 characters");

    // An absolute path inside the workspace works too.
    let abs = cordon.path("docs/poem.txt");
    let run = cordon.call("word_count", json!({"path": abs}));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.ends_with(": 4 lines, 7 words, 31 characters"));

    cordon.write("latin1.txt", b"caf\xe9\n");
    let failures = [
        ("../x", "../x is outside the workspace"),
        ("/etc/passwd", "/etc/passwd is outside the workspace"),
        ("missing.txt", "missing.txt does not exist"),
        ("docs", "docs is a directory, not a file"),
        ("latin1.txt", "latin1.txt is not UTF-8 text"),
    ];
    for (path, expected) in failures {
        let run = cordon.call("word_count", json!({"path": path}));
        assert_eq!(run.code, 1, "{path}: {run:?}");
        assert!(run.stdout.starts_with(expected), "{path}: {}", run.stdout);
    }
}

#[test]
#[ignore = "network: installs componentize-py from PyPI"]
fn python_word_count_is_listed_and_checked() {
    let plugins = word_count_plugins();
    let cordon = with_plugins(&plugins);
    let component = plugins.path().join("word_count.wasm");

    let run = cordon.run(&["tools", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let tools: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    let tool = tools.iter().find(|t| t["name"] == "word_count").unwrap();
    assert_eq!(tool["kind"], "read");
    assert_eq!(tool["source"], component.to_str().unwrap());

    let checker = Cordon::new();
    let run = checker.run(&["plugins", "check", component.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    for expected in [
        "tool word_count (read)".to_string(),
        format!("grant read-only: {}", checker.root().display()),
        "limits: 5 s per call, 64 MiB of memory".to_string(),
    ] {
        assert!(
            run.stdout.contains(&expected),
            "{expected}:\n{}",
            run.stdout
        );
    }
}

/// The secret the fetch tests' manifests add as a header (cordon's environment holds it).
const SECRET: (&str, &str) = ("CORDON_TEST_FETCH_SECRET", "s3cret-4207-value");

/// `cordon` with the `fetch` example under `manifest`, the user's `consent` for it, and the
/// names `pkg.test` and `other.test` mapped to 127.0.0.1.
fn fetch_cordon(manifest: &str, consent: &str) -> (Cordon, TempDir) {
    let component = wasm_components(&["fetch"]).join("fetch.wasm");
    let plugins = plugin_dir("fetch", &component, manifest);
    let config = plugins.path().join("config.toml");
    std::fs::write(&config, format!("[plugins.fetch]\n{consent}")).unwrap();
    let cordon = Cordon::new()
        .with_args(&[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--add-host",
            "pkg.test=127.0.0.1",
            "--add-host",
            "other.test=127.0.0.1",
        ])
        .with_env(SECRET.0, SECRET.1);
    (cordon, plugins)
}

fn fetch_manifest(port: u16) -> String {
    format!(
        "tools = [\"fetch\"]\n[grants]\nhttp = [\"pkg.test:{port}\"]\n\
         [grants.http_headers.\"pkg.test\"]\nAuthorization = \"Bearer ${{{}}}\"\n",
        SECRET.0
    )
}

#[test]
fn fetch_reaches_its_granted_host_with_a_secret_it_never_holds() {
    let (server, other) = (Server::start(), Server::start());
    let p = server.port;
    let (c, _plugins) = fetch_cordon(
        &fetch_manifest(p),
        &format!(
            "allow_http = [\"pkg.test:{p}\"]\nallow_secrets = [\"{}\"]\n",
            SECRET.0
        ),
    );
    // A redirect is followed (and decided again).
    let run = c.call(
        "fetch",
        json!({"url": format!("http://pkg.test:{p}/moved")}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "Test page\n\nHello\n\nfish & chips\n");

    // The host added the header; the server's echo of it reaches the model redacted.
    let run = c.call("fetch", json!({"url": format!("http://pkg.test:{p}/echo")}));
    assert_eq!(run.code, 0, "{run:?}");
    let sent = format!("authorization: Bearer {}", SECRET.1);
    assert!(
        server.heads()[2]
            .to_ascii_lowercase()
            .contains(&sent.to_ascii_lowercase())
    );
    assert!(!run.stdout.contains(SECRET.1), "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("Bearer [redacted: {}]", SECRET.0)),
        "{run:?}"
    );

    // Another name for the same address, another port: refused, nothing sent.
    for url in [
        format!("http://other.test:{p}/no"),
        format!("http://pkg.test:{}/no", other.port),
        format!("http://127.0.0.1:{p}/no"),
    ] {
        let run = c.call("fetch", json!({ "url": url }));
        assert_eq!(run.code, 1, "{run:?}");
        assert!(run.stdout.contains("cordon refused the request"), "{run:?}");
    }
    assert_eq!(server.heads().len(), 3);
    assert!(other.heads().is_empty());

    // The secret is redacted from every tool's output, bash's included.
    let bash = Cordon::new()
        .with_args(&[
            "--plugins",
            _plugins.path().to_str().unwrap(),
            "--bash-env",
            SECRET.0,
        ])
        .with_args(&[
            "--config",
            _plugins.path().join("config.toml").to_str().unwrap(),
        ])
        .with_env(SECRET.0, SECRET.1);
    let run = bash.call("bash", json!({"command": format!("echo ${}", SECRET.0)}));
    assert_eq!(run.stdout, format!("[redacted: {}]\n", SECRET.0), "{run:?}");
}

#[test]
fn a_plugin_importing_http_loads_only_with_its_grant_and_the_users_consent() {
    let port = 80;
    let cases = [
        // No grant at all: the import is refused at load.
        (
            "tools = [\"fetch\"]\n".to_string(),
            String::new(),
            "wasi:http",
        ),
        // A host the user did not allow.
        (
            fetch_manifest(port),
            format!("allow_secrets = [\"{}\"]\n", SECRET.0),
            "allow_http = [\"pkg.test:80\"]",
        ),
        // A secret the user did not allow.
        (
            fetch_manifest(port),
            "allow_http = [\"pkg.test:80\"]\n".to_string(),
            "allow_secrets = [\"CORDON_TEST_FETCH_SECRET\"]",
        ),
    ];
    for (manifest, consent, expected) in cases {
        let (c, _plugins) = fetch_cordon(&manifest, &consent);
        let run = c.run(&["tools"]);
        assert_ne!(run.code, 0, "{run:?}");
        assert!(run.stderr.contains(expected), "{expected}: {run:?}");
    }
}
