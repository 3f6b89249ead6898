//! The protected paths of one call ([`super::protect`]), ready for the view: each one that
//! exists, and an empty directory standing in for each one that does not, checked beneath
//! the workspace without following a symbolic link. The command's init mounts them read-only
//! (opening each the same way, [`super::view::fresh`]).
//!
//! Calls run at once in one workspace (an MCP client's parallel calls, two sessions), and a
//! stand-in made by one may be mounted by another. So every protected directory is held with
//! a shared `flock` for the call, and a stand-in is marked by its mode ([`STAND_IN_MODE`],
//! which no tool gives a directory): the call that ends last, whichever made it, takes the
//! lock exclusively and removes it (only while still empty, so nothing else is ever removed).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::ns;
use super::protect::{Guard, Protected};
use super::wire::{self, Setup};

/// The mode of a stand-in: sticky and read-only, which marks it for any call that finds it.
const STAND_IN_MODE: u32 = 0o1555;

/// How often a call tries again to hold a protected directory that another call removed
/// between finding and locking it.
const ATTEMPTS: usize = 8;

/// The protected paths of a call, each present (a stand-in for a missing one).
pub(super) struct Shield {
    workspace: OwnedFd,
    /// Each protected path, relative to the workspace: how the user names it.
    pub shown: Vec<String>,
    /// The protected directories, held for the call; the stand-ins among them removed on
    /// drop by the last call to hold them.
    held: Vec<Held>,
}

/// A protected directory, held with a shared lock.
struct Held {
    parent: OwnedFd,
    name: CString,
    dir: OwnedFd,
    stand_in: bool,
}

impl Shield {
    /// Scans the workspace of `request` for its protected paths and opens them, making a
    /// stand-in for each that is missing. A symbolic link where a protected path should be
    /// refuses the call: it could lead anywhere, and a mount cannot cover a link.
    pub fn raise(request: &Setup) -> Result<Shield, String> {
        let root = wire::to_path(&request.workspace);
        let unprotect: Vec<PathBuf> = request.unprotect.iter().map(|p| wire::to_path(p)).collect();
        let guard = Guard::new(&root, &unprotect);
        let workspace = std::fs::File::open(&root)
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
        let mut shield = Shield {
            workspace,
            shown: Vec::new(),
            held: Vec::new(),
        };
        for protected in guard.scan() {
            shield.add(&guard, protected)?;
        }
        Ok(shield)
    }

    fn add(&mut self, guard: &Guard, protected: Protected) -> Result<(), String> {
        let shown = guard.shown(&protected.path);
        let rel = Path::new(&shown);
        let fail = |e: io::Error| format!("cannot protect {shown} ({}): {e}", protected.rule.why());
        // The scan found the parent (the workspace, or a git directory): it exists.
        let parent = match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => ns::open_beneath(&self.workspace, p),
            _ => self.workspace.try_clone(),
        }
        .map_err(fail)?;
        let name = ns::cpath(Path::new(rel.file_name().unwrap_or_default())).map_err(fail)?;
        for _ in 0..ATTEMPTS {
            match ns::open_beneath(&self.workspace, rel) {
                // A link itself is what is opened: it must not be one.
                Ok(at) => {
                    let meta = std::fs::File::from(at.try_clone().map_err(fail)?)
                        .metadata()
                        .map_err(fail)?;
                    if meta.is_symlink() {
                        return Err(symlink(guard, &protected));
                    }
                    if meta.is_dir() {
                        match hold(&parent, &name, &at).map_err(fail)? {
                            Some(dir) => self.held.push(Held {
                                parent: parent.try_clone().map_err(fail)?,
                                name: name.clone(),
                                dir,
                                stand_in: meta.mode() & 0o7777 == STAND_IN_MODE,
                            }),
                            // Removed by the call that held it last: made again.
                            None => continue,
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(symlink(guard, &protected));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // SAFETY: a valid descriptor and C string; the result is checked.
                    if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o700) } != 0 {
                        let e = io::Error::last_os_error();
                        return match e.raw_os_error() {
                            // Made by another call meanwhile: held as found.
                            Some(libc::EEXIST) => continue,
                            // What cordon's user cannot create, the command cannot either.
                            Some(libc::EACCES | libc::EROFS) => Ok(()),
                            _ => Err(fail(e)),
                        };
                    }
                    let at = ns::open_beneath(&self.workspace, rel).map_err(fail)?;
                    mark(&at).map_err(fail)?;
                    // Not found on the first try is the same as removed: try again.
                    continue;
                }
                Err(e) => return Err(fail(e)),
            }
            self.shown.push(shown);
            return Ok(());
        }
        Err(fail(io::Error::other(
            "other calls kept removing and making it; try again",
        )))
    }
}

/// The directory at `at` (`name` in `parent`) opened and share-locked, or `None` when it is
/// no longer there once locked (the last call to hold it removed it meanwhile).
fn hold(parent: &OwnedFd, name: &CString, at: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    let dir = reopen(at)?;
    // SAFETY: a valid descriptor; the result is checked.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_SH) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let held = std::fs::File::from(dir.try_clone()?).metadata()?;
    // SAFETY: `stat` is a valid buffer for the kernel to fill; the result is checked.
    let here = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        let done = libc::fstatat(
            parent.as_raw_fd(),
            name.as_ptr(),
            &mut stat,
            libc::AT_SYMLINK_NOFOLLOW,
        );
        (done == 0).then_some((stat.st_dev, stat.st_ino))
    };
    Ok((here == Some((held.dev(), held.ino()))).then_some(dir))
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

impl Drop for Shield {
    fn drop(&mut self) {
        for held in self.held.iter().filter(|h| h.stand_in) {
            // SAFETY: valid descriptors and C string. The lock is ours only when no other
            // call holds the stand-in; removing fails (and is left alone) unless it is empty.
            unsafe {
                if libc::flock(held.dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 {
                    libc::unlinkat(
                        held.parent.as_raw_fd(),
                        held.name.as_ptr(),
                        libc::AT_REMOVEDIR,
                    );
                }
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
