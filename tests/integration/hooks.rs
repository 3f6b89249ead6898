//! Git hooks and config planted through bash, the ways an attacker tried: a git directory
//! renamed away and back over two calls, a repository made during a call (at the root and
//! nested), a submodule's or work tree's git directory, a `.git` file or link pointing at a
//! directory of the attacker's. After each, nothing git would run is left in the workspace,
//! and what git made for the agent's own work still works.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::protect::{protected_contents, repository};
use crate::util::{Cordon, Live};

/// Every hook in the workspace that git would run: an executable file in a `hooks`
/// directory, named as git names hooks (not a sample, not quarantined).
fn runnable_hooks(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let in_hooks = dir.file_name().is_some_and(|n| n == "hooks");
            let executable = meta.permissions().mode() & 0o111 != 0 || meta.is_symlink();
            if in_hooks && executable && !name.contains('.') {
                found.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found
}

/// Runs git on the host in `dir`, as the user would after the agent's turn.
fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git")
}

const PLANT: &str = "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > HOOK && chmod +x HOOK";

fn plant(hook: &str) -> String {
    PLANT.replace("HOOK", hook)
}

#[test]
fn a_git_directory_cannot_be_renamed_away_and_back() {
    let c = repository();
    std::process::Command::new("git")
        .args(["init", "-q", "vendor/lib"])
        .current_dir(c.root())
        .output()
        .unwrap();
    let before = protected_contents(&c);
    let run = c.call("bash", json!({"command": "mv .git .g2; mv vendor/lib/.git vendor/lib/g; \
                                                mv vendor vendor2; rmdir .git; ls -d .g2 vendor2; exit 0"}));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("mv: cannot move '.git' to '.g2': Device or resource busy"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("cannot move 'vendor/lib/.git'"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("cannot move 'vendor' to 'vendor2'"),
        "{run:?}"
    );
    assert!(run.stdout.contains("No such file or directory"), "{run:?}");
    // The attack's second call finds no unprotected copy to plant in.
    let run = c.call(
        "bash",
        json!({"command": format!("{} && mv .g2 .git; exit 0", plant(".g2/hooks/pre-commit"))}),
    );
    assert!(run.stdout.contains("No such file or directory"), "{run:?}");
    assert_eq!(protected_contents(&c), before);
    assert_eq!(
        runnable_hooks(&c.root()),
        [".git/hooks/pre-commit"],
        "only the user's own"
    );
    assert!(git(&c.root(), &["status", "--short"]).status.success());
}

#[test]
fn a_repository_made_during_a_call_keeps_no_hook_or_config_git_would_run() {
    let c = Cordon::new();
    let command = format!(
        "git init -q . && {} && git config core.fsmonitor ./evil && git config alias.st '!sh x' \
         && mkdir -p a/b && cd a/b && git init -q && {} && echo planted",
        plant(".git/hooks/pre-commit"),
        plant(".git/hooks/post-checkout"),
    );
    let run = c.call("bash", json!({ "command": command }));
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    assert!(out.starts_with("planted\n"), "{run:?}");
    for expected in [
        "[cordon: quarantined .git/hooks/pre-commit, made by this command, as \
         .git/hooks/pre-commit.cordon-quarantine: git runs its hooks as you, outside the \
         sandbox; to keep such changes, allow them with --unprotect .git/hooks]",
        "[cordon: quarantined a/b/.git/hooks/post-checkout, made by this command, as \
         a/b/.git/hooks/post-checkout.cordon-quarantine",
        "[cordon: quarantined .git/config, made or changed by this command, as \
         .git/config.cordon-quarantine (it held core.fsmonitor, alias.st); a config of its \
         plain settings took its place",
        "allow them with --unprotect .git/config]",
    ] {
        assert!(out.contains(expected), "{expected}\n{run:?}");
    }
    assert!(
        runnable_hooks(&c.root()).is_empty(),
        "{:?}",
        runnable_hooks(&c.root())
    );
    let config = c.read(".git/config");
    assert!(
        !config.contains("fsmonitor") && !config.contains("alias"),
        "{config}"
    );
    assert!(config.contains("repositoryformatversion = 0"), "{config}");
    // The repository works for the user, and the next call sees it protected.
    assert!(git(&c.root(), &["status", "--short"]).status.success());
    let run = c.call(
        "bash",
        json!({"command": format!("{}; exit 0", plant(".git/hooks/pre-push"))}),
    );
    assert!(run.stdout.contains("Read-only file system"), "{run:?}");
    assert!(runnable_hooks(&c.root()).is_empty());
}

#[test]
fn git_s_own_repositories_are_left_as_git_made_them() {
    let c = Cordon::new();
    let run = c.call(
        "bash",
        json!({"command": "set -e; export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x \
                          GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@x; \
                          git init -q -b main up && git -C up commit -q --allow-empty -m one; \
                          git init -q -b main . && git commit -q --allow-empty -m root; \
                          git clone -q up copy; \
                          git -c protocol.file.allow=always submodule -q add ./up lib; \
                          git commit -q -m lib; git worktree add -q wt; echo ok"}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "ok\n", "nothing was quarantined: {run:?}");
    for dir in ["", "copy", "lib", "wt"] {
        let out = git(&c.path(dir), &["status", "--short"]);
        assert!(out.status.success(), "{dir}: {out:?}");
    }
    let out = git(&c.root(), &["submodule", "status"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn submodule_and_work_tree_git_directories_are_protected_like_the_repository_s() {
    let c = repository();
    for git_dir in [".git/modules/deps/lib", ".git/worktrees/wt"] {
        c.write(&format!("{git_dir}/HEAD"), "ref: refs/heads/main\n");
        c.write(&format!("{git_dir}/config"), "[core]\n\tbare = false\n");
        std::fs::create_dir_all(c.path(&format!("{git_dir}/hooks"))).unwrap();
    }
    c.write(".git/worktrees/wt/commondir", "../..\n");
    let before = [
        c.read(".git/modules/deps/lib/config"),
        c.read(".git/worktrees/wt/commondir"),
    ];
    let run = c.call(
        "bash",
        json!({"command": format!(
            "{}; echo '[core] fsmonitor = x' >> .git/modules/deps/lib/config; \
             echo / > .git/worktrees/wt/commondir; \
             printf '[core]\\n\\tfsmonitor = ./evil\\n' > .git/config.worktree; \
             echo ../evil > .git/commondir; \
             mkdir -p .git/modules/new/hooks && echo 'ref: refs/heads/main' > .git/modules/new/HEAD \
             && {}; exit 0",
            plant(".git/modules/deps/lib/hooks/post-checkout"),
            plant(".git/modules/new/hooks/post-checkout"),
        )}),
    );
    assert_eq!(run.code, 0, "{run:?}");
    let out = &run.stdout;
    assert!(
        out.contains(".git/modules/deps/lib/hooks/post-checkout: Read-only file system"),
        "{run:?}"
    );
    assert!(
        out.contains(".git/modules/deps/lib/config: Read-only file system"),
        "{run:?}"
    );
    assert!(
        out.contains(".git/worktrees/wt/commondir: Read-only file system"),
        "{run:?}"
    );
    for quarantined in [
        "quarantined .git/config.worktree, made or changed by this command",
        "quarantined .git/commondir, made by this command, as .git/commondir.cordon-quarantine: \
         it points git at another git directory",
        "quarantined .git/modules/new/hooks/post-checkout",
    ] {
        assert!(out.contains(quarantined), "{quarantined}\n{run:?}");
    }
    assert_eq!(
        [
            c.read(".git/modules/deps/lib/config"),
            c.read(".git/worktrees/wt/commondir"),
        ],
        before
    );
    assert!(!c.path(".git/commondir").exists());
    assert!(!c.read(".git/config.worktree").contains("fsmonitor"));
    assert_eq!(
        runnable_hooks(&c.root()),
        [".git/hooks/pre-commit"],
        "only the user's own"
    );
    assert!(git(&c.root(), &["status", "--short"]).status.success());

    // The file tools refuse the same paths.
    for path in [
        ".git/modules/deps/lib/hooks/post-merge",
        ".git/config.worktree",
        ".git/commondir",
    ] {
        let run = c.call("write_file", json!({"path": path, "content": "x"}));
        assert!(run.stdout.contains(" is protected ("), "{path}: {run:?}");
    }
}

#[test]
fn a_git_link_or_file_pointing_at_a_directory_of_the_command_s_is_quarantined() {
    let c = repository();
    let run = c.call(
        "bash",
        json!({"command": format!(
            "mkdir -p evil/hooks evil/objects evil/refs && echo 'ref: refs/heads/main' > evil/HEAD \
             && {} && mkdir sub other && echo 'gitdir: ../evil' > sub/.git && ln -s ../evil other/.git \
             && ln -s ../../evil .git/modules 2>/dev/null; echo done",
            plant("evil/hooks/pre-commit")
        )}),
    );
    assert!(run.stdout.starts_with("done\n"), "{run:?}");
    assert!(
        run.stdout.contains("[cordon: quarantined sub/.git, made by this command, as sub/.git.cordon-quarantine: a .git file points git at another git directory"),
        "{run:?}"
    );
    assert!(
        run.stdout.contains("[cordon: quarantined other/.git, a link made by this command, as other/.git.cordon-quarantine"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("[cordon: quarantined .git/modules, a link made by this command"),
        "{run:?}"
    );
    assert!(!c.path("sub/.git").exists() && !c.path("other/.git").exists());
    assert!(std::fs::symlink_metadata(c.path(".git/modules")).is_err());
}

#[test]
fn a_tag_does_not_hide_a_git_directory_from_the_scan() {
    let c = repository();
    git(&c.root(), &["init", "-q", "lib"]);
    c.write(
        "lib/CACHEDIR.TAG",
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    );
    let run = c.call(
        "bash",
        json!({"command": format!("{}; exit 0", plant("lib/.git/hooks/post-checkout"))}),
    );
    assert!(run.stdout.contains("Read-only file system"), "{run:?}");
    assert!(!c.path("lib/.git/hooks/post-checkout").exists());
}

#[test]
fn a_session_quarantines_after_each_command_and_unprotect_keeps_a_hook() {
    let c = Cordon::new();
    let mut session = Live::start(&c);
    let out = session.bash(&format!(
        "git init -q nested && {}",
        plant("nested/.git/hooks/pre-commit")
    ));
    assert!(
        out.contains("quarantined nested/.git/hooks/pre-commit"),
        "{out}"
    );
    let out = session.bash(&format!("{}; exit 0", plant("nested/.git/hooks/pre-push")));
    assert!(out.contains("Read-only file system"), "{out}");
    session.finish();
    assert!(runnable_hooks(&c.root()).is_empty());

    let c = Cordon::new().with_args(&["--unprotect", ".git/hooks"]);
    let run = c.call(
        "bash",
        json!({"command": format!("git init -q . && {}", plant(".git/hooks/pre-commit"))}),
    );
    assert_eq!(run.stdout, "", "{run:?}");
    assert_eq!(runnable_hooks(&c.root()), [".git/hooks/pre-commit"]);
}

/// A session keeps the workspace's protected paths current between its calls (watching the
/// work tree, not scanning it again): what the user changes meanwhile is seen by the next call.
#[test]
fn a_session_sees_the_repositories_the_user_makes_and_moves_between_calls() {
    let c = Cordon::new();
    let mut session = Live::start(&c);
    assert_eq!(session.bash("mkdir -p a/b && echo ok"), "ok\n");
    git(&c.path("a/b"), &["init", "-q", "inner"]);
    let out = session.bash(&format!(
        "{}; exit 0",
        plant("a/b/inner/.git/hooks/pre-commit")
    ));
    assert!(out.contains("Read-only file system"), "{out}");
    std::fs::rename(c.path("a"), c.path("moved")).unwrap();
    let out = session.bash(&format!(
        "{}; exit 0",
        plant("moved/b/inner/.git/hooks/pre-commit")
    ));
    assert!(out.contains("Read-only file system"), "{out}");
    std::fs::create_dir_all(c.path("moved/b/inner/.git/modules/sub/hooks")).unwrap();
    c.write(
        "moved/b/inner/.git/modules/sub/HEAD",
        "ref: refs/heads/main\n",
    );
    let out = session.bash(&format!(
        "{}; exit 0",
        plant("moved/b/inner/.git/modules/sub/hooks/post-checkout")
    ));
    assert!(out.contains("Read-only file system"), "{out}");
    session.finish();
    assert!(
        runnable_hooks(&c.root()).is_empty(),
        "{:?}",
        runnable_hooks(&c.root())
    );
}
