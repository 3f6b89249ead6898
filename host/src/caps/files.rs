//! The `files` capability: atomic replacement of a file that keeps its permission bits.
//!
//! Confinement is by `cap-std`: every path is opened beneath a read-write grant's directory
//! handle, and the kernel-backed resolution refuses `..` and symbolic links that lead out.
//! cordon's own files ([`Grants::own`](crate::grants::Grants::own)) are refused even inside a grant: the runtime
//! refuses to start with one there, so this holds should that check ever be bypassed. The
//! workspace's protected paths ([`Grants::guard`](crate::grants::Grants::guard)) are refused as
//! named and as resolved, so no symbolic link leads into one.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions, Permissions};
use rustix::fs::{self, AtFlags, Mode, OFlags};
use rustix::io::Errno;
use wasmtime::component::{ComponentType, Linker, Lower, WasmList};

use crate::bindings::cordon::tool::files::ReplaceError;
use crate::bindings::interface;
use crate::grants::Roots;
use crate::state::State;

/// Links the capability. `replace` writes the new contents straight from the plugin's memory:
/// the generated binding would first copy them into a buffer of the host's, which for a large
/// file costs as much again as writing it.
pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    let name = interface::versioned(interface::FILES, crate::bindings::VERSION);
    link(linker, &name, |error| error)
}

/// Links `replace` as the instance `name`, each failure given as `error` makes it: as it is
/// for the current contract, adapted for an earlier one (see [`crate::contract`]).
pub(crate) fn link<E>(
    linker: &mut Linker<State>,
    name: &str,
    error: fn(ReplaceError) -> E,
) -> wasmtime::Result<()>
where
    E: ComponentType + Lower + Send + Sync + 'static,
{
    linker.instance(name)?.func_wrap(
        "replace",
        move |store, (path, contents): (String, WasmList<u8>)| {
            if store.data().dry_run {
                return Ok((Err(error(ReplaceError::NotPermitted(format!(
                    "{path}: a dry run may not write"
                )))),));
            }
            let contents = contents.as_le_slice(&store);
            Ok((replace(&store.data().roots, Path::new(&path), contents).map_err(error),))
        },
    )
}

/// Replaces `path` with `contents`, atomically: readers see the old file or the new one,
/// never a part, and a failure or a kill leaves no temporary file behind (see `write_new`).
pub fn replace(roots: &Roots, path: &Path, contents: &[u8]) -> Result<(), ReplaceError> {
    let shown = path.display().to_string();
    let not_permitted = || {
        ReplaceError::NotPermitted(format!(
            "{shown} is outside the directories this tool may write"
        ))
    };
    let (root, rel) = roots.locate(path).ok_or_else(not_permitted)?;
    let dir = &root.dir;
    if rel.file_name().is_none() {
        return Err(ReplaceError::IsDirectory(shown));
    }
    // As named first (its parent may not exist yet), then as resolved.
    let guarded = |path: &Path| match roots.guard.as_deref() {
        Some(guard) => guard
            .rule_for(path)
            .map_or(Ok(()), |p| Err(ReplaceError::Protected(guard.refusal(&p)))),
        None => Ok(()),
    };
    guarded(path)?;
    // Writing through a symbolic link updates the file it points to (when that stays inside
    // the grant) and keeps the link.
    let target = match dir.symlink_metadata(&rel) {
        Ok(meta) if meta.is_symlink() => dir.canonicalize(&rel).map_err(|e| classify(&shown, e))?,
        _ => rel,
    };
    let resolved = root.resolve(&target).map_err(|e| classify(&shown, e))?;
    if root.is_own(&resolved) {
        return Err(ReplaceError::NotPermitted(format!(
            "{shown} is one of cordon's own files (its cache, config or plugins), which no tool may write"
        )));
    }
    guarded(&resolved)?;
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
    // The parent is opened once, beneath the grant: every later step is relative to this
    // handle, so swapping the parent for a link meanwhile neither escapes nor defeats cleanup.
    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let parent = dir.open_dir(parent).map_err(|e| classify(&shown, e))?;
    write_new(&parent, name, contents, existing).map_err(|e| classify(&shown, e))?;
    if root.owned_by_dir {
        // See `Root::owned_by_dir`: the file becomes its directory's owner's.
        let dir = fs::fstat(&parent).map_err(|e| classify(&shown, e.into()))?;
        let (uid, gid) = (fs::Uid::from_raw(dir.st_uid), fs::Gid::from_raw(dir.st_gid));
        fs::chownat(
            &parent,
            name,
            Some(uid),
            Some(gid),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| classify(&shown, e.into()))?;
    }
    Ok(())
}

