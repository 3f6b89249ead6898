//! The workspace's protected paths kept current between commands, so that what a command costs
//! does not grow with the workspace: the helper scans the work tree once ([`Guard::list`] of
//! every directory) and watches each directory it read with inotify; before and after each
//! command it reads only the directories that changed since.
//!
//! inotify reports a change before the call that made it returns, so once a command's
//! processes are gone every change it made is in the queue. It reports changes made through any
//! mount of a directory (the commands' views are mounts of the workspace). A work-tree
//! directory is read again only for a change that can change what it holds for the rules: a
//! subdirectory made, removed or renamed, a `.git` or `CACHEDIR.TAG` entry; a change anywhere
//! in the directories of its git directory that were read. A full queue (the kernel dropped
//! events) makes the whole scan again. Where a directory cannot be watched (the user's limit of
//! watches, `fs.inotify.max_user_watches`), the index gives up watching and scans the whole
//! workspace each time, as it must then.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::protect::{GIT_NAMES, GIT_NESTS, Guard, Protected, ROOT_NAMES};

/// What a watch reports: entries made, removed or renamed in the directory, and the directory
/// itself removed or renamed.
const EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW
    | libc::IN_EXCL_UNLINK;

/// The names whose change in a work-tree directory changes what it holds for the rules.
const NAMES: [&str; 2] = [".git", "CACHEDIR.TAG"];

/// The protected paths of one workspace, kept current.
pub(super) struct Index {
    /// The workspace, once read.
    root: PathBuf,
    /// The inotify instance; none when watching was given up (every call scans).
    inotify: Option<OwnedFd>,
    /// The work-tree directories read, by path.
    dirs: HashMap<PathBuf, Dir>,
    /// Each watch: the directory watched and the work-tree directory whose listing it
    /// belongs to.
    watches: HashMap<i32, (PathBuf, PathBuf)>,
    /// The protected paths as of the last refresh.
    found: Vec<Protected>,
    /// Whether the whole workspace is to be scanned again.
    stale: bool,
    /// The work-tree directories to read again.
    dirty: HashSet<PathBuf>,
    /// Whether a protected name was made, removed or renamed since [`Index::touched`] was
    /// last asked.
    touched: bool,
    /// How many events were read: the same count, nothing changed in a watched directory.
    events: u64,
}

/// A work-tree directory as read.
struct Dir {
    watch: Option<i32>,
    subdirs: Vec<PathBuf>,
    found: Vec<Protected>,
    /// The watches of the directories of its git directory.
    git_watches: Vec<i32>,
}

