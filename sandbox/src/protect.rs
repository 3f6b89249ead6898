//! Protected paths: files of the workspace that make code run *outside* the sandbox the next
//! time the user touches the project — git hooks and configuration, direnv's `.envrc`,
//! editor tasks and settings, shell start-up files. A command sees them read-only (they are
//! read-only mounts in its view), and the host's file capability refuses to write them: one
//! policy, [`Guard`], for both.
//!
//! The rules:
//!
//! - in every git directory (a directory named `.git`, the workspace's and any below it):
//!   [`GIT_NAMES`]; a `.git` *file* (which points git at another git directory) is protected
//!   as a whole;
//! - at the workspace root: [`ROOT_NAMES`].
//!
//! A protected path that does not exist when a command starts cannot be created by it either:
//! the view mounts an empty read-only directory there (created for the call and removed after
//! it), so `.envrc` or `.git/hooks` stays uncreatable. A git directory created by a command
//! (`git init`) is protected from the next call on. `Guard::unprotect` relaxes a path and
//! everything below it.

use std::path::{Component, Path, PathBuf};

/// What is protected inside every git directory.
pub const GIT_NAMES: [&str; 3] = ["hooks", "config", "info"];

/// What is protected at the workspace root.
pub const ROOT_NAMES: [&str; 13] = [
    ".envrc",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshenv",
    ".zprofile",
    ".zshrc",
    ".zlogin",
];

/// Directories the scan for git directories does not enter: dependency trees and caches,
/// which hold no repository the user works in and can be very large.
const UNSCANNED: [&str; 1] = ["node_modules"];

/// The file that marks a cache directory (the Cache Directory Tagging convention, which
/// cargo's `target/` follows): not scanned either.
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// The protection policy of one workspace.
#[derive(Clone, Debug)]
pub struct Guard {
    workspace: PathBuf,
    unprotect: Vec<PathBuf>,
}

/// One protected path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
    /// The absolute path.
    pub path: PathBuf,
    /// Why it is protected.
    pub rule: Rule,
}

/// Why a path is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// An entry of a git directory ([`GIT_NAMES`]).
    Git(&'static str),
    /// A `.git` file, which points git at another git directory.
    GitLink,
    /// A git directory itself, moved: its protected entries would leave their rule with it.
    GitDir,
    /// An entry of the workspace root ([`ROOT_NAMES`]).
    Root(&'static str),
}

impl Rule {
    /// Why the rule exists, for a refusal.
    pub fn why(self) -> &'static str {
        match self {
            Rule::Git("hooks") => "git runs its hooks as you, outside the sandbox",
            Rule::Git("config") => {
                "git's config can make git run commands outside the sandbox (core.fsmonitor, \
                 core.pager, aliases)"
            }
            Rule::Git(_) => "git's info directory changes what git runs and shows",
            Rule::GitLink => "a .git file points git at another git directory",
            Rule::GitDir => {
                "moving a git directory would take its hooks and config out of their protection"
            }
            Rule::Root(".envrc") => "direnv runs it when you enter the directory",
            Rule::Root(".vscode" | ".idea" | ".devcontainer") => {
                "your editor runs the tasks and settings it holds"
            }
            Rule::Root(_) => "your shell runs it when it starts",
        }
    }
}

impl Guard {
    /// The policy of `workspace` (absolute and canonical), relaxed for the paths of
    /// `unprotect` (relative ones resolve against the workspace).
    pub fn new(workspace: &Path, unprotect: &[PathBuf]) -> Guard {
        Guard {
            workspace: workspace.to_path_buf(),
            unprotect: unprotect
                .iter()
                .map(|p| normalize(&workspace.join(p)))
                .collect(),
        }
    }

    /// The workspace it guards.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Every protected path of the workspace as it is now, whether it exists or not (a
    /// missing one is to be kept uncreatable), relaxed ones left out. Symbolic links are not
    /// followed.
    pub fn scan(&self) -> Vec<Protected> {
        self.scan_but(&|_| false)
    }

    /// [`Guard::scan`], not entering the directories for which `known` is true (the empty
    /// stand-ins a shell holds).
    pub fn scan_but(&self, known: &dyn Fn(&Path) -> bool) -> Vec<Protected> {
        let mut found = Vec::new();
        for name in ROOT_NAMES {
            self.push(&mut found, self.workspace.join(name), Rule::Root(name));
        }
        self.scan_dir(&self.workspace, known, &mut found);
        found
    }

