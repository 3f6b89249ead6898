//! cordon's own files (compile cache, config, plugins, cache key) out of every tool's reach:
//! refused at start-up where a tool may write them, authenticated when loaded from the cache,
//! and unwritable through a link planted in the workspace.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use tempfile::TempDir;

use crate::util::{Cordon, Run, plugin_dir, wasm_components};

/// Directories outside the workspace: `xdg` (XDG_CONFIG_HOME, so the tests leave the real
/// config directory alone) and `cache`, a private compile cache.
struct Outside {
    dir: TempDir,
}

impl Outside {
    fn new() -> Self {
        let outside = Outside {
            dir: tempfile::Builder::new()
                .prefix("cordon-own-")
                .tempdir()
                .unwrap(),
        };
        std::fs::create_dir(outside.xdg()).unwrap();
        outside
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    fn xdg(&self) -> PathBuf {
        self.path("xdg")
    }

    fn cache(&self) -> PathBuf {
        self.path("cache")
    }

    /// `cordon` in `cordon`'s workspace, configured from here.
    fn command(&self, cordon: &Cordon) -> Command {
        let mut command = cordon.command();
        command
            .env("XDG_CONFIG_HOME", self.xdg())
            .env("CORDON_CACHE_DIR", self.cache());
        command
    }
}

fn run(mut command: Command, args: &[&str]) -> Run {
    command.args(args).output().expect("run cordon").into()
}

/// Runs `command` with a call of read_file, expects cordon to refuse to start (exit 2) and
/// returns what it said.
fn refused(command: Command) -> String {
    let run = run(command, &["call", "read_file", r#"{"path": "a.txt"}"#]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    run.stderr
}

fn assert_says(stderr: &str, expected: &str) {
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in:\n{stderr}"
    );
}

fn show(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn a_cache_directory_inside_the_workspace_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let cache = cordon.path(".cache/cordon");
    let by_env = {
        let mut command = outside.command(&cordon);
        command.env("CORDON_CACHE_DIR", &cache);
        command
    };
    let by_flag = {
        let mut command = outside.command(&cordon);
        command.arg("--cache-dir").arg(&cache);
        command
    };
    for command in [by_env, by_flag] {
        let stderr = refused(command);
        assert_says(
            &stderr,
            &format!(
                "cordon's cache directory {} lies inside {}, which bash and the edit tools may \
                 write (the workspace): a command could change what cordon loads at its next \
                 start. Move it out with --cache-dir DIR or CORDON_CACHE_DIR",
                show(&cache),
                show(&cordon.root())
            ),
        );
        assert_says(&stderr, "config directory and cache key: XDG_CONFIG_HOME");
        assert!(!cache.exists(), "nothing was compiled into it");
    }
}

#[test]
fn a_config_directory_inside_the_workspace_is_refused_even_before_it_exists() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let mut command = outside.command(&cordon);
    command.env("XDG_CONFIG_HOME", cordon.path("xdg"));
    let stderr = refused(command);
    assert_says(
        &stderr,
        &format!(
            "cordon's config directory {} lies inside {}, which bash and the edit tools may write \
             (the workspace)",
            show(&cordon.path("xdg/cordon")),
            show(&cordon.root())
        ),
    );
    assert_says(&stderr, "Move it out with XDG_CONFIG_HOME");
    assert!(!cordon.path("xdg").exists(), "no key was written there");
}

#[test]
fn a_plugin_directory_inside_the_workspace_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    std::fs::create_dir(cordon.path("plugins")).unwrap();
    let mut command = outside.command(&cordon);
    command.arg("--plugins").arg(cordon.path("plugins"));
    assert_says(
        &refused(command),
        &format!(
            "cordon's plugin directory {} lies inside {}, which bash and the edit tools may \
             write (the workspace): a command could change what cordon loads at its next start. \
             Move it out with --plugins DIR",
            show(&cordon.path("plugins")),
            show(&cordon.root())
        ),
    );
}

