//! Protected paths: files of the workspace that make code run *outside* the sandbox the next
//! time the user touches the project — git hooks and configuration, direnv's `.envrc`,
//! editor tasks and settings, shell start-up files. A command sees them read-only (they are
//! read-only mounts in its view), and the host's file capability refuses to write them: one
//! policy, [`Guard`], for both.
//!
//! The rules:
//!
//! - in every git directory: [`GIT_NAMES`]. The git directories are each directory named
//!   `.git` (the workspace's and any below it) and the git directories git keeps inside one:
//!   a submodule's under `modules/` (a directory holding `HEAD`), a linked work tree's under
//!   `worktrees/`. A `.git` *file* or link (which points git at another git directory) is
//!   protected as a whole, and so is a `modules` or `worktrees` that is a link;
//! - at the workspace root: [`ROOT_NAMES`].
//!
//! A protected path that does not exist when a command starts gets nothing in its view (an
//! empty directory standing in for it would show in the user's workspace, in listings and in
//! archives, and break git where git reads a file). What a command makes that these rules
//! protect without its view having covered it (a `.envrc`, a git directory made during the
//! call) is judged as soon as the helper hears of it and again once the command is over
//! (`quarantine`). `Guard::unprotect` relaxes a path and everything below it.

use std::path::{Component, Path, PathBuf};

use super::setting::Setting;

/// What is protected inside every git directory.
pub const GIT_NAMES: [&str; 5] = ["hooks", "config", "info", "config.worktree", "commondir"];

/// Where a git directory keeps the git directories of its submodules and linked work trees.
pub const GIT_NESTS: [&str; 2] = ["modules", "worktrees"];

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

/// Directories the scan for git directories does not enter: dependency trees, which hold no
/// repository the user works in and can be very large.
const UNSCANNED: [&str; 1] = ["node_modules"];

/// The file that marks a cache directory (the Cache Directory Tagging convention, which
/// cargo's `target/` follows): a directory tagged so and named as in [`CACHES`] is not
/// scanned either. Any command can tag any directory, so the tag alone does not exempt one: a
/// submodule's own git directory could otherwise be hidden from the scan by tagging its work
/// tree.
const CACHE_TAG: &str = "CACHEDIR.TAG";