impl Index {
    /// An index of the workspace of `guard`, to be read on the first [`Index::current`].
    pub fn new() -> Index {
        // SAFETY: a plain system call; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        Index {
            root: PathBuf::new(),
            // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
            inotify: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
            dirs: HashMap::new(),
            watches: HashMap::new(),
            found: Vec::new(),
            stale: true,
            dirty: HashSet::new(),
            touched: false,
            events: 0,
        }
    }

    /// A count that changes whenever something may have changed in the workspace's watched
    /// directories (the work tree's and those of its git directories); none when watching was
    /// given up (anything may have changed).
    pub fn events(&mut self) -> Option<u64> {
        self.drain();
        self.inotify.as_ref().map(|_| self.events)
    }

    /// The inotify instance, readable when a change is queued; none when watching was given
    /// up.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.inotify.as_ref().map(AsFd::as_fd)
    }

    /// Whether a protected name was made, removed or renamed since this was last asked (the
    /// queue read): at the workspace root, in a git directory, or a `.git` anywhere.
    pub fn touched(&mut self) -> bool {
        self.drain();
        std::mem::take(&mut self.touched)
    }

    /// The protected paths of the workspace now (as [`Guard::scan`] finds them).
    pub fn current(&mut self, guard: &Guard) -> &[Protected] {
        if self.inotify.is_none() {
            self.found = guard.scan();
            return &self.found;
        }
        self.drain();
        let dirty = std::mem::take(&mut self.dirty);
        if self.stale {
            self.rebuild(guard);
        } else if !dirty.is_empty() {
            let mut dirty: Vec<PathBuf> = dirty.into_iter().collect();
            dirty.sort_by_key(|d| d.components().count());
            for dir in dirty {
                if self.dirs.contains_key(&dir) {
                    self.reread(guard, &dir);
                }
            }
            self.collect(guard);
        }
        if self.inotify.is_none() {
            // Watching was given up while reading.
            self.found = guard.scan();
        }
        &self.found
    }

    /// Reads the queue: the work-tree directories to read again (the whole scan is due
    /// instead when the kernel dropped events), and whether a protected name was touched.
    fn drain(&mut self) {
        let Some(inotify) = self.inotify.as_ref().map(|fd| fd.as_raw_fd()) else {
            return;
        };
        let mut buffer = vec![0u8; 64 << 10];
        loop {
            // SAFETY: reading into a buffer of the length given; the result is checked.
            let n = unsafe { libc::read(inotify, buffer.as_mut_ptr().cast(), buffer.len()) };
            if n <= 0 {
                break;
            }
            let mut at = 0;
            while at + std::mem::size_of::<libc::inotify_event>() <= n as usize {
                // SAFETY: the kernel wrote a whole event at `at`; read unaligned.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buffer[at..].as_ptr().cast()) };
                self.events += 1;
                let start = at + std::mem::size_of::<libc::inotify_event>();
                let end = start + event.len as usize;
                let name = buffer[start..end.min(n as usize)].split(|b| *b == 0).next();
                at = end;
                if event.mask & libc::IN_Q_OVERFLOW != 0 {
                    self.stale = true;
                    self.touched = true;
                    continue;
                }
                let Some((watched, owner)) = self.watches.get(&event.wd) else {
                    continue;
                };
                let name = OsStr::from_bytes(name.unwrap_or_default());
                let in_tree = watched == owner;
                let is = |names: &[&str]| names.iter().any(|n| name == *n);
                self.touched |= match in_tree {
                    true => name == ".git" || (self.root == *watched && is(&ROOT_NAMES)),
                    false => is(&GIT_NAMES) || is(&GIT_NESTS),
                };
                let matters = !in_tree
                    || event.mask & (libc::IN_ISDIR | libc::IN_DELETE_SELF | libc::IN_MOVE_SELF)
                        != 0
                    || NAMES.iter().any(|n| name == *n);
                if matters {
                    self.dirty.insert(owner.clone());
                    // A directory removed or renamed away: its parent reads it as gone.
                    if in_tree && event.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF) != 0 {
                        self.dirty.extend(watched.parent().map(Path::to_path_buf));
                    }
                }
                if event.mask & libc::IN_IGNORED != 0 {
                    self.watches.remove(&event.wd);
                }
            }
        }
    }

    /// Forgets everything and scans the whole workspace.
    fn rebuild(&mut self, guard: &Guard) {
        let old: Vec<i32> = self.watches.keys().copied().collect();
        for wd in old {
            self.unwatch(wd);
        }
        self.dirs.clear();
        self.stale = false;
        self.root = guard.workspace().to_path_buf();
        self.add(guard, guard.workspace().to_path_buf());
        self.collect(guard);
    }

    /// Reads `dir` again: subdirectories gone are forgotten, new ones read.
    fn reread(&mut self, guard: &Guard, dir: &Path) {
        let old = self.dirs.remove(dir);
        let (old_subdirs, old_git) =
            old.map_or((Vec::new(), Vec::new()), |d| (d.subdirs, d.git_watches));
        let Some(read) = self.read(guard, dir, &old_git) else {
            for wd in old_git {
                self.unwatch_if(wd, dir);
            }
            self.forget(dir);
            return;
        };
        for wd in old_git
            .into_iter()
            .filter(|wd| !read.git_watches.contains(wd))
        {
            self.unwatch_if(wd, dir);
        }
        for gone in old_subdirs.iter().filter(|s| !read.subdirs.contains(s)) {
            self.forget(gone);
        }
        let new: Vec<PathBuf> = (read.subdirs.iter())
            .filter(|s| !old_subdirs.contains(s))
            .cloned()
            .collect();
        self.dirs.insert(dir.to_path_buf(), read);
        for sub in new {
            self.add(guard, sub);
        }
    }

    /// Reads `root` and every directory below it.
    fn add(&mut self, guard: &Guard, root: PathBuf) {
        let mut pending = vec![root];
        while let Some(dir) = pending.pop() {
            if let Some(read) = self.read(guard, &dir, &[]) {
                pending.extend(read.subdirs.iter().cloned());
                self.dirs.insert(dir, read);
            }
        }
    }

    /// Watches `dir` and lists it, then watches the directories of its git directory that the
    /// listing read (`known`: those watched already), listing it again until no new one was
    /// read: each is watched before what it holds counts, so nothing made meanwhile goes
    /// unreported.
    fn read(&mut self, guard: &Guard, dir: &Path, known: &[i32]) -> Option<Dir> {
        let watch = self.watch(dir, dir)?;
        let mut known: HashSet<i32> = known.iter().copied().collect();
        loop {
            let listing = guard.list(dir)?;
            let git_watches: Vec<i32> = (listing.read.iter())
                .filter_map(|d| self.watch(d, dir))
                .collect();
            let new = git_watches.iter().any(|wd| !known.contains(wd));
            if !new || self.inotify.is_none() {
                return Some(Dir {
                    watch: Some(watch),
                    subdirs: listing.subdirs,
                    found: listing.found,
                    git_watches,
                });
            }
            known.extend(git_watches);
        }
    }

    /// Watches `dir` for the listing of `owner`: the watch, none if it cannot be (a
    /// directory gone meanwhile; a limit reached gives watching up).
    fn watch(&mut self, dir: &Path, owner: &Path) -> Option<i32> {
        let inotify = self.inotify.as_ref()?;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid descriptor and C string; the result is checked.
        let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), EVENTS) };
        if wd < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::ENOMEM)) {
                self.give_up();
            }
            return None;
        }
        self.watches
            .insert(wd, (dir.to_path_buf(), owner.to_path_buf()));
        Some(wd)
    }

    /// Forgets `dir` and every directory below it.
    fn forget(&mut self, dir: &Path) {
        let below: Vec<PathBuf> = (self.dirs.keys())
            .filter(|d| d.starts_with(dir))
            .cloned()
            .collect();
        for path in below {
            if let Some(gone) = self.dirs.remove(&path) {
                for wd in gone.git_watches.into_iter().chain(gone.watch) {
                    self.unwatch_if(wd, &path);
                }
            }
        }
    }

    /// Removes the watch `wd` if it still belongs to the listing of `owner` (the kernel gives
    /// a directory renamed and read again under its new name the same watch).
    fn unwatch_if(&mut self, wd: i32, owner: &Path) {
        if self.watches.get(&wd).is_some_and(|(_, o)| o == owner) {
            self.unwatch(wd);
        }
    }

    fn unwatch(&mut self, wd: i32) {
        self.watches.remove(&wd);
        if let Some(inotify) = &self.inotify {
            // SAFETY: a valid descriptor; a watch already gone fails harmlessly.
            unsafe { libc::inotify_rm_watch(inotify.as_raw_fd(), wd) };
        }
    }

    /// Stops watching: from now on every call scans the whole workspace.
    fn give_up(&mut self) {
        self.inotify = None;
        self.dirs.clear();
        self.watches.clear();
    }

    /// The protected paths from what was read: the root's, then the rest by path.
    fn collect(&mut self, guard: &Guard) {
        let mut rest: Vec<Protected> = (self.dirs.values())
            .flat_map(|d| d.found.iter().cloned())
            .collect();
        rest.sort_by(|a, b| a.path.cmp(&b.path));
        self.found = guard.roots();
        self.found.extend(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(guard: &Guard, found: &[Protected]) -> Vec<String> {
        let mut shown: Vec<String> = found.iter().map(|p| guard.shown(&p.path)).collect();
        shown.sort();
        shown
    }

    /// What the index holds is what a full scan finds, after each kind of change.
    #[test]
    fn the_index_follows_the_workspace_as_a_scan_would() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let guard = Guard::new(&root, &[]);
        let mut index = Index::new();
        let check = |index: &mut Index, step: &str| {
            let held = shown(&guard, index.current(&guard));
            assert_eq!(held, shown(&guard, &guard.scan()), "{step}");
        };
        check(&mut index, "empty");
        std::fs::create_dir_all(root.join("a/b/.git/hooks")).unwrap();
        check(&mut index, "a nested repository");
        std::fs::rename(root.join("a"), root.join("c")).unwrap();
        check(&mut index, "its directory renamed");
        std::fs::create_dir_all(root.join("c/b/.git/modules/m/hooks")).unwrap();
        std::fs::write(root.join("c/b/.git/modules/m/HEAD"), "x").unwrap();
        check(&mut index, "a submodule's git directory");
        std::fs::create_dir_all(root.join("target/x/.git")).unwrap();
        check(&mut index, "a repository in a cache directory");
        std::fs::write(root.join("target/CACHEDIR.TAG"), "").unwrap();
        check(&mut index, "the cache tagged");
        std::fs::write(root.join("link-here"), "").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink("../c", root.join("d/.git")).unwrap();
        check(&mut index, "a .git link");
        std::fs::remove_dir_all(root.join("c")).unwrap();
        check(&mut index, "the repository removed");
        assert!(index.inotify.is_some(), "still watching");
    }
}