#[test]
fn a_bash_write_grant_over_the_cache_or_into_the_config_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let mut over = outside.command(&cordon);
    over.arg("--bash-write").arg(outside.root());
    assert_says(
        &refused(over),
        &format!(
            "cordon's config directory {} lies inside {}, which bash may write (--bash-write)",
            show(&outside.xdg().join("cordon")),
            show(&outside.root())
        ),
    );
    let mut cache_only = outside.command(&cordon);
    std::fs::create_dir(outside.cache()).unwrap();
    cache_only.arg("--bash-write").arg(outside.cache());
    assert_says(
        &refused(cache_only),
        &format!(
            "cordon's cache directory {} is {}, which bash may write (--bash-write)",
            show(&outside.cache()),
            show(&outside.cache())
        ),
    );
    let plugins = outside.xdg().join("cordon/plugins");
    let mut into = outside.command(&cordon);
    into.arg("--bash-write").arg(&plugins);
    assert_says(
        &refused(into),
        &format!(
            "{}, which bash may write (--bash-write), lies inside cordon's config directory {}",
            show(&plugins),
            show(&outside.xdg().join("cordon"))
        ),
    );
}

#[test]
fn a_grant_that_could_read_the_cache_key_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let mut command = outside.command(&cordon);
    command.arg("--bash-read").arg(outside.xdg());
    assert_says(
        &refused(command),
        &format!(
            "cordon's cache key {} lies inside {}, which bash may read (--bash-read): a command \
             could read it and forge the compiled code cordon loads from its cache. Move it out \
             with XDG_CONFIG_HOME",
            show(&outside.xdg().join("cordon/cache.key")),
            show(&outside.xdg())
        ),
    );
}

#[test]
fn a_plugin_write_grant_over_the_config_directory_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let component = wasm_components(&["hostile"]).join("hostile.wasm");
    let manifest = format!(
        "tools = [\"spin\", \"hog\", \"flood\", \"crash\", \"read_path\", \"write_path\", \"env\"]\n\
         [grants]\nwrite = [{:?}]\n",
        show(&outside.xdg())
    );
    let plugins = plugin_dir("hostile", &component, &manifest);
    let consent = outside.path("consent.toml");
    std::fs::write(
        &consent,
        "[plugins.hostile]\nallow_outside_workspace = true\n",
    )
    .unwrap();
    let mut command = outside.command(&cordon);
    command
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--config")
        .arg(&consent);
    assert_says(
        &refused(command),
        &format!(
            "cordon's config directory {} lies inside {}, which plugin hostile may write (a \
             write grant of its manifest)",
            show(&outside.xdg().join("cordon")),
            show(&outside.xdg())
        ),
    );
}

#[test]
fn a_cache_directory_reached_through_a_link_into_the_workspace_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    std::fs::create_dir(cordon.path("cache")).unwrap();
    let link = outside.path("link");
    std::os::unix::fs::symlink(cordon.path("cache"), &link).unwrap();
    let mut command = outside.command(&cordon);
    command.env("CORDON_CACHE_DIR", &link);
    assert_says(
        &refused(command),
        &format!(
            "cordon's cache directory {} ({} through a link) lies inside {}",
            show(&link),
            show(&cordon.path("cache")),
            show(&cordon.root())
        ),
    );
    let names: Vec<_> = std::fs::read_dir(cordon.path("cache")).unwrap().collect();
    assert!(names.is_empty(), "nothing was compiled into it");
}

#[test]
fn a_config_file_with_another_name_is_refused() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let config = outside.path("config.toml");
    std::fs::write(&config, "").unwrap();
    std::fs::hard_link(&config, cordon.path("planted.toml")).unwrap();
    let mut command = outside.command(&cordon);
    command.arg("--config").arg(&config);
    assert_says(
        &refused(command),
        &format!(
            "cordon's config file {} has 2 hard links: another of its names may lie where a \
             command can write it",
            show(&config)
        ),
    );
}

