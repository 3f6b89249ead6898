//! The protected paths of a shell's commands ([`super::protect`]), ready for the view: each
//! one that exists, and an empty directory standing in for each one that does not, checked
//! beneath the workspace without following a symbolic link. Each command's init mounts them
//! read-only (opening each the same way, [`super::view::fresh`]).
//!
//! The helper raises the shield before each command ([`Shield::raise`]): the workspace is
//! scanned again (a command may have made a git directory), and what is still protected and
//! still in place stays held, so commands that follow one another do not make and remove the
//! same stand-ins each time. The helper lowers the shield once no command has run for a
//! moment, and when it ends ([`Shield::lower`]).
//!
//! Commands of several shells run at once in one workspace (an MCP client's parallel calls, two
//! sessions), and a stand-in made by one may be mounted by another. So every protected
//! directory is held with a shared `flock` while commands may see it, and a stand-in is marked
//! by its mode ([`STAND_IN_MODE`], which no tool gives a directory): the shell that lets go of
//! it last, whichever made it, takes the lock exclusively and removes it (only while still
//! empty and still there, so nothing else is ever removed).

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::index::Index;
use super::ns;
use super::protect::{Guard, Protected};
use super::quarantine;
use super::wire::{self, Setup};

/// The mode of a stand-in: sticky and read-only, which marks it for any call that finds it.
const STAND_IN_MODE: u32 = 0o1555;

/// How often a call tries again to hold a protected directory that another call removed
/// between finding and locking it.
const ATTEMPTS: usize = 8;

/// The protected paths of a shell's workspace, each present (a stand-in for a missing one).
pub(super) struct Shield {
    guard: Guard,
    workspace: OwnedFd,
    /// The protected paths held, by the path the user names them with.
    held: HashMap<String, Held>,
    /// Counts the changes of what is protected: a path protected, or let go of, or found
    /// replaced.
    generation: u64,
    /// The protected paths of the workspace, kept current between commands.
    index: Index,
}

/// A protected path, as found; a directory is held with a shared lock.
struct Held {
    parent: OwnedFd,
    name: CString,
    /// The directory, locked; none for a file.
    dir: Option<OwnedFd>,
    /// The (device, inode) of what is at the path.
    identity: (u64, u64),
    stand_in: bool,
}

/// The protected paths of the workspace for a command, and the generation of that list: the
/// same generation, the same paths with the same files and directories at them.
pub(super) struct Raised {
    pub protected: Vec<String>,
    pub generation: u64,
}

impl Shield {
    /// The shield of the workspace of `setup`, holding nothing yet.
    pub fn new(setup: &Setup) -> Result<Shield, String> {
        let root = wire::to_path(&setup.workspace);
        let unprotect: Vec<PathBuf> = setup.unprotect.iter().map(|p| wire::to_path(p)).collect();
        let workspace = std::fs::File::open(&root)
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
        Ok(Shield {
            guard: Guard::new(&root, &unprotect),
            workspace,
            held: HashMap::new(),
            generation: 0,
            index: Index::new(),
        })
    }

    /// Scans the workspace for its protected paths and holds them, making a stand-in for
    /// each that is missing where its rule has one ([`Rule::stands_in`](super::protect::Rule)),
    /// for a command about to start: the protected paths held, relative to the workspace. A symbolic link where a protected path should be refuses the command: it
    /// could lead anywhere, and a mount cannot cover a link.
    pub fn raise(&mut self) -> Result<Raised, String> {
        let mut shown = Vec::new();
        let mut kept = HashMap::new();
        let mut changed = false;
        let found = self.index.current(&self.guard).to_vec();
        for protected in found {
            let rel = self.guard.shown(&protected.path);
            match self.held.remove(&rel) {
                Some(held) if held.in_place() => {
                    kept.insert(rel.clone(), held);
                }
                // New, or moved or removed since (by the user): held as it is now.
                replaced => {
                    changed = true;
                    drop(replaced);
                    match self.add(&protected, &rel)? {
                        Some(held) => kept.insert(rel.clone(), held),
                        // Missing and not stood in for: judged after the command instead.
                        None => continue,
                    };
                }
            }
            shown.push(rel);
        }
        // What is no longer protected is let go of.
        changed |= !self.held.is_empty();
        self.held = kept;
        self.generation += u64::from(changed);
        Ok(Raised {
            protected: shown,
            generation: self.generation,
        })
    }

    /// What of the workspace's protected paths a command that is over made or changed
    /// outside its view's covers (`covered`, what [`Shield::raise`] gave it): quarantined, and
    /// the notices for its output ([`quarantine`]).
    pub fn judge(&mut self, covered: &[String]) -> Vec<String> {
        let found = self.index.current(&self.guard);
        quarantine::judge(&self.workspace, &self.guard, found, covered)
    }

    /// Lets go of every protected path: the stand-ins no one else holds are removed.
    pub fn lower(&mut self) {
        self.generation += u64::from(!self.held.is_empty());
        self.held.clear();
    }