/// The names of the cache directories the scan leaves out when they are tagged.
const CACHES: [&str; 3] = ["target", ".cache", "__pycache__"];

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
    /// A `.git` file or link, which points git at another git directory.
    GitLink,
    /// A `modules` or `worktrees` of a git directory that is not a directory: a link there
    /// would lead git to git directories outside every rule.
    GitNest(&'static str),
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
            Rule::Git("config" | "config.worktree") => {
                "git's config can make git run commands outside the sandbox (core.fsmonitor, \
                 core.pager, aliases)"
            }
            Rule::Git("commondir") => {
                "it points git at another git directory, whose hooks and config git then uses"
            }
            Rule::Git(_) => "git's info directory changes what git runs and shows",
            Rule::GitLink => "a .git file points git at another git directory",
            Rule::GitNest(_) => {
                "git finds the git directories of submodules and work trees there, and runs \
                 their hooks"
            }
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

/// What one directory of the work tree holds for the rules ([`Guard::list`]).
#[derive(Debug, Default)]
pub struct Listing {
    /// The protected paths its entries make: a `.git` file or link, a git directory's
    /// entries and those of the git directories it keeps.
    pub found: Vec<Protected>,
    /// Its subdirectories to scan.
    pub subdirs: Vec<PathBuf>,
    /// The directories of its git directory that were read: a change in one may change
    /// `found`.
    pub read: Vec<PathBuf>,
}

/// Where the walk of [`Guard::rule_for`] is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// In the work tree.
    Tree,
    /// In a git directory.
    Git,
    /// Below a git directory's `modules`, above the submodule's git directory.
    Modules,
    /// In a git directory's `worktrees`.
    Worktrees,
    /// Below what is protected.
    Beyond,
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
        let mut found = self.roots();
        // A list, not recursion: a command may nest directories deeper than any stack.
        let mut dirs = vec![self.workspace.clone()];
        while let Some(dir) = dirs.pop() {
            if let Some(listing) = self.list(&dir) {
                found.extend(listing.found);
                dirs.extend(listing.subdirs);
            }
        }
        found
    }

    /// The protected paths at the workspace root ([`ROOT_NAMES`]).
    pub fn roots(&self) -> Vec<Protected> {
        let mut found = Vec::new();
        for name in ROOT_NAMES {
            self.push(&mut found, self.workspace.join(name), Rule::Root(name));
        }
        found
    }

    /// What the directory `dir` of the work tree holds for the rules (nothing below a cache
    /// directory); none when it cannot be read.
    pub fn list(&self, dir: &Path) -> Option<Listing> {
        let entries = std::fs::read_dir(dir).ok()?;
        let cache = dir != self.workspace
            && dir
                .file_name()
                .is_some_and(|name| CACHES.iter().any(|c| name == *c));
        let mut listing = Listing::default();
        let mut gits = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            // Its tag is one entry among the others: no extra look-up per directory.
            if cache && name == CACHE_TAG {
                return Some(Listing::default());
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name == ".git" {
                match kind.is_dir() {
                    true => gits.push(entry.path()),
                    false => self.push(&mut listing.found, entry.path(), Rule::GitLink),
                }
            } else if kind.is_dir() && !UNSCANNED.iter().any(|u| name == *u) {
                listing.subdirs.push(entry.path());
            }
        }
        for git in gits {
            self.git_dir(git, &mut listing);
        }
        Some(listing)
    }

    /// The protected paths of the git directory `git` and of the git directories it keeps
    /// for submodules and linked work trees.
    fn git_dir(&self, git: PathBuf, listing: &mut Listing) {
        let mut gits = vec![git];
        while let Some(git) = gits.pop() {
            for name in GIT_NAMES {
                self.push(&mut listing.found, git.join(name), Rule::Git(name));
            }
            listing.read.push(git.clone());
            for nest in GIT_NESTS {
                let path = git.join(nest);
                match std::fs::symlink_metadata(&path) {
                    Ok(meta) if meta.is_dir() => {}
                    Ok(_) => {
                        self.push(&mut listing.found, path, Rule::GitNest(nest));
                        continue;
                    }
                    Err(_) => continue,
                }
                // A submodule's name may hold slashes: its git directory is the first
                // directory down that holds a HEAD. Each of a work tree's is one.
                listing.read.push(path.clone());
                let mut below = subdirs(&path);
                while let Some(dir) = below.pop() {
                    if nest == "worktrees" || std::fs::symlink_metadata(dir.join("HEAD")).is_ok() {
                        gits.push(dir);
                    } else {
                        below.extend(subdirs(&dir));
                        listing.read.push(dir);
                    }
                }
            }
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
        let mut names = rel.components().map(|c| c.as_os_str()).peekable();
        let first = *names.peek()?;
        if let Some(name) = ROOT_NAMES.iter().find(|n| first == **n) {
            return self.covered(self.workspace.join(name), Rule::Root(name));
        }
        let mut dir = self.workspace.clone();
        let mut place = Place::Tree;
        while let Some(name) = names.next() {
            let last = names.peek().is_none();
            dir.push(name);
            place = match place {
                // A path that ends in `.git` is a git link to be, or one; one that goes on
                // is in a git directory, or one to be.
                Place::Tree if name == ".git" && last && !is_dir(&dir) => {
                    return self.covered(dir, Rule::GitLink);
                }
                Place::Tree if name == ".git" => Place::Git,
                Place::Tree => Place::Tree,
                // A submodule's git directory being made counts as one from its start.
                Place::Git | Place::Modules => {
                    if let Some(entry) = GIT_NAMES.iter().find(|n| name == **n) {
                        return self.covered(dir, Rule::Git(entry));
                    }
                    match GIT_NESTS.iter().find(|n| name == **n) {
                        Some(nest) if last && !is_dir(&dir) => {
                            return self.covered(dir, Rule::GitNest(nest));
                        }
                        Some(&"modules") => Place::Modules,
                        Some(_) => Place::Worktrees,
                        None if place == Place::Modules && is_git_dir(&dir) => Place::Git,
                        None if place == Place::Modules => Place::Modules,
                        None => Place::Beyond,
                    }
                }
                Place::Worktrees => Place::Git,
                Place::Beyond => return None,
            };
        }
        None
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

    /// The refusal of a write to `protected`: the rule and the setting that relaxes it.
    pub fn refusal(&self, protected: &Protected) -> String {
        let shown = self.shown(&protected.path);
        format!(
            "{shown} is protected ({}); allow it with {}",
            protected.rule.why(),
            Setting::Unprotect(shown.clone())
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

/// The notice added to a command's output when the kernel refused it a protected path, which
/// is all the command learns ("read-only", or "busy" for a directory that holds protected
/// paths, which may not be moved or removed): the paths its output names, among `protected`
/// (as [`Guard::shown`] names them), and how to relax one. None when the output names none:
/// the refusal was of something else.
pub fn hint(output: &str, protected: &[String]) -> Option<String> {
    let (read_only, busy) = (
        output.contains("Read-only file system"),
        output.contains("Device or resource busy"),
    );
    if !read_only && !busy {
        return None;
    }
    let mut lines = Vec::new();
    if read_only && let Some(named) = named(output, protected) {
        lines.push(format!(
            "[cordon: protected paths are read-only to bash ({named}); allow one with {}]",
            Setting::Unprotect("PATH".into())
        ));
    }
    if busy && let Some(named) = named(output, &holders(protected)) {
        lines.push(format!(
            "[cordon: bash may not move or remove a directory that holds protected paths \
             ({named}); allow them with {}]",
            Setting::Unprotect("PATH".into())
        ));
    }
    if lines.is_empty() {
        return None;
    }
    let newline = if output.ends_with('\n') { "" } else { "\n" };
    Some(format!("{newline}{}\n", lines.join("\n")))
}

/// The directories that hold `protected` paths inside the workspace (relative to it), each
/// once.
pub(crate) fn holders(protected: &[String]) -> Vec<String> {
    let mut dirs: Vec<String> = (protected.iter())
        .flat_map(|p| Path::new(p).ancestors().skip(1))
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.display().to_string())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The paths of `paths` that `output` names, joined: as the workspace names them, or from a
/// directory below it (a command that ran in `a/` names `a/.git/config` as `.git/config`:
/// the last two names at least). Where one is named more fully than another, only it.
fn named(output: &str, paths: &[String]) -> Option<String> {
    let matched = |path: &String| -> usize {
        let names: Vec<&str> = path.split('/').collect();
        (0..names.len())
            .filter(|&from| from == 0 || names.len() - from >= 2)
            .map(|from| names[from..].join("/"))
            .find(|tail| mentions(output, tail))
            .map_or(0, |tail| tail.len())
    };
    let scored: Vec<(usize, &String)> = paths.iter().map(|p| (matched(p), p)).collect();
    let best = scored.iter().map(|(n, _)| *n).max().filter(|n| *n > 0)?;
    let named: Vec<&str> = (scored.iter())
        .filter(|(n, _)| *n == best)
        .map(|(_, p)| p.as_str())
        .collect();
    Some(named.join(", "))
}

/// Whether `output` names `path` as a whole path: not as the end of a longer name
/// (`x.envrc`) nor the start of one (`.envrc2`).
fn mentions(output: &str, path: &str) -> bool {
    output.match_indices(path).any(|(at, _)| {
        let before = output[..at].chars().next_back();
        let after = output[at + path.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
            && !after.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

fn is_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether `dir` is a directory that holds a `HEAD`, as a git directory does.
fn is_git_dir(dir: &Path) -> bool {
    is_dir(dir) && std::fs::symlink_metadata(dir.join("HEAD")).is_ok()
}

/// The directories in `dir` (not links to one).
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// `path` with `.` and `..` resolved lexically.
pub(crate) fn normalize(path: &Path) -> PathBuf {
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
        // Tagged, but not named as a cache: a command could tag any directory.
        std::fs::create_dir_all(root.join("lib/.git")).unwrap();
        std::fs::write(root.join("lib/CACHEDIR.TAG"), "").unwrap();
        // A submodule named with a slash, and a linked work tree.
        std::fs::create_dir_all(root.join(".git/modules/deps/one/objects/info")).unwrap();
        std::fs::write(
            root.join(".git/modules/deps/one/HEAD"),
            "ref: refs/heads/main\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
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
            "lib/.git/hooks",
            ".git/config.worktree",
            ".git/commondir",
            ".git/modules/deps/one/hooks",
            ".git/modules/deps/one/config",
            ".git/worktrees/wt/commondir",
        ] {
            assert!(
                shown.contains(&expected.to_string()),
                "{expected}: {shown:?}"
            );
        }
        assert!(!shown.iter().any(|s| s.starts_with("target")), "{shown:?}");
        assert!(!shown.contains(&".git/modules/deps/hooks".to_string()));
        assert!(!shown.iter().any(|s| s.contains("objects")), "{shown:?}");
    }

    #[test]
    fn a_link_where_git_looks_for_git_directories_is_protected() {
        let (_dir, guard) = workspace();
        let ws = guard.workspace().to_path_buf();
        std::os::unix::fs::symlink("../elsewhere", ws.join("sub/.git/modules")).unwrap();
        std::os::unix::fs::symlink("elsewhere", ws.join("sub/.git/worktrees")).unwrap();
        std::os::unix::fs::symlink("real.git", ws.join("linked")).unwrap();
        let found = guard.scan();
        let rule = |p: &str| found.iter().find(|f| f.path == ws.join(p)).map(|f| f.rule);
        assert_eq!(rule("sub/.git/modules"), Some(Rule::GitNest("modules")));
        assert_eq!(rule("sub/.git/worktrees"), Some(Rule::GitNest("worktrees")));
        std::fs::create_dir(ws.join("other")).unwrap();
        std::os::unix::fs::symlink("../sub", ws.join("other/.git")).unwrap();
        let found = guard.scan();
        assert!(
            found
                .iter()
                .any(|f| f.path == ws.join("other/.git") && f.rule == Rule::GitLink),
            "{found:?}"
        );
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
        // A git directory to be is one already.
        assert_eq!(rule("no-repo/.git/config"), Some(Rule::Git("config")));
        assert_eq!(
            rule(".git/config.worktree"),
            Some(Rule::Git("config.worktree"))
        );
        assert_eq!(rule(".git/commondir"), Some(Rule::Git("commondir")));
        assert_eq!(
            rule(".git/modules/deps/one/hooks/post-checkout"),
            Some(Rule::Git("hooks"))
        );
        assert_eq!(
            rule(".git/modules/deps/one/config"),
            Some(Rule::Git("config"))
        );
        assert_eq!(rule(".git/modules/new/hooks/x"), Some(Rule::Git("hooks")));
        assert_eq!(rule(".git/modules/deps/one/objects/info/packs"), None);
        assert_eq!(rule(".git/modules/new/HEAD"), None);
        assert_eq!(
            rule(".git/worktrees/wt/commondir"),
            Some(Rule::Git("commondir"))
        );
        assert_eq!(rule(".git/worktrees/wt/HEAD"), None);
        assert_eq!(rule("sub/.git/modules"), Some(Rule::GitNest("modules")));
        assert_eq!(rule(".git/modules"), None);
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
    fn the_hint_names_the_protected_path_that_failed_and_only_then() {
        let protected: Vec<String> = [".envrc", ".git/hooks", ".git/config", "a/b/.git/config"]
            .map(String::from)
            .to_vec();
        let hint = |output: &str| hint(output, &protected).unwrap_or_default();
        assert_eq!(
            hint("touch: cannot touch '/usr/local/bin/x': Read-only file system\n"),
            ""
        );
        assert!(
            hint("error: could not lock config file a/b/.git/config: Read-only file system")
                .contains("(a/b/.git/config); allow one with [bash] unprotect = [\"PATH\"]]"),
        );
        assert!(
            hint("bash: .git/hooks/pre-commit: Read-only file system\n")
                .contains("read-only to bash (.git/hooks); allow"),
        );
        // From inside the nested repository, both read the same.
        assert!(
            hint("could not write config file .git/config: Read-only file system")
                .contains("(.git/config, a/b/.git/config)"),
        );
        assert!(
            hint("mv: cannot move 'a' to 'c': Device or resource busy\n")
                .contains("may not move or remove a directory that holds protected paths (a);"),
        );
        assert_eq!(hint("x.envrc: Read-only file system"), "");
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
            refusal.ends_with("allow it with [bash] unprotect = [\".idea\"]"),
            "{refusal}"
        );
    }
}
