//! What an agent needs for a day's work in bash: a home that keeps its caches, the variables
//! and `PATH` the user chose, settings in cordon's config file (never the workspace's), and
//! the user's git identity.

use serde_json::json;

use crate::util::{Cordon, script};

fn bash(c: &Cordon, command: &str) -> String {
    let run = c.call("bash", json!({ "command": command }));
    assert_eq!(run.code, 0, "{command}: {run:?}");
    run.stdout
}

#[test]
fn the_home_lasts_across_calls_and_sessions_and_private_gives_a_fresh_one() {
    let c = Cordon::new();
    assert_eq!(
        bash(&c, "echo $HOME; echo kept > ~/cache.txt"),
        "/home/cordon\n"
    );
    assert_eq!(bash(&c, "cat ~/cache.txt"), "kept\n");
    let answers = c.session(format!(
        "{}\n",
        json!({"tool": "bash", "input": {"command": "cat ~/cache.txt"}})
    ));
    assert_eq!(answers[0]["output"], "kept\n", "{answers:?}");
    // It lives in cordon's data directory, one per workspace.
    let homes: Vec<_> = std::fs::read_dir(c.data_dir().join("cordon/homes"))
        .unwrap()
        .collect();
    assert_eq!(homes.len(), 1);

    let private = Cordon::new().with_args(&["--bash-home", "private"]);
    bash(&private, "echo x > ~/gone");
    assert_eq!(bash(&private, "ls -A ~ | wc -l"), "0\n");
    assert!(!private.data_dir().join("cordon/homes").exists());

    let other = Cordon::new();
    assert_eq!(
        bash(&other, "cat ~/cache.txt 2>&1 | grep -c 'No such'"),
        "1\n"
    );
}

#[test]
fn a_home_directory_of_the_users_choice() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("note"), "mine\n").unwrap();
    let c = Cordon::new().with_args(&["--bash-home", home.path().to_str().unwrap()]);
    assert_eq!(bash(&c, "cat ~/note; echo new > ~/new"), "mine\n");
    assert_eq!(
        std::fs::read_to_string(home.path().join("new")).unwrap(),
        "new\n"
    );
    let run = Cordon::new()
        .with_args(&["--bash-home", "/nonexistent/home"])
        .call("bash", json!({"command": "true"}));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("cannot use /nonexistent/home as the home of bash commands"),
        "{run:?}"
    );
}

#[test]
fn secret_looking_variables_pass_only_when_named_exactly() {
    let c = Cordon::new().with_args(&[
        "--bash-env",
        "MY_*",
        "--bash-env",
        "MODE=fast",
        "--bash-env",
        "NAMED_TOKEN",
    ]);
    let out = c
        .command()
        .env("MY_SETTING", "s")
        .env("MY_API_TOKEN", "leaked")
        .env("MY_SECRET_KEY", "leaked")
        .env("NAMED_TOKEN", "given")
        .env("UNRELATED", "no")
        .args([
            "call",
            "bash",
            &json!({"command": "echo $MY_SETTING/$MY_API_TOKEN/$MY_SECRET_KEY/$NAMED_TOKEN/$MODE/$UNRELATED"})
                .to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "s///given/fast/\n");
    let run = Cordon::new()
        .with_args(&["--bash-env", "PATH=/evil"])
        .call("bash", json!({"command": "true"}));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("use --bash-path to extend PATH"),
        "{run:?}"
    );
}

