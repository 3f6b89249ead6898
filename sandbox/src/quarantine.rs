//! What a command made that the protection rules cover but its view did not: a protected
//! name that was missing when the command started (`.envrc`, `.vscode`, a git directory's
//! `hooks` or `config`), or a git directory made during the call (`git init`, `git clone`,
//! `git submodule add`, at the root or nested). A mount covers only what exists when the
//! command starts; this judges the rest as soon as the helper hears of it (a name made at the
//! workspace root or in a git directory), and again once the command is over and every process
//! of it is gone.
//!
//! What git made stays: sample hooks, an `info` directory, a config of plain settings
//! ([`SAFE_KEYS`]), a work tree's `commondir` back to its repository, a `.git` file pointing at
//! a git directory of the workspace. Anything else that git would run or follow outside the
//! sandbox is *set aside*: renamed in place with [`SUFFIX`], where git never looks, and named
//! in the command's output with the rule and the option that relaxes it. A config with other
//! settings is set aside too, and a config holding only its plain settings takes its place,
//! so the repository keeps working.
//!
//! The judgement is of what is there, not of who made it: a repository the user makes in the
//! workspace while a command runs is judged with the command's.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags};

use super::ns;
use super::protect::{Guard, Protected, Rule, normalize};
use super::setting::Setting;

/// What a name set aside ends with.
pub const SUFFIX: &str = ".cordon-quarantine";

/// The settings a config made during a command may hold: what `git init`, `git clone` and
/// `git submodule` write, none of which makes git run anything (`*` is any subsection).
const SAFE_KEYS: [&str; 22] = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.worktreeconfig",
    "extensions.partialclone",
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "branch.*.remote",
    "branch.*.merge",
    "submodule.*.url",
    "submodule.*.active",
    "user.name",
    "user.email",
];

/// The largest config judged; a larger one is set aside whole.
const CONFIG_CAP: u64 = 1 << 20;

/// Judges `found` (the workspace's protected paths now, [`Guard::scan`]) against `covered`
/// (what the command's view held read-only, as [`Guard::shown`] names them): the notices of
/// what was set aside, each a line for the command's output.
pub(super) fn judge(
    workspace: &OwnedFd,
    guard: &Guard,
    found: &[Protected],
    covered: &[String],
) -> Vec<String> {
    let covered: HashSet<&str> = covered.iter().map(String::as_str).collect();
    // The git directories as the rules find them: a `.git` file may point at one.
    let gits: HashSet<&Path> = (found.iter())
        .filter(|p| matches!(p.rule, Rule::Git(_)))
        .filter_map(|p| p.path.parent())
        .collect();
    let mut notices = Vec::new();
    for protected in found {
        let rel = guard.shown(&protected.path);
        if covered.contains(rel.as_str()) {
            continue;
        }
        let judged = Entry::open(workspace, Path::new(&rel))
            .and_then(|entry| entry.map_or(Ok(None), |e| e.judge(protected, &gits, guard)));
        match judged {
            Ok(None) => {}
            Ok(Some(notice)) => notices.push(notice),
            Err(e) => notices.push(format!(
                "[cordon: cannot judge {rel}, which the command may have made ({}): {e}; \
                 check it before you run git]",
                protected.rule.why()
            )),
        }
    }
    notices
}

/// A protected path as found: its parent directory, opened beneath the workspace without
/// following a link, and its name there.
struct Entry<'a> {
    parent: OwnedFd,
    name: &'a OsStr,
    rel: &'a Path,
    kind: FileType,
}

