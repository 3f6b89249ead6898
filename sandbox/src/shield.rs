//! The protected paths of a shell's commands ([`super::protect`]) as they are when each
//! command starts: each one that exists, checked beneath the workspace without following a
//! symbolic link, which each command's view mounts read-only ([`super::view::cover`]).
//!
//! A protected path that does not exist gets nothing: nothing appears in the workspace
//! because of protection. What a command makes there is judged instead, as soon as the
//! helper hears of it and again when the command is over ([`Shield::judge`],
//! [`super::quarantine`]).
//!
//! The helper raises the shield before each command ([`Shield::raise`]): the index says what
//! is protected now, and what is as it was the command before (the same file or directory,
//! or still missing) keeps the shield's generation, so that the next command's init, covered
//! ahead as the last one was, can take the command at once.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Policy;
use super::index::Index;
use super::ns;
use super::protect::{Guard, Protected, Rule};
use super::quarantine;

/// The protected paths of a shell's workspace.
pub(super) struct Shield {
    guard: Guard,
    workspace: OwnedFd,
    /// What was at each protected path when the last command started, by the path the user
    /// names it with: its (device, inode), or none when it was missing.
    seen: HashMap<String, Option<(u64, u64)>>,
    /// Counts the changes of what is protected: a path protected, or let go of, or found
    /// made, removed or replaced.
    generation: u64,
    /// The protected paths that existed when the last command started, and the index's count
    /// of events then: while it is the same, so are they.
    raised: Option<(Vec<String>, u64)>,
    /// The protected paths of the workspace, kept current between commands.
    index: Index,
}

/// The protected paths of the workspace that exist, for a command, and the generation of
/// that list: the same generation, the same paths with the same files and directories at
/// them.
#[derive(Default)]
pub(super) struct Raised {
    pub protected: Vec<String>,
    pub generation: u64,
    /// The index's count of events once they were found ([`Shield::judge`]).
    pub events: Option<u64>,
}

impl Shield {
    /// The shield of the workspace of `policy`.
    pub fn new(policy: &Policy) -> Result<Shield, String> {
        let (root, unprotect) = (&policy.workspace, &policy.unprotect);
        let workspace = std::fs::File::open(root)
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
        Ok(Shield {
            guard: Guard::new(root, unprotect),
            workspace,
            seen: HashMap::new(),
            generation: 0,
            raised: None,
            index: Index::new(),
        })
    }

    /// The workspace's protected paths that exist, relative to the workspace, for a command
    /// about to start. A symbolic link where a protected path should be refuses the command:
    /// it could lead anywhere, and a mount cannot cover a link.
    pub fn raise(&mut self) -> Result<Raised, String> {
        let events = self.index.events();
        if let (Some((shown, then)), Some(now)) = (&self.raised, events)
            && *then == now
        {
            return Ok(Raised {
                protected: shown.clone(),
                generation: self.generation,
                events,
            });
        }
        let mut shown = Vec::new();
        let mut seen = HashMap::new();
        let found = self.index.current(&self.guard).to_vec();
        for protected in &found {
            let rel = self.guard.shown(&protected.path);
            let now = self.identity(protected, &rel)?;
            if now.is_some() {
                shown.push(rel.clone());
            }
            seen.insert(rel, now);
        }
        if seen != self.seen {
            self.seen = seen;
            self.generation += 1;
        }
        let events = self.index.events();
        self.raised = events.map(|now| (shown.clone(), now));
        Ok(Raised {
            protected: shown,
            generation: self.generation,
            events,
        })
    }

    /// What of the workspace's protected paths was made or changed outside the covers of the
    /// commands running or just over (`covered`, what [`Shield::raise`] gave them): set
    /// aside, and the notices for a command's output ([`quarantine`]). With `since`, the
    /// index's count of events when a command started: while it is the same, nothing was made
    /// (what was not covered then was missing), and nothing is judged.
    pub fn judge(&mut self, covered: &[String], since: Option<u64>) -> Vec<String> {
        if since.is_some() && self.index.events() == since {
            return Vec::new();
        }
        let found = self.index.current(&self.guard);
        quarantine::judge(&self.workspace, &self.guard, found, covered)
    }

    /// What a running command made of the protected paths that were missing when the commands
    /// running (`covered`, what [`Shield::raise`] gave them) started: a name at the workspace
    /// root, or in a git directory that was there (one whose other names are covered). Set
    /// aside at once, with the notices. A git directory made during the call is left to the
    /// judgement at the end ([`Shield::judge`]): git makes one in steps (`git submodule add`
    /// writes a `.git` file before the git directory it points at is whole), and only the
    /// end says what it made.
    pub fn judge_made(&mut self, covered: &[String]) -> Vec<String> {
        let parents: HashSet<&Path> = covered
            .iter()
            .filter_map(|c| Path::new(c).parent())
            .collect();
        let found: Vec<Protected> = (self.index.current(&self.guard).iter())
            .filter(|p| match p.rule {
                Rule::Root(_) => true,
                Rule::Git(_) => {
                    let rel = self.guard.shown(&p.path);
                    Path::new(&rel)
                        .parent()
                        .is_some_and(|dir| parents.contains(dir))
                }
                _ => false,
            })
            .cloned()
            .collect();
        quarantine::judge(&self.workspace, &self.guard, &found, covered)
    }

    /// Whether the index heard of a protected name made, removed or renamed since it was last
    /// asked: a command may be making one, to be judged at once.
    pub fn touched(&mut self) -> bool {
        self.index.touched()
    }

    /// The inotify instance of the index, to poll for [`Shield::touched`].
    pub fn watch(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.index.fd()
    }

    /// The (device, inode) of what is at the protected path `rel` now, or none when it is
    /// missing.
    fn identity(&self, protected: &Protected, rel: &str) -> Result<Option<(u64, u64)>, String> {
        let fail = |e: io::Error| format!("cannot protect {rel} ({}): {e}", protected.rule.why());
        match ns::open_beneath(&self.workspace, Path::new(rel)) {
            // A link itself is what is opened: it must not be one.
            Ok(at) => {
                let meta = std::fs::File::from(at).metadata().map_err(fail)?;
                if meta.is_symlink() {
                    return Err(symlink(&self.guard, protected));
                }
                Ok(Some((meta.dev(), meta.ino())))
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Err(symlink(&self.guard, protected)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fail(e)),
        }
    }
}

fn symlink(guard: &Guard, protected: &Protected) -> String {
    let shown = guard.shown(&protected.path);
    format!(
        "{shown} is a symbolic link, and it is a protected path ({}), which bash may see only \
         as a file or directory; remove the link, or allow it with --unprotect {shown}",
        protected.rule.why()
    )
}