/// Puts `contents` in `dir` as `name`, replacing any file there, with the permission bits
/// `perms` (those of a new file when `None`). The contents are written to an unnamed file
/// (`O_TMPFILE`), which vanishes by itself on any failure or kill, then linked into place.
/// A file system without unnamed files gets a named temporary file, removed on failure.
fn write_new(
    dir: &Dir,
    name: &OsStr,
    contents: &[u8],
    perms: Option<Permissions>,
) -> io::Result<()> {
    let Some(mut file) = unnamed(dir)? else {
        return write_named(dir, name, contents, perms);
    };
    fill(&mut file, contents, perms)?;
    let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    // Linking by the /proc name needs no privilege (`AT_EMPTY_PATH` needs
    // CAP_DAC_READ_SEARCH). A new name is linked straight in: nothing to clean up, ever.
    match fs::linkat(fs::CWD, &fd_path, dir, name, AtFlags::SYMLINK_FOLLOW) {
        Err(e) if e == Errno::EXIST => {}
        done => return done.map_err(io::Error::from),
    }
    // An existing file is replaced by renaming over it. A kill between the link and the
    // rename (two system calls, not the whole write) is the only way to leave `tmp` behind.
    let tmp = temp_name(name);
    fs::linkat(fs::CWD, &fd_path, dir, &tmp, AtFlags::SYMLINK_FOLLOW)?;
    rename_over(dir, &tmp, name)
}

/// An unnamed file open for writing in `dir`, or `None` when the file system (or a missing
/// /proc, needed to link it) does not allow one.
fn unnamed(dir: &Dir) -> io::Result<Option<File>> {
    static PROC: OnceLock<bool> = OnceLock::new();
    if !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir()) {
        return Ok(None);
    }
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    match fs::openat(dir, ".", flags, Mode::from_raw_mode(0o666)) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(e) if e == Errno::OPNOTSUPP || e == Errno::ISDIR => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// [`write_new`] through a named temporary file in `dir`, removed on failure. A kill during
/// the write leaves it: only file systems without `O_TMPFILE` come here.
fn write_named(
    dir: &Dir,
    name: &OsStr,
    contents: &[u8],
    perms: Option<Permissions>,
) -> io::Result<()> {
    let tmp = temp_name(name);
    let mut file = dir
        .open_with(&tmp, OpenOptions::new().write(true).create_new(true))?
        .into_std();
    let filled = fill(&mut file, contents, perms);
    drop(file);
    match filled {
        Ok(()) => rename_over(dir, &tmp, name),
        Err(e) => {
            let _ = dir.remove_file(&tmp);
            Err(e)
        }
    }
}

/// Writes `contents` to `file`, sets `perms` and makes it durable.
fn fill(file: &mut File, contents: &[u8], perms: Option<Permissions>) -> io::Result<()> {
    file.write_all(contents)?;
    if let Some(perms) = perms {
        file.set_permissions(perms.into_std(file)?)?;
    }
    file.sync_all()
}

/// Renames `tmp` over `name` in `dir`, or removes `tmp` when that fails.
fn rename_over(dir: &Dir, tmp: &Path, name: &OsStr) -> io::Result<()> {
    fs::renameat(dir, tmp, dir, name).map_err(|e| {
        let _ = fs::unlinkat(dir, tmp, AtFlags::empty());
        e.into()
    })
}

