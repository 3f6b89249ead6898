//! The protected paths of one call ([`super::protect`]), ready for the view: each one that
//! exists, and an empty directory standing in for each one that does not, checked beneath
//! the workspace without following a symbolic link. The view mounts them read-only (opening
//! each the same way, [`open`]); the stand-ins are removed after the call (only while still
//! empty, so nothing else is ever removed).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::ns;
use super::protect::{Guard, Protected};
use super::wire::{self, Request};

/// The protected paths of a call, each present (a stand-in for a missing one).
pub(super) struct Shield {
    workspace: OwnedFd,
    /// Each protected path, relative to the workspace: how the user names it.
    pub shown: Vec<String>,
    /// The stand-ins made for this call: their parent and name, removed on drop.
    made: Vec<(OwnedFd, CString)>,
}

impl Shield {
    /// Scans the workspace of `request` for its protected paths and opens them, making a
    /// stand-in for each that is missing. A symbolic link where a protected path should be
    /// refuses the call: it could lead anywhere, and a mount cannot cover a link.
    pub fn raise(request: &Request) -> Result<Shield, String> {
        let root = wire::to_path(&request.workspace);
        let unprotect: Vec<PathBuf> = request.unprotect.iter().map(|p| wire::to_path(p)).collect();
        let guard = Guard::new(&root, &unprotect);
        let workspace = std::fs::File::open(&root)
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the workspace {}: {e}", root.display()))?;
        let mut shield = Shield {
            workspace,
            shown: Vec::new(),
            made: Vec::new(),
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
        match ns::open_beneath(&self.workspace, rel) {
            // A link itself is what is opened: it must not be one.
            Ok(at) => {
                let meta = std::fs::File::from(at).metadata().map_err(fail)?;
                if meta.is_symlink() {
                    return Err(symlink(guard, &protected));
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(symlink(guard, &protected));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let parent = match rel.parent() {
                    Some(p) if !p.as_os_str().is_empty() => {
                        ns::open_beneath(&self.workspace, p).map_err(fail)?
                    }
                    _ => self.workspace.try_clone().map_err(fail)?,
                };
                let name =
                    ns::cpath(Path::new(rel.file_name().unwrap_or_default())).map_err(fail)?;
                // SAFETY: a valid descriptor and C string; the result is checked.
                if unsafe { libc::mkdirat(parent.as_raw_fd(), name.as_ptr(), 0o755) } != 0 {
                    let e = io::Error::last_os_error();
                    // What cordon's user cannot create, the command cannot either.
                    return match e.raw_os_error() {
                        Some(libc::EACCES | libc::EROFS) => Ok(()),
                        _ => Err(fail(e)),
                    };
                }
                self.made.push((parent, name));
            }
            Err(e) => return Err(fail(e)),
        }
        self.shown.push(shown);
        Ok(())
    }
}

/// Each protected path of `shield`, absolute, as a detached tree for the view: opened, in the
/// caller's mount namespace, beneath the workspace `root` without following a link.
pub(super) fn open(shield: &Shield, root: &Path) -> io::Result<Vec<(PathBuf, OwnedFd, bool)>> {
    let workspace = OwnedFd::from(std::fs::File::open(root)?);
    shield
        .shown
        .iter()
        .map(|rel| {
            let at = ns::open_beneath(&workspace, Path::new(rel))?;
            let dir = std::fs::File::from(at.try_clone()?).metadata()?.is_dir();
            Ok((root.join(rel), ns::open_tree_of(&at)?, dir))
        })
        .collect()
}

impl Drop for Shield {
    fn drop(&mut self) {
        for (parent, name) in &self.made {
            // SAFETY: a valid descriptor and C string; an error (not empty) is left alone.
            unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) };
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