/// A toolchain laid out as rustup lays it out in a home, reached through `[bash]` in cordon's
/// config file; a config file planted in the workspace changes nothing.
#[test]
fn the_config_files_bash_table_sets_path_and_variables_and_a_planted_one_is_ignored() {
    let user = tempfile::tempdir().unwrap();
    let bin = user.path().join(".cargo/bin");
    script(&bin.join("cargo"), "cargo 1.95.0-fake");
    std::fs::write(user.path().join("secret"), "no\n").unwrap();
    let config = user.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[bash]\npath = [{:?}]\nenv = [\"CARGO_HOME={}\"]\nhome = \"private\"\n",
            bin.display(),
            user.path().join(".cargo").display()
        ),
    )
    .unwrap();
    let c = Cordon::new().with_args(&["--config", config.to_str().unwrap()]);
    // Planted where a tool could write it: never read.
    c.write(
        ".config/cordon/config.toml",
        "[bash]\nenv = [\"PLANTED=1\"]\nunprotect = [\".git\"]\n",
    );
    c.write("cordon.toml", "[bash]\nenv = [\"PLANTED=1\"]\n");
    let out = bash(
        &c,
        &format!(
            "cargo --version; echo $CARGO_HOME; echo planted=$PLANTED; ls -A ~ | wc -l; \
             cat {} 2>&1 | grep -c 'No such'",
            user.path().join("secret").display()
        ),
    );
    assert_eq!(
        out,
        format!(
            "cargo 1.95.0-fake\n{}\nplanted=\n0\n1\n",
            user.path().join(".cargo").display()
        )
    );
    let run = c.call("write_file", json!({"path": ".git/config", "content": "x"}));
    assert!(run.stdout.contains(".git/config is protected ("), "{run:?}");
}

#[test]
fn commits_carry_the_users_git_identity() {
    let user = tempfile::tempdir().unwrap();
    std::fs::write(
        user.path().join(".gitconfig"),
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n[credential]\n\thelper = store\n",
    )
    .unwrap();
    let c = Cordon::new();
    let out = c
        .command()
        .env("HOME", user.path())
        .env_remove("XDG_CONFIG_HOME")
        .args([
            "call",
            "bash",
            &json!({"command": "git init -q r && cd r && git commit -q --allow-empty -m x \
                                && git log --format='%an <%ae>' && git config credential.helper; echo $?"})
                .to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Ada Lovelace <ada@example.org>\n1\n",
        "{out:?}"
    );
}

/// Fake toolchains laid out as rustup, pyenv and nvm lay them out in a home: found, on
/// `PATH`, their variables set, caches writable, and nothing else of that home readable.
#[test]
fn toolchains_found_in_the_home_are_granted_and_nothing_else_of_it() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin"))
        .unwrap();
    script(&h.join(".cargo/bin/cargo"), "cargo 1.95.0-fake");
    std::fs::write(h.join(".cargo/credentials.toml"), "token = \"secret\"\n").unwrap();
    script(&h.join(".pyenv/shims/python3"), "Python 3.12.1-fake");
    script(&h.join(".nvm/versions/node/v20.11.1/bin/node"), "v20.11.1");
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "KEY\n").unwrap();
    std::fs::write(h.join("notes.txt"), "private\n").unwrap();
    let c = Cordon::new()
        .with_args(&["--toolchains", "--bash-home", "private"])
        .with_env("HOME", &h)
        .with_env("CARGO_HOME", h.join(".cargo"))
        .with_env("RUSTUP_HOME", h.join(".rustup"))
        .with_env("PYENV_ROOT", h.join(".pyenv"))
        .with_env("NVM_DIR", h.join(".nvm"))
        .with_env("GOPATH", h.join("go"));
    let c = c.with_env("XDG_CONFIG_HOME", crate::util::config_home());
    let run = c.call(
        "bash",
        json!({"command": "cargo --version; python3; node; echo $CARGO_HOME $RUSTUP_HOME $PYENV_ROOT $NVM_DIR; \
         echo cached > $CARGO_HOME/registry/index && cat $CARGO_HOME/registry/index; \
         for f in $CARGO_HOME/credentials.toml ~/notes.txt; do cat $f 2>&1 | grep -c 'No such\\|denied'; done; \
         (echo x > $CARGO_HOME/bin/evil) 2>&1 | grep -c 'Read-only'"}),
    );
    let home = h.display();
    assert_eq!(
        run.stdout,
        format!(
            "cargo 1.95.0-fake\nPython 3.12.1-fake\nv20.11.1\n\
             {home}/.cargo {home}/.rustup {home}/.pyenv {home}/.nvm\ncached\n1\n1\n1\n"
        )
    );
    let doctor = c.run(&["doctor"]).stdout;
    for line in [
        "toolchain rustup:".to_string(),
        format!("  PATH  {home}/.cargo/bin"),
        format!("  write {home}/.cargo/registry, {home}/.cargo/git"),
        format!("  env   NVM_DIR={home}/.nvm"),
        "home: empty at every call".to_string(),
    ] {
        assert!(doctor.contains(&line), "{line}:\n{doctor}");
    }
}