/// A name for a temporary file beside `name`, unique to this process.
fn temp_name(name: &OsStr) -> PathBuf {
    PathBuf::from(format!(
        ".{}.cordon-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
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
    use crate::grants::Grants;
    use crate::sandbox::protect::Guard;
    use cap_std::ambient_authority;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

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

    /// The entries of `dir`, sorted.
    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn creates_and_replaces_leaving_no_temporary_file() {
        let (ws, roots) = setup();
        let root = ws.path().canonicalize().unwrap();
        replace(&roots, &root.join("sub/new.txt"), b"x").unwrap_err();
        std::fs::create_dir(root.join("sub")).unwrap();
        replace(&roots, &root.join("sub/new.txt"), b"one").unwrap();
        replace(&roots, &root.join("sub/new.txt"), b"two").unwrap();
        replace(&roots, &root.join("top.txt"), b"top").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("sub/new.txt")).unwrap(),
            "two"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("top.txt")).unwrap(),
            "top"
        );
        assert_eq!(entries(&root), ["sub", "top.txt"]);
        assert_eq!(entries(&root.join("sub")), ["new.txt"]);
    }

    /// Both ways of writing (unnamed file, named fallback) clean up when the last step fails:
    /// here the rename, over a directory that is not empty.
    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let (ws, _) = setup();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("full/inner")).unwrap();
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).unwrap();
        let name = OsStr::new("full");
        assert!(write_new(&dir, name, b"x", None).is_err());
        assert!(write_named(&dir, name, b"x", None).is_err());
        assert_eq!(entries(&root), ["full"]);
        assert_eq!(entries(&root.join("full")), ["inner"]);
    }

    #[test]
    fn the_named_fallback_replaces_and_keeps_permission_bits() {
        let (ws, _) = setup();
        let root = ws.path().canonicalize().unwrap();
        let path = root.join("run.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).unwrap();
        let perms = dir.metadata("run.sh").unwrap().permissions();
        write_named(&dir, OsStr::new("run.sh"), b"new", Some(perms)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o750
        );
        assert_eq!(entries(&root), ["run.sh"]);
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
    fn refuses_protected_paths_inside_a_grant_by_any_name() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("cache")).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("cache", root.join("link")).unwrap();
        std::fs::write(root.join("cache/a.cwasm"), "code").unwrap();
        std::os::unix::fs::symlink("cache/a.cwasm", root.join("code")).unwrap();
        let mut grants = Grants::none(&root).read_write(&root);
        grants.own = vec![root.join("cache")].into();
        let roots = Roots::open(&grants).unwrap();
        for path in [
            "cache/a.cwasm",
            "cache/new",
            "link/new",
            "sub/../cache/new",
            "code",
        ] {
            let refused = replace(&roots, &root.join(path), b"x");
            assert!(
                matches!(&refused, Err(ReplaceError::NotPermitted(m)) if m.contains("cordon's own files")),
                "{path}: {refused:?}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join("cache/a.cwasm")).unwrap(),
            "code"
        );
        assert!(!root.join("cache/new").exists());
        replace(&roots, &root.join("other.txt"), b"x").unwrap();
    }

    #[test]
    fn refuses_the_workspaces_protected_paths_as_named_and_as_resolved() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::os::unix::fs::symlink(".git/hooks", root.join("hooks")).unwrap();
        std::os::unix::fs::symlink(".git/config", root.join("config")).unwrap();
        let mut grants = Grants::none(&root).read_write(&root);
        grants.guard = Some(Arc::new(Guard::new(&root, &[])));
        let roots = Roots::open(&grants).unwrap();
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            "hooks/pre-commit",
            "config",
            ".vscode/settings.json",
            ".envrc",
        ] {
            let refused = replace(&roots, &root.join(path), b"x");
            assert!(
                matches!(&refused, Err(ReplaceError::Protected(m)) if m.contains("unprotect")),
                "{path}: {refused:?}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        replace(&roots, &root.join(".git/HEAD"), b"ref: refs/heads/main\n").unwrap();
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