impl<'a> Entry<'a> {
    /// The entry at `rel`, if there is one.
    fn open(workspace: &OwnedFd, rel: &'a Path) -> io::Result<Option<Entry<'a>>> {
        let name = rel.file_name().unwrap_or_default();
        let parent = match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => ns::open_beneath(workspace, p),
            _ => workspace.try_clone(),
        };
        let parent = match parent {
            Ok(parent) => parent,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match rfs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(Entry {
                parent,
                name,
                rel,
                kind: FileType::from_raw_mode(stat.st_mode),
            })),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets aside what of this entry git would run or follow: the notice, if anything was.
    fn judge(
        &self,
        protected: &Protected,
        gits: &HashSet<&Path>,
        guard: &Guard,
    ) -> io::Result<Option<String>> {
        let rule = protected.rule;
        let what = match (rule, self.kind) {
            (Rule::Git("info"), _) => return Ok(None),
            (Rule::Git("hooks"), FileType::Directory) => return self.hooks(guard, rule),
            (Rule::Git("config" | "config.worktree"), FileType::RegularFile) => {
                return self.config(guard, rule);
            }
            (Rule::Git("commondir"), FileType::RegularFile) if self.back_to_repository()? => {
                return Ok(None);
            }
            (Rule::GitLink, FileType::RegularFile) if self.points_into(gits, guard)? => {
                return Ok(None);
            }
            (_, FileType::Symlink) => "a link made by this command",
            // Git reads a directory there as nothing it runs or follows.
            (Rule::Git(_) | Rule::GitLink | Rule::GitNest(_), FileType::Directory) => {
                return Ok(None);
            }
            _ => "made by this command",
        };
        let aside = set_aside(&self.parent, self.name)?;
        Ok(Some(notice(guard, protected, self.rel, &aside, what, "")))
    }

    /// Sets aside each hook git would run (every entry but the samples).
    fn hooks(&self, guard: &Guard, rule: Rule) -> io::Result<Option<String>> {
        let dir = rfs::openat(
            &self.parent,
            self.name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut names = Vec::new();
        for entry in rfs::Dir::read_from(&dir)? {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            let bytes = name.as_bytes();
            if name == "." || name == ".." || bytes.ends_with(b".sample") || is_aside(name) {
                continue;
            }
            names.push(name.to_os_string());
        }
        let mut notices = Vec::new();
        names.sort();
        for name in names {
            let aside = set_aside(&dir, &name)?;
            let protected = Protected {
                path: guard.workspace().join(self.rel),
                rule,
            };
            notices.push(notice(
                guard,
                &protected,
                &self.rel.join(&name),
                &self.rel.join(&aside),
                "made by this command",
                "",
            ));
        }
        Ok((!notices.is_empty()).then(|| notices.join("\n")))
    }

    /// Keeps a config of plain settings; sets another aside, a config of its plain settings
    /// taking its place.
    fn config(&self, guard: &Guard, rule: Rule) -> io::Result<Option<String>> {
        let text = self.read(CONFIG_CAP + 1)?;
        // A submodule's work tree, relative to its git directory, in the workspace.
        let git = guard
            .workspace()
            .join(self.rel.parent().unwrap_or(Path::new("")));
        let inside = |to: &str| {
            !to.starts_with('/') && normalize(&git.join(to)).starts_with(guard.workspace())
        };
        let (kept, refused) = match text.len() as u64 > CONFIG_CAP {
            true => (String::new(), vec!["over 1 MiB".to_string()]),
            false => plain(&String::from_utf8_lossy(&text), &inside),
        };
        if refused.is_empty() {
            return Ok(None);
        }
        let aside = set_aside(&self.parent, self.name)?;
        write_new(&self.parent, self.name, kept.as_bytes())?;
        let protected = Protected {
            path: guard.workspace().join(self.rel),
            rule,
        };
        let detail = format!(
            " (it held {}); a config of its plain settings took its place",
            refused.join(", ")
        );
        Ok(Some(notice(
            guard,
            &protected,
            self.rel,
            &aside,
            "made or changed by this command",
            &detail,
        )))
    }

    /// Whether this `commondir` is a linked work tree's, back to the repository that keeps it
    /// (`<git>/worktrees/<name>/commondir` holding `../..`).
    fn back_to_repository(&self) -> io::Result<bool> {
        let in_worktrees = (self.rel.parent())
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "worktrees");
        Ok(in_worktrees && self.read_small()?.trim_end() == "../..")
    }

    /// Whether this `.git` file points at a git directory of the workspace.
    fn points_into(&self, gits: &HashSet<&Path>, guard: &Guard) -> io::Result<bool> {
        let text = self.read_small()?;
        let Some(to) = text.lines().next().and_then(|l| l.strip_prefix("gitdir: ")) else {
            return Ok(false);
        };
        let here = guard.workspace().join(self.rel);
        let target = here.parent().unwrap_or(&here).join(to.trim_end());
        Ok(gits.contains(normalize(&target).as_path()))
    }

    /// The first 4 KiB of this file, as text.
    fn read_small(&self) -> io::Result<String> {
        Ok(String::from_utf8_lossy(&self.read(4096)?).into_owned())
    }

    /// At most `cap` bytes of this file, not following a link.
    fn read(&self, cap: u64) -> io::Result<Vec<u8>> {
        let file = rfs::openat(
            &self.parent,
            self.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut bytes = Vec::new();
        std::fs::File::from(file)
            .take(cap)
            .read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// The notice of `rel` set aside as `aside` (its name in the same directory, or its path).
fn notice(
    guard: &Guard,
    protected: &Protected,
    rel: &Path,
    aside: &Path,
    what: &str,
    detail: &str,
) -> String {
    let aside = match aside.parent() {
        Some(p) if !p.as_os_str().is_empty() => aside.to_path_buf(),
        _ => rel.with_file_name(aside),
    };
    format!(
        "[cordon: quarantined {}, {what}, as {}{detail}: {}; to keep such changes, allow them \
         with {}]",
        rel.display(),
        aside.display(),
        protected.rule.why(),
        Setting::Unprotect(guard.shown(&protected.path))
    )
}

/// Whether `name` was set aside already (git runs hooks by their exact names only).
fn is_aside(name: &OsStr) -> bool {
    let suffix = SUFFIX.as_bytes();
    name.as_bytes().windows(suffix.len()).any(|w| w == suffix)
}

/// Renames `name` in `dir` to a free name with [`SUFFIX`]: that name.
fn set_aside(dir: &OwnedFd, name: &OsStr) -> io::Result<PathBuf> {
    for n in 0..100 {
        let mut aside = OsString::from(name);
        aside.push(SUFFIX);
        if n > 0 {
            aside.push(format!(".{n}"));
        }
        match rfs::renameat_with(dir, name, dir, &aside, RenameFlags::NOREPLACE) {
            Ok(()) => return Ok(PathBuf::from(aside)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(
        "every name to set it aside under is taken",
    ))
}

/// Puts `contents` at `name` in `dir` (where nothing is now) atomically: written to a
/// temporary name, then renamed, so that a crash leaves no half-written config.
fn write_new(dir: &OwnedFd, name: &OsStr, contents: &[u8]) -> io::Result<()> {
    let mut temp = OsString::from(name);
    temp.push(".cordon-new");
    let file = rfs::openat(
        dir,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let written = std::fs::File::from(file)
        .write_all(contents)
        .and_then(|()| {
            Ok(rfs::renameat_with(
                dir,
                &temp,
                dir,
                name,
                RenameFlags::NOREPLACE,
            )?)
        });
    if written.is_err() {
        let _ = rfs::unlinkat(dir, &temp, AtFlags::empty());
    }
    written
}

/// The plain settings of the git config `text`, as a config, and what else it holds (keys,
/// or lines it could not read), each named once. `core.worktree` is plain when `inside` says
/// its value leads into the workspace (`git submodule` writes one).
fn plain(text: &str, inside: &dyn Fn(&str) -> bool) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut refused: Vec<String> = Vec::new();
    let mut refuse = |what: String| {
        if !refused.contains(&what) {
            refused.push(what);
        }
    };
    // The section as written, and as matched: `remote.*`.
    let mut section: Option<(String, String, String)> = None;
    let mut header_written = false;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            section = header(line);
            header_written = false;
            if section.is_none() {
                refuse(format!("an unreadable line {}", n + 1));
            }
            continue;
        }
        let Some((written, shown, matched)) = &section else {
            refuse(format!("an unreadable line {}", n + 1));
            continue;
        };
        let Some((key, value)) = setting(line) else {
            refuse(format!("an unreadable line {}", n + 1));
            continue;
        };
        let name = format!("{matched}.{}", key.to_ascii_lowercase());
        let worktree = name == "core.worktree" && value.is_some_and(inside);
        if !SAFE_KEYS.contains(&name.as_str()) && !worktree {
            refuse(format!("{shown}.{key}"));
            continue;
        }
        if !header_written {
            kept.push_str(&format!("[{written}]\n"));
            header_written = true;
        }
        match value {
            Some(value) => kept.push_str(&format!("\t{key} = {value}\n")),
            None => kept.push_str(&format!("\t{key}\n")),
        }
    }
    (kept, refused)
}

/// A section line `[name]` or `[name "sub"]`: the header as written (without its brackets),
/// as git names its keys (`name.sub`), and as [`SAFE_KEYS`] do. None for any other form
/// (git's older `[name.sub]`, escapes, a setting on the same line).
fn header(line: &str) -> Option<(String, String, String)> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let (name, sub) = match inner.split_once(' ') {
        Some((name, rest)) => {
            let sub = rest.trim_start().strip_prefix('"')?.strip_suffix('"')?;
            (name, Some(sub))
        }
        None => (inner, None),
    };
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !word(name) || sub.is_some_and(|s| s.contains(['"', '\\'])) {
        return None;
    }
    let name = name.to_ascii_lowercase();
    Some(match sub {
        Some(sub) => (
            format!("{name} \"{sub}\""),
            format!("{name}.{sub}"),
            format!("{name}.*"),
        ),
        None => (name.clone(), name.clone(), name),
    })
}

/// A setting line `key = value` or `key`: the key and the value (a comment after it left
/// out). None for a line with quotes or escapes, whose reading would take git's rules.
fn setting(line: &str) -> Option<(&str, Option<&str>)> {
    let (key, value) = match line.split_once('=') {
        Some((key, value)) => (key.trim(), Some(value)),
        None => (line, None),
    };
    let valid = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !valid {
        return None;
    }
    let value = match value {
        Some(value) => {
            let value = value.split(['#', ';']).next().unwrap_or_default().trim();
            if value.contains(['"', '\\']) {
                return None;
            }
            Some(value)
        }
        None => None,
    };
    Some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_of_plain_settings_is_kept_as_it_is() {
        let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                    \tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://h/x.git\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                    \tremote = origin\n\tmerge = refs/heads/main\n";
        let (_, refused) = plain(init, &|_| false);
        assert!(refused.is_empty(), "{refused:?}");
    }

    #[test]
    fn what_could_make_git_run_something_is_named_and_left_out() {
        let text = "[core]\n\tbare = false\n\tfsmonitor = ./evil\n\tworktree = ../../../lib\n\
                    \tworktree = /home\n[alias]\n\tst = !sh evil\n\
                    [include]\n\tpath = ../x\n[remote \"o\"]\n\turl = u\n\tuploadpack = evil\n\
                    [core] pager = evil\n[diff \"x\"]\n\ttextconv = \"ev\\\"il\"\n";
        let (kept, refused) = plain(text, &|to| to == "../../../lib");
        assert_eq!(
            kept,
            "[core]\n\tbare = false\n\tworktree = ../../../lib\n[remote \"o\"]\n\turl = u\n"
        );
        assert_eq!(
            refused,
            [
                "core.fsmonitor",
                "core.worktree",
                "alias.st",
                "include.path",
                "remote.o.uploadpack",
                "an unreadable line 13",
                "an unreadable line 15",
            ]
        );
    }

    #[test]
    fn git_s_older_and_escaped_forms_are_not_read() {
        assert_eq!(header("[remote.origin]"), None);
        assert_eq!(header("[remote \"a\\\"b\"]"), None);
        assert_eq!(setting("url = \"x\""), None);
        assert_eq!(setting("url = x \\"), None);
        assert_eq!(setting("url = x # y"), Some(("url", Some("x"))));
        assert_eq!(setting("bare"), Some(("bare", None)));
    }
}
