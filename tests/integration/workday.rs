//! What an agent needs for a day's work in bash: a home that keeps its caches, the variables
//! and `PATH` the user chose, settings in cordon's config file (never the workspace's), and
//! the user's git identity.

use serde_json::json;

use crate::util::Cordon;

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
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\necho cargo 1.95.0-fake\n").unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
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
