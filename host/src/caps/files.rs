//! The `files` capability: atomic replacement of a file that keeps its permission bits.
//!
//! Confinement is by `cap-std`: every path is opened beneath a read-write grant's directory
//! handle, and the kernel-backed resolution refuses `..` and symbolic links that lead out.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use wasmtime::component::{Linker, WasmList};

use crate::bindings::cordon::tool::files::ReplaceError;
use crate::bindings::interface;
use crate::grants::Grants;
use crate::state::State;

/// Handles on a plugin's read-write directories, opened once when the plugin is loaded.
#[derive(Default)]
pub struct Roots(Vec<(PathBuf, Dir)>);

impl Roots {
    /// Opens every read-write directory of `grants`.
    pub fn open(grants: &Grants) -> io::Result<Self> {
        let mut roots = Vec::new();
        for dir in grants.dirs.iter().filter(|d| d.writable) {
            roots.push((
                dir.path.clone(),
                Dir::open_ambient_dir(&dir.path, ambient_authority())?,
            ));
        }
        Ok(Roots(roots))
    }

    /// The grant `path` lies in (the deepest one) and the path relative to it.
    fn locate<'a>(&'a self, path: &Path) -> Option<(&'a Dir, PathBuf)> {
        self.0
            .iter()
            .filter_map(|(root, dir)| Some((dir, path.strip_prefix(root).ok()?.to_path_buf())))
            .max_by_key(|(_, rel)| std::cmp::Reverse(rel.components().count()))
    }
}

/// Links the capability. `replace` writes the new contents straight from the plugin's memory:
/// the generated binding would first copy them into a buffer of the host's, which for a large
/// file costs as much again as writing it.
pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.instance(interface::FILES)?.func_wrap(
        "replace",
        |store, (path, contents): (String, WasmList<u8>)| {
            let contents = contents.as_le_slice(&store);
            Ok((replace(&store.data().roots, Path::new(&path), contents),))
        },
    )
}

/// Writes `contents` to a temporary file beside `path`, then renames it over `path`.
pub fn replace(roots: &Roots, path: &Path, contents: &[u8]) -> Result<(), ReplaceError> {
    let shown = path.display().to_string();
    let not_permitted = || {
        ReplaceError::NotPermitted(format!(
            "{shown} is outside the directories this tool may write"
        ))
    };
    let (dir, rel) = roots.locate(path).ok_or_else(not_permitted)?;
    if rel.file_name().is_none() {
        return Err(ReplaceError::IsDirectory(shown));
    }
    // Writing through a symbolic link updates the file it points to (when that stays inside
    // the grant) and keeps the link.
    let target = match dir.symlink_metadata(&rel) {
        Ok(meta) if meta.is_symlink() => dir.canonicalize(&rel).map_err(|e| classify(&shown, e))?,
        _ => rel,
    };
    let existing = match dir.metadata(&target) {
        Ok(meta) if meta.is_dir() => return Err(ReplaceError::IsDirectory(shown)),
        // A FIFO, socket or device is not replaced by a file.
        Ok(meta) if !meta.is_file() => {
            return Err(ReplaceError::Io(format!(
                "{shown} is not a regular file (it is a named pipe, a socket or a device)"
            )));
        }
        Ok(meta) => Some(meta.permissions()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(classify(&shown, e)),
    };
    let name = target.file_name().ok_or_else(not_permitted)?;
    let tmp = target.with_file_name(format!(
        ".{}.cordon-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut file = dir
        .open_with(&tmp, OpenOptions::new().write(true).create_new(true))
        .map_err(|e| classify(&shown, e))?;
    let written = (|| {
        file.write_all(contents)?;
        if let Some(perms) = existing {
            file.set_permissions(perms)?;
        }
        file.sync_all()?;
        drop(file);
        dir.rename(&tmp, dir, &target)
    })();
    written.map_err(|e| {
        let _ = dir.remove_file(&tmp);
        classify(&shown, e)
    })
}

static NEXT: AtomicU64 = AtomicU64::new(0);

fn classify(shown: &str, error: io::Error) -> ReplaceError {
    match error.kind() {
        io::ErrorKind::NotFound => {
            ReplaceError::NoParent(format!("the parent directory of {shown} does not exist"))
        }
        io::ErrorKind::PermissionDenied => ReplaceError::NotPermitted(format!(
            "{shown} resolves outside the directories this tool may write (through a symbolic link?) or is not writable"
        )),
        io::ErrorKind::IsADirectory => ReplaceError::IsDirectory(shown.to_string()),
        _ => ReplaceError::Io(format!("{shown}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, Roots) {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        let roots = Roots::open(&Grants::none(&root).read_write(&root)).unwrap();
        (ws, roots)
    }

    #[test]
    fn replaces_and_keeps_permission_bits() {
        let (ws, roots) = setup();
        let path = ws.path().canonicalize().unwrap().join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        replace(&roots, &path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let names: Vec<_> = std::fs::read_dir(ws.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn refuses_paths_outside_and_links_leading_out() {
        let (ws, roots) = setup();
        let outside = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        assert!(matches!(
            replace(&roots, &outside.path().join("x"), b"x"),
            Err(ReplaceError::NotPermitted(_))
        ));
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        assert!(replace(&roots, &root.join("out/x"), b"x").is_err());
        assert!(!outside.path().join("x").exists());
    }

    #[test]
    fn refuses_to_replace_a_fifo() {
        let (ws, roots) = setup();
        let fifo = ws.path().canonicalize().unwrap().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            replace(&roots, &fifo, b"x"),
            Err(ReplaceError::Io(m)) if m.ends_with("is not a regular file (it is a named pipe, a socket or a device)")
        ));
        let meta = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    }
}