    /// Scans `dir` and what is below it, unless it is a cache directory (below the root).
    fn scan_dir(&self, dir: &Path, known: &dyn Fn(&Path) -> bool, found: &mut Vec<Protected>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let (mut here, mut subdirs) = (Vec::new(), Vec::new());
        for entry in entries.flatten() {
            let name = entry.file_name();
            // Its tag is one entry among the others: no extra look-up per directory.
            if name == CACHE_TAG && dir != self.workspace {
                return;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == ".git" {
                if kind.is_dir() {
                    for git in GIT_NAMES {
                        here.push((entry.path().join(git), Rule::Git(git)));
                    }
                } else if kind.is_file() {
                    here.push((entry.path(), Rule::GitLink));
                }
            } else if kind.is_dir() && !UNSCANNED.iter().any(|u| name == *u) {
                subdirs.push(entry.path());
            }
        }
        for (path, rule) in here {
            self.push(found, path, rule);
        }
        for sub in subdirs.iter().filter(|sub| !known(sub)) {
            self.scan_dir(sub, known, found);
        }
    }

    fn push(&self, found: &mut Vec<Protected>, path: PathBuf, rule: Rule) {
        if !self.relaxed(&path) {
            found.push(Protected { path, rule });
        }
    }

    /// The protection that covers `path` (absolute; `..` is resolved lexically), if any: the
    /// check of one write, made when it happens.
    pub fn rule_for(&self, path: &Path) -> Option<Protected> {
        let path = normalize(path);
        let rel = path.strip_prefix(&self.workspace).ok()?;
        let mut names = rel.components().map(|c| c.as_os_str());
        let first = names.next()?;
        if let Some(name) = ROOT_NAMES.iter().find(|n| first == **n) {
            return self.covered(self.workspace.join(name), Rule::Root(name));
        }
        let mut dir = self.workspace.clone();
        let mut name = first;
        for next in names {
            dir.push(name);
            if name == ".git"
                && is_dir(&dir)
                && let Some(entry) = GIT_NAMES.iter().find(|n| next == **n)
            {
                return self.covered(dir.join(entry), Rule::Git(entry));
            }
            name = next;
        }
        // A path that ends in `.git` is a git link to be, or the git directory itself.
        (name == ".git" && !is_dir(&dir.join(name)))
            .then(|| self.covered(dir.join(name), Rule::GitLink))
            .flatten()
    }

    /// The protection that covers moving or renaming `path` (absolute): that of
    /// [`Guard::rule_for`], or, for a git directory, the whole directory, since renamed it
    /// would no longer be one and its hooks and config could be changed, then moved back.
    pub fn rule_for_move(&self, path: &Path) -> Option<Protected> {
        let path = normalize(path);
        self.rule_for(&path).or_else(|| {
            (path.starts_with(&self.workspace)
                && path.file_name().is_some_and(|n| n == ".git")
                && is_dir(&path))
            .then(|| self.covered(path.clone(), Rule::GitDir))
            .flatten()
        })
    }

    fn covered(&self, path: PathBuf, rule: Rule) -> Option<Protected> {
        (!self.relaxed(&path)).then_some(Protected { path, rule })
    }

    fn relaxed(&self, path: &Path) -> bool {
        self.unprotect.iter().any(|u| path.starts_with(u))
    }

    /// The refusal of a write to `protected`: the rule and the option that relaxes it.
    pub fn refusal(&self, protected: &Protected) -> String {
        format!(
            "{} is protected ({}); allow it with --unprotect {}",
            self.shown(&protected.path),
            protected.rule.why(),
            self.shown(&protected.path)
        )
    }

    /// `path` as the user names it: relative to the workspace when inside it.
    pub fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.workspace)
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The notice added to a command's output when it seems to have tried to write a protected
/// path (the kernel's "read-only" or "busy" failure, which is all the command sees) and there
/// are some (`protected`, as [`Guard::shown`] names them): which ones, and how to relax one.
pub fn hint(output: &str, protected: &[String]) -> Option<String> {
    let refused = ["Read-only file system", "Device or resource busy"];
    if protected.is_empty() || !refused.iter().any(|r| output.contains(r)) {
        return None;
    }
    let mentioned: Vec<&str> = protected
        .iter()
        .map(String::as_str)
        .filter(|p| output.contains(p))
        .collect();
    let named = match mentioned.is_empty() {
        true if protected.len() > 4 => format!("{}, …", protected[..4].join(", ")),
        true => protected.join(", "),
        false => mentioned.join(", "),
    };
    let newline = if output.is_empty() || output.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Some(format!(
        "{newline}[cordon: protected paths are read-only to bash ({named}); allow one with \
         --unprotect PATH]\n"
    ))
}

fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, Guard) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("sub/.git")).unwrap();
        std::fs::create_dir_all(root.join("target/deep/.git")).unwrap();
        std::fs::write(root.join("target/CACHEDIR.TAG"), "").unwrap();
        std::fs::create_dir_all(root.join("vendor/lib")).unwrap();
        std::fs::write(
            root.join("vendor/lib/.git"),
            "gitdir: ../../.git/modules/lib",
        )
        .unwrap();
        (dir, Guard::new(&root, &[]))
    }

    #[test]
    fn the_scan_finds_every_git_directory_and_the_root_names() {
        let (_dir, guard) = workspace();
        let shown: Vec<String> = guard.scan().iter().map(|p| guard.shown(&p.path)).collect();
        for expected in [
            ".envrc",
            ".vscode",
            ".git/hooks",
            ".git/config",
            ".git/info",
            "sub/.git/hooks",
            "vendor/lib/.git",
        ] {
            assert!(
                shown.contains(&expected.to_string()),
                "{expected}: {shown:?}"
            );
        }
        assert!(!shown.iter().any(|s| s.starts_with("target")), "{shown:?}");
    }

    #[test]
    fn one_write_is_checked_against_the_rules() {
        let (_dir, guard) = workspace();
        let ws = guard.workspace().to_path_buf();
        let rule = |p: &str| guard.rule_for(&ws.join(p)).map(|p| p.rule);
        assert_eq!(rule(".git/hooks/pre-commit"), Some(Rule::Git("hooks")));
        assert_eq!(rule("sub/.git/config"), Some(Rule::Git("config")));
        assert_eq!(
            rule("src/../.vscode/settings.json"),
            Some(Rule::Root(".vscode"))
        );
        assert_eq!(rule("new/.git"), Some(Rule::GitLink));
        assert_eq!(rule(".git/objects/ab/cd"), None);
        assert_eq!(rule(".git/HEAD"), None);
        assert_eq!(rule("src/.vscode/x"), None);
        assert_eq!(rule("no-repo/.git/config"), None);
    }

    #[test]
    fn a_git_directory_may_not_be_moved_but_its_objects_may() {
        let (_dir, guard) = workspace();
        let ws = guard.workspace().to_path_buf();
        let rule = |p: &str| guard.rule_for_move(&ws.join(p)).map(|p| p.rule);
        assert_eq!(rule(".git"), Some(Rule::GitDir));
        assert_eq!(rule("sub/.git"), Some(Rule::GitDir));
        assert_eq!(rule(".git/hooks"), Some(Rule::Git("hooks")));
        assert_eq!(rule(".vscode"), Some(Rule::Root(".vscode")));
        assert_eq!(rule(".git/objects/ab"), None);
        assert_eq!(rule("sub"), None);
    }

    #[test]
    fn unprotect_relaxes_a_path_and_what_is_below_it() {
        let (dir, _) = workspace();
        let root = dir.path().canonicalize().unwrap();
        let guard = Guard::new(&root, &[PathBuf::from(".vscode"), root.join(".git/hooks")]);
        assert_eq!(guard.rule_for(&root.join(".vscode/settings.json")), None);
        assert_eq!(guard.rule_for(&root.join(".git/hooks/x")), None);
        assert!(guard.rule_for(&root.join(".git/config")).is_some());
        let refusal = guard.refusal(&guard.rule_for(&root.join(".idea/x")).unwrap());
        assert!(refusal.starts_with(".idea is protected ("), "{refusal}");
        assert!(
            refusal.ends_with("allow it with --unprotect .idea"),
            "{refusal}"
        );
    }
}