/// Without `--toolchains`, a program of the user's toolchains is not found, and the output says
/// which option finds it; a program no toolchain has gets no such note.
#[test]
fn a_toolchain_left_out_is_named_when_its_program_is_not_found() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    script(&h.join(".cargo/bin/cargo"), "cargo 1.95.0-fake");
    let c = Cordon::new()
        .with_env("HOME", &h)
        .with_env("XDG_CONFIG_HOME", crate::util::config_home())
        .with_env("CARGO_HOME", h.join(".cargo"));
    let run = c.call(
        "bash",
        json!({"command": "cargo build; nosuchtool; exit 0"}),
    );
    let note = format!(
        "[cordon: cargo is in {}/.cargo/bin, one of your toolchains, which bash commands get \
         with --toolchains]\n",
        h.display()
    );
    assert!(run.stdout.contains("cargo: command not found\n"), "{run:?}");
    assert!(run.stdout.ends_with(&note), "{run:?}");
    assert!(!run.stdout.contains("[cordon: nosuchtool"), "{run:?}");
}

/// The user's keys stay hidden even when the whole home is granted, unless named exactly.
#[test]
fn keys_and_credentials_stay_hidden_unless_named_exactly() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "KEY\n").unwrap();
    std::fs::write(h.join(".netrc"), "machine x password y\n").unwrap();
    std::fs::write(h.join("notes.txt"), "mine\n").unwrap();
    let c = Cordon::new();
    let run = |extra: &[&std::path::Path], command: &str| {
        let mut cmd = c.command();
        cmd.env("HOME", &h)
            .env("XDG_CONFIG_HOME", c.data_dir().join("config"));
        for path in extra {
            cmd.arg("--bash-read").arg(path);
        }
        let out = cmd
            .args(["call", "bash", &json!({ "command": command }).to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let home = h.display();
    let look = format!(
        "cat {home}/notes.txt; cat {home}/.ssh/id_ed25519 2>&1 | grep -c denied; \
         cat {home}/.netrc | wc -c"
    );
    assert_eq!(run(&[&h], &look), "mine\n1\n0\n");
    assert_eq!(
        run(
            &[&h, &h.join(".ssh")],
            &format!("cat {home}/.ssh/id_ed25519")
        ),
        "KEY\n"
    );
}

/// This machine's own rustup installation builds a crate offline inside the sandbox.
#[test]
fn the_machines_rustup_builds_a_crate_offline() {
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else {
        return;
    };
    let cargo_home = std::env::var_os("CARGO_HOME").map_or(home.join(".cargo"), Into::into);
    if !cargo_home.join("bin/cargo").exists() {
        eprintln!(
            "no rustup installation under {}: nothing to build with",
            home.display()
        );
        return;
    }
    let c = Cordon::new().with_args(&["--toolchains"]);
    c.write(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    c.write("src/main.rs", "fn main() { println!(\"built\"); }\n");
    let run = c.call(
        "bash",
        json!({"command": "cargo build --offline -q && ./target/debug/tiny"}),
    );
    assert_eq!(run.stdout, "built\n", "{run:?}");
}