#[test]
fn a_tampered_cached_component_is_compiled_again_never_loaded() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    cordon.write("a.txt", "hello\n");
    let call = || {
        let mut command = outside.command(&cordon);
        command.env("RUST_LOG", "cordon=debug");
        run(command, &["call", "read_file", r#"{"path": "a.txt"}"#])
    };
    let first = call();
    assert_eq!(first.code, 0, "{first:?}");
    let artifacts: Vec<PathBuf> = std::fs::read_dir(outside.cache())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let artifact = &artifacts[0];
    let key = outside.xdg().join("cordon/cache.key");
    assert_eq!(std::fs::read(&key).unwrap().len(), 32, "the key was made");

    // What a command that could write the cache would do: patch the machine code.
    let mut code = std::fs::read(artifact).unwrap();
    let middle = code.len() / 2;
    code[middle..middle + 16].fill(0xcc);
    std::fs::write(artifact, &code).unwrap();
    let second = call();
    assert_eq!(second.code, 0, "{second:?}");
    assert!(second.stdout.contains("hello"), "{second:?}");
    assert_says(
        &second.stderr,
        "cached component failed authentication; compiling again",
    );
    assert_says(&second.stderr, "compiled component");
    assert!(
        !second
            .stderr
            .contains("loaded compiled component from cache")
    );

    // Overwritten with an authentic one, which the next start loads.
    let third = call();
    assert_says(&third.stderr, "loaded compiled component from cache");

    // An artifact compiled under another key (another user's cache) is not loaded either.
    let other = Outside::new();
    let mut command = other.command(&cordon);
    command.env("CORDON_CACHE_DIR", outside.path("other-cache"));
    assert_eq!(
        run(command, &["call", "read_file", r#"{"path": "a.txt"}"#]).code,
        0
    );
    let name = artifact.file_name().unwrap();
    std::fs::copy(outside.path("other-cache").join(name), artifact).unwrap();
    assert_says(
        &call().stderr,
        "cached component failed authentication; compiling again",
    );
}

#[test]
fn bash_and_write_file_cannot_write_cordons_files_through_a_link_in_the_workspace() {
    let cordon = Cordon::new();
    let outside = Outside::new();
    let warm = run(
        outside.command(&cordon),
        &["call", "bash", r#"{"command": "true"}"#],
    );
    assert_eq!(warm.code, 0, "{warm:?}");
    let artifact = std::fs::read_dir(outside.cache())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let config = outside.xdg().join("cordon");
    std::os::unix::fs::symlink(outside.cache(), cordon.path("c")).unwrap();
    std::os::unix::fs::symlink(&config, cordon.path("cfg")).unwrap();
    let call = |tool: &str, input: serde_json::Value| {
        run(
            outside.command(&cordon),
            &["call", tool, &input.to_string()],
        )
    };
    for (rel, written) in [
        ("c/x.cwasm", outside.cache().join("x.cwasm")),
        ("cfg/config.toml", config.join("config.toml")),
    ] {
        let bash = call("bash", json!({"command": format!("echo x > {rel}")}));
        assert!(
            bash.stdout.ends_with("[exit code: exit status 1]"),
            "{bash:?}"
        );
        let write = call("write_file", json!({"path": rel, "content": "x"}));
        assert_eq!(write.code, 1, "{write:?}");
        assert!(!written.exists(), "{} was written", written.display());
    }
    let before = std::fs::read(&artifact).unwrap();
    let linked = call(
        "bash",
        json!({"command": format!("ln {} hard", show(&artifact))}),
    );
    assert!(
        linked.stdout.ends_with("[exit code: exit status 1]"),
        "no hard link from outside: {linked:?}"
    );
    let appended = call(
        "bash",
        json!({"command": format!("echo x >> {}", show(&artifact))}),
    );
    assert!(
        appended.stdout.ends_with("[exit code: exit status 1]"),
        "{appended:?}"
    );
    assert_eq!(std::fs::read(&artifact).unwrap(), before);
}