    /// Holds the protected path `rel`, making a stand-in when it is missing: none for what
    /// cordon's user cannot create either.
    fn add(&self, protected: &Protected, rel: &str) -> Result<Option<Held>, String> {
        let guard = &self.guard;
        let rel_path = Path::new(rel);
        let fail = |e: io::Error| format!("cannot protect {rel} ({}): {e}", protected.rule.why());
        // The scan found the parent (the workspace, or a git directory): it exists.
        let parent = match rel_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => ns::open_beneath(&self.workspace, p),
            _ => self.workspace.try_clone(),
        }
        .map_err(fail)?;
        let name = ns::cpath(Path::new(rel_path.file_name().unwrap_or_default())).map_err(fail)?;
        for _ in 0..ATTEMPTS {
            match ns::open_beneath(&self.workspace, rel_path) {
                // A link itself is what is opened: it must not be one.
                Ok(at) => {
                    let meta = std::fs::File::from(at.try_clone().map_err(fail)?)
                        .metadata()
                        .map_err(fail)?;
                    if meta.is_symlink() {
                        return Err(symlink(guard, protected));
                    }
                    if !meta.is_dir() {
                        return Ok(Some(Held {
                            parent,
                            name,
                            dir: None,
                            identity: (meta.dev(), meta.ino()),
                            stand_in: false,
                        }));
                    }
                    match hold(&parent, &name, &at).map_err(fail)? {
                        Some((dir, identity)) => {
                            return Ok(Some(Held {
                                parent,
                                name,
                                dir: Some(dir),
                                identity,
                                stand_in: meta.mode() & 0o7777 == STAND_IN_MODE,
                            }));
                        }
                        // Removed by the call that held it last: made again.
                        None => continue,
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(symlink(guard, protected));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && !protected.rule.stands_in() => {
                    return Ok(None);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // SAFETY: a valid descriptor and C string; the result is checked.
                    if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o700) } != 0 {
                        let e = io::Error::last_os_error();
                        return match e.raw_os_error() {
                            // Made by another call meanwhile: held as found.
                            Some(libc::EEXIST) => continue,
                            // What cordon's user cannot create, the command cannot either.
                            Some(libc::EACCES | libc::EROFS) => Ok(None),
                            _ => Err(fail(e)),
                        };
                    }
                    let at = ns::open_beneath(&self.workspace, rel_path).map_err(fail)?;
                    mark(&at).map_err(fail)?;
                    // Not found on the first try is the same as removed: try again.
                    continue;
                }
                Err(e) => return Err(fail(e)),
            }
        }
        Err(fail(io::Error::other(
            "other calls kept removing and making it; try again",
        )))
    }
}

impl Held {
    /// Whether the directory held is still the one at its name.
    fn in_place(&self) -> bool {
        here(&self.parent, &self.name) == Some(self.identity)
    }
}

/// The directory at `at` (`name` in `parent`) opened and share-locked, with its (device,
/// inode), or `None` when it is no longer there once locked (the last call to hold it
/// removed it meanwhile).
fn hold(
    parent: &OwnedFd,
    name: &CString,
    at: &OwnedFd,
) -> io::Result<Option<(OwnedFd, (u64, u64))>> {
    let dir = reopen(at)?;
    // SAFETY: a valid descriptor; the result is checked.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_SH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let held = identity(&dir).ok_or_else(io::Error::last_os_error)?;
    Ok((here(parent, name) == Some(held)).then_some((dir, held)))
}

/// The (device, inode) of the open file `fd`.
fn identity(fd: &OwnedFd) -> Option<(u64, u64)> {
    // SAFETY: `stat` is a valid buffer for the kernel to fill; the result is checked.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::fstat(fd.as_raw_fd(), &mut stat) == 0).then_some((stat.st_dev, stat.st_ino))
    }
}

/// The (device, inode) of what is at `name` in `parent` now, not following a link.
fn here(parent: &OwnedFd, name: &CString) -> Option<(u64, u64)> {
    // SAFETY: `stat` is a valid buffer for the kernel to fill; the result is checked.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        let done = libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        );
        (done == 0).then_some((stat.st_dev, stat.st_ino))
    }
}

/// Marks the new directory at `at` a stand-in.
fn mark(at: &OwnedFd) -> io::Result<()> {
    let path = format!("/proc/self/fd/{}", at.as_raw_fd());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(STAND_IN_MODE))
}

/// The `O_PATH` descriptor `at` opened for reading, which `flock` needs.
fn reopen(at: &OwnedFd) -> io::Result<OwnedFd> {
    let path = CString::new(format!("/proc/self/fd/{}", at.as_raw_fd()))?;
    // SAFETY: a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Drop for Held {
    fn drop(&mut self) {
        let (true, Some(dir)) = (self.stand_in, &self.dir) else {
            return;
        };
        // SAFETY: valid descriptors and C string. The lock is ours only when no other call
        // holds the stand-in; it is removed only while still at its name (a directory the
        // user put there since stays), and removing fails (and is left alone) unless empty.
        unsafe {
            if libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 && self.in_place() {
                libc::unlinkat(
                    self.parent.as_raw_fd(),
                    self.name.as_ptr(),
                    libc::AT_REMOVEDIR,
                );
            }
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
