//! The file-system view of a shell's commands: a fresh root with only what a command may see,
//! every host tree bound at its real path.
//!
//! The host trees are opened first, as detached copies ([`Sources::open`]): by the helper
//! when cordon runs as root (it alone may then reach every path, and it gives the workspace
//! its id map), by the zygote otherwise. [`build`] then lays them out on a new tmpfs root in
//! the zygote's mount namespace, covers the system's secret files, and pivots into it; the
//! old root is detached, so nothing else of the host stays reachable.
//!
//! Each command's init then mounts, in its own copy of that view, what is fresh for each
//! command ([`fresh`]): a `/proc` of its PID namespace, empty `/tmp`, `/dev/shm` and
//! `/dev/pts`, and a private `HOME` unless the home is kept. The zygote adds read-only covers
//! over the protected and hidden paths as they are when the command comes ([`cover`]).

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::Policy;
use super::ns::{self, Access};
use super::protect;
use super::wire;
use super::{HOME, READ_ROOTS, SECRET_PATHS};

/// Device nodes of the host bound into the private `/dev`.
pub(super) const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Parts of the fresh `/proc` that are frozen read-only, as bubblewrap does: kernel settings
/// and triggers that no command needs to write.
const PROC_FROZEN: [&str; 4] = ["sys", "sysrq-trigger", "irq", "bus"];

/// Where, in the helper's mount namespace, the new root is built: a tmpfs mounted over `/tmp`
/// (the sources are open by then, so covering the host's `/tmp` hides nothing they need).
const NEW_ROOT: &str = "/tmp";

/// What a host tree becomes in the view.
enum Entry {
    /// A detached copy of the tree (a directory or not), attached at the same path.
    Tree(OwnedFd, Access, bool),
    /// A symbolic link, recreated as it is (`/bin` → `usr/bin`).
    Link(PathBuf),
}

/// The host trees of a command's view, opened, in the order they are attached.
pub(super) struct Sources {
    /// System directories and the CPU description of `/sys`.
    system: Vec<(PathBuf, Entry)>,
    devices: Vec<(PathBuf, Entry)>,
    /// The workspace and the extra paths, shallowest first.
    granted: Vec<(PathBuf, Entry)>,
    /// The home directory that lasts between calls, if the command has one.
    home: Option<OwnedFd>,
}

impl Sources {
    /// Opens every host tree the view of `policy` shows. With `idmap` (cordon runs as root),
    /// the workspace, the extra paths and the home show root's files as the sandbox user's.
    pub fn open(policy: &Policy, idmap: Option<&OwnedFd>) -> Result<Sources, ViewError> {
        let opening = |path: &Path, source: io::Error| ViewError::Open {
            path: path.to_path_buf(),
            source,
        };
        let mut system = Vec::new();
        let roots = READ_ROOTS.iter().map(PathBuf::from);
        for path in roots.chain([PathBuf::from("/sys/devices/system/cpu")]) {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let entry = if meta.is_symlink() {
                Entry::Link(std::fs::read_link(&path).map_err(|e| opening(&path, e))?)
            } else {
                let tree = ns::open_tree(&path).map_err(|e| opening(&path, e))?;
                Entry::Tree(tree, Access::ReadOnly, meta.is_dir())
            };
            system.push((path, entry));
        }
        let mut devices = Vec::new();
        for name in DEVICES {
            let path = Path::new("/dev").join(name);
            if let Ok(tree) = ns::open_tree(&path) {
                devices.push((path, Entry::Tree(tree, Access::Devices, false)));
            }
        }
        let mut granted: Vec<(PathBuf, Access)> =
            vec![(policy.workspace.clone(), Access::Writable)];
        for (paths, access, what) in [
            (&policy.extra_read, Access::ReadOnly, "readable"),
            (&policy.extra_write, Access::Writable, "writable"),
        ] {
            for path in paths {
                granted.push((extra(path, what)?, access));
            }
        }
        granted.sort_by_key(|(path, _)| path.components().count());
        let shared = |path: &Path, tree: OwnedFd| -> Result<OwnedFd, ViewError> {
            if let Some(userns) = idmap {
                ns::idmap(&tree, userns).map_err(|source| ViewError::Idmap {
                    path: path.to_path_buf(),
                    source,
                })?;
            }
            Ok(tree)
        };
        let granted = granted
            .into_iter()
            .map(|(path, access)| {
                let dir = path.is_dir();
                // A layer's keeper already shows it as the command's own (see `layer`).
                if let Some(socket) = policy.layer.as_deref().filter(|_| path == policy.workspace) {
                    let tree =
                        super::layer::receive(socket).map_err(|source| ViewError::Layer {
                            socket: socket.to_path_buf(),
                            source,
                        })?;
                    return Ok((path, Entry::Tree(tree, access, dir)));
                }
                let tree = ns::open_tree(&path).map_err(|e| opening(&path, e))?;
                Ok((path.clone(), Entry::Tree(shared(&path, tree)?, access, dir)))
            })
            .collect::<Result<Vec<_>, ViewError>>()?;
        let home = match &policy.home {
            Some(dir) => {
                let tree = ns::open_tree(dir).map_err(|e| opening(dir, e))?;
                Some(shared(dir, tree)?)
            }
            None => None,
        };
        Ok(Sources {
            system,
            devices,
            granted,
            home,
        })
    }
}

/// Why a command's view cannot be made: the step, the path and the system's error.
#[derive(Debug, thiserror::Error)]
pub(super) enum ViewError {
    #[error("cannot open {}: {source}", path.display())]
    Open { path: PathBuf, source: io::Error },
    #[error("the extra {what} path {} is unusable: {source}", path.display())]
    Extra {
        /// "readable" or "writable".
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error(
        "cannot show {} to the sandbox's user (an idmapped mount of it failed: {source}; its \
         file system may not support idmapped mounts)",
        path.display()
    )]
    Idmap { path: PathBuf, source: io::Error },
    /// The keeper of the workspace's layer, listening at `socket`, did not hand it over.
    #[error(
        "cannot get the workspace's layer from its keeper at {}: {source}",
        socket.display()
    )]
    Layer { socket: PathBuf, source: io::Error },
    /// A step of building the view the zygote keeps; the path as commands see it.
    #[error("cannot build the command's view: {doing} {}: {source}", path.display())]
    Build {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The zygote could not enter a command's mount namespace to cover what it must not change.
    #[error("cannot enter the command's mount namespace: {0}")]
    Enter(io::Error),
    /// A step of a command's own part of the view.
    #[error("cannot prepare the command's view: {doing} {}: {source}", path.display())]
    Prepare {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// `path`, an extra path of a policy (`what`: readable or writable), canonical: it must
/// exist.
pub(super) fn extra(path: &Path, what: &'static str) -> Result<PathBuf, ViewError> {
    path.canonicalize().map_err(|source| ViewError::Extra {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The view, as built.
pub(super) struct View {
    /// The trees bound into it (the workspace and the extra paths), shallowest first.
    pub granted: Vec<(PathBuf, Access)>,
}

/// The options of the tmpfs of a command's `/tmp`, under the memory limit `memory`: half of it.
pub(super) fn tmp_options(memory: u64) -> String {
    format!("mode=1777,size={}", memory / 2)
}

/// Builds the view from `sources` and makes it the root of this (the zygote's) mount
/// namespace. `/dev/shm`, `/dev/pts` and `HOME` are only mount points here (unless the home
/// is kept), and `/proc` belongs to the zygote: each command mounts its own ([`fresh`]).
/// `/tmp` is a tmpfs of the options `lasting_tmp` that every command of the view shares (a
/// session's), else a mount point too.
pub(super) fn build(sources: Sources, lasting_tmp: Option<&str>) -> Result<View, ViewError> {
    let root = Path::new(NEW_ROOT);
    let at = |path: &Path| root.join(path.strip_prefix("/").unwrap_or(path));
    // Paths are named as the command would see them.
    let fail = |doing: &'static str, path: &Path, source: io::Error| ViewError::Build {
        doing,
        path: path
            .strip_prefix(root)
            .map_or(path.to_path_buf(), |p| Path::new("/").join(p)),
        source,
    };
    // Nothing done here propagates back to the host.
    ns::make_private().map_err(|e| fail("making private", Path::new("/"), e))?;
    // Found before the new root covers the host's /tmp, which they might be in.
    let secrets = secrets();
    tmpfs(root, "mode=0755,size=1m").map_err(|e| fail("mounting a tmpfs on", root, e))?;

    let Sources {
        system,
        devices,
        granted,
        home: kept_home,
    } = sources;
    for (path, entry) in system {
        let target = at(&path);
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }
    if !secrets.is_empty() {
        // A secret file is covered by a file nobody may open, so that reading it fails as it
        // would for want of permission; the file lives on a scratch tmpfs, detached at once.
        let scratch = at(Path::new("/.secrets"));
        let blank = scratch.join("blank");
        let make = || -> io::Result<()> {
            std::fs::create_dir(&scratch)?;
            tmpfs(&scratch, "mode=0700,size=4k")?;
            std::fs::File::create(&blank)?;
            std::fs::set_permissions(&blank, std::fs::Permissions::from_mode(0o000))
        };
        make().map_err(|e| fail("preparing the cover of", &blank, e))?;
        for (path, dir) in secrets {
            let target = at(&path);
            let covered = match dir {
                true => cover_path(&target, true),
                false => ns::open_tree(&blank)
                    .and_then(|blank| ns::attach(&blank, &target, Access::ReadOnly)),
            };
            covered.map_err(|e| fail("hiding", &target, e))?;
        }
        ns::detach(&scratch).map_err(|e| fail("detaching", &scratch, e))?;
        std::fs::remove_dir(&scratch).map_err(|e| fail("removing", &scratch, e))?;
    }

    // The zygote's own: a command's /proc is mounted over it.
    let proc = at(Path::new("/proc"));
    std::fs::create_dir_all(&proc).map_err(|e| fail("creating", &proc, e))?;
    ns::mount(
        Some(Path::new("proc")),
        &proc,
        Some(c"proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(|e| fail("mounting a fresh /proc on", &proc, e))?;

    let dev = at(Path::new("/dev"));
    std::fs::create_dir_all(&dev).map_err(|e| fail("creating", &dev, e))?;
    tmpfs(&dev, "mode=0755,size=64k").map_err(|e| fail("mounting a tmpfs on", &dev, e))?;
    for (path, entry) in devices {
        let target = at(&path);
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }
    for dir in ["pts", "shm"] {
        let path = dev.join(dir);
        std::fs::create_dir_all(&path).map_err(|e| fail("creating", &path, e))?;
    }
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let path = dev.join(link);
        std::os::unix::fs::symlink(target, &path).map_err(|e| fail("linking", &path, e))?;
    }
    ns::read_only(&dev).map_err(|e| fail("making read-only", &dev, e))?;

    let tmp = at(Path::new("/tmp"));
    std::fs::create_dir_all(&tmp).map_err(|e| fail("creating", &tmp, e))?;
    if let Some(options) = lasting_tmp {
        tmpfs(&tmp, options).map_err(|e| fail("mounting a tmpfs on", &tmp, e))?;
    }
    let home = at(Path::new(HOME));
    let homes = home.parent().unwrap_or(&home);
    std::fs::create_dir_all(homes).map_err(|e| fail("creating", homes, e))?;
    tmpfs(homes, "mode=0755,size=4k").map_err(|e| fail("mounting a tmpfs on", homes, e))?;
    std::fs::create_dir_all(&home).map_err(|e| fail("creating", &home, e))?;
    ns::read_only(homes).map_err(|e| fail("making read-only", homes, e))?;
    if let Some(tree) = kept_home {
        ns::attach(&tree, &home, Access::Writable).map_err(|e| fail("binding", &home, e))?;
    }

    let mut view = View {
        granted: Vec::new(),
    };
    for (path, entry) in granted {
        let target = at(&path);
        if let Entry::Tree(_, access, _) = &entry {
            view.granted.push((path.clone(), *access));
        }
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }

    ns::pivot_into(root).map_err(|e| fail("pivoting into", root, e))?;
    // The root itself holds only mount points: nothing may be created at the top.
    ns::read_only(Path::new("/")).map_err(|e| fail("making read-only", Path::new("/"), e))?;
    Ok(view)
}

/// What is fresh for each command.
pub(super) struct Fresh<'a> {
    /// The trees bound into the view ([`View::granted`]): those below a fresh mount are bound
    /// again on top of it.
    pub granted: &'a [(PathBuf, Access)],
    /// The memory limit, which the private tmpfs mounts share: `/tmp` half, `/dev/shm` and
    /// `HOME` a quarter each (a memory cgroup also counts their files; without one, these
    /// sizes are what bounds them).
    pub memory: u64,
    /// Whether `HOME` is empty at each command (else the home that lasts is bound there).
    pub private_home: bool,
    /// Whether `/tmp` is the view's own, which lasts ([`build`]), not one for each command.
    pub tmp_lasts: bool,
}

/// Mounts what is fresh for a command in its init's mount namespace (a copy of the view).
pub(super) fn fresh(fresh: &Fresh) -> Result<(), ViewError> {
    let proc = Path::new("/proc");
    ns::mount(
        Some(Path::new("proc")),
        proc,
        Some(c"proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )
    .map_err(|e| unprepared("mounting a fresh /proc on", proc, e))?;
    for name in PROC_FROZEN {
        let path = proc.join(name);
        if path.exists() {
            ns::freeze(&path).map_err(|e| unprepared("freezing", &path, e))?;
        }
    }
    let memory = fresh.memory;
    let mut private = vec![("/dev/shm", format!("mode=1777,size={}", memory / 4))];
    if !fresh.tmp_lasts {
        private.push(("/tmp", tmp_options(memory)));
    }
    if fresh.private_home {
        private.push((HOME, format!("mode=0755,size={}", memory / 4)));
    }
    // A granted tree below a fresh mount (a workspace in /tmp) is taken along and put back.
    let below = |path: &Path| private.iter().any(|(fresh, _)| path.starts_with(fresh));
    let mut kept = Vec::new();
    for (path, access) in fresh.granted.iter().filter(|(path, _)| below(path)) {
        let tree = ns::open_tree(path).map_err(|e| unprepared("opening", path, e))?;
        kept.push((path, Entry::Tree(tree, *access, path.is_dir())));
    }
    for (path, options) in &private {
        let path = Path::new(path);
        tmpfs(path, options).map_err(|e| unprepared("mounting a tmpfs on", path, e))?;
    }
    for (path, entry) in kept {
        place(path, entry).map_err(|e| unprepared("binding", path, e))?;
    }
    let pts = Path::new("/dev/pts");
    ns::mount(
        Some(Path::new("devpts")),
        pts,
        Some(c"devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| unprepared("mounting a new devpts on", pts, e))
}

/// What of a command's workspace is covered in its view.
pub(super) struct ToCover<'a> {
    /// The workspace, as the view shows it.
    pub workspace: &'a Path,
    /// The protected paths, relative to the workspace (each exists: a stand-in for a missing
    /// one), made read-only; the directories above them made mount points.
    pub protected: &'a [String],
    /// The hidden paths, covered by an empty directory or file.
    pub hidden: &'a [Vec<u8>],
}

/// Mounts the covers of `covers` in the calling process's mount namespace (a command's).
pub(super) fn cover(covers: &ToCover) -> Result<(), ViewError> {
    // Read-only whatever the grants above them, opened beneath the workspace without
    // following a link.
    if !covers.protected.is_empty() {
        let workspace = std::fs::File::open(covers.workspace)
            .map(OwnedFd::from)
            .map_err(|e| unprepared("opening", covers.workspace, e))?;
        // Each directory between the workspace and a protected path first becomes a mount
        // point of its own (writable as before, with what is mounted below it): a mount
        // point can be neither renamed nor removed, so no command moves a git directory, or
        // what holds one, away from its protection and back.
        let mut above = protect::holders(covers.protected);
        above.sort_by_key(|dir| Path::new(dir).components().count());
        let above = above.iter().map(|dir| (dir, Access::Writable));
        let leaves = covers.protected.iter().map(|rel| (rel, Access::ReadOnly));
        for (rel, access) in above.chain(leaves) {
            let rel = Path::new(rel);
            let path = covers.workspace.join(rel);
            // Onto what was opened, so that nothing swapped in since moves the cover.
            let protect = || -> io::Result<()> {
                let at = ns::open_beneath(&workspace, rel)?;
                ns::attach_onto(&ns::open_tree_of(&at)?, &at, access)
            };
            protect().map_err(|e| unprepared("protecting", &path, e))?;
        }
    }
    for path in covers.hidden.iter().map(|p| wire::to_path(p)) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        cover_path(&path, meta.is_dir()).map_err(|e| unprepared("hiding", &path, e))?;
    }
    Ok(())
}

/// The refusal of a step of a command's own view that failed: `doing` `path`.
fn unprepared(doing: &'static str, path: &Path, source: io::Error) -> ViewError {
    ViewError::Prepare {
        doing,
        path: path.to_path_buf(),
        source,
    }
}

/// Covers `target`: an empty read-only directory over a directory, an empty device
/// (`/dev/null`) over anything else.
fn cover_path(target: &Path, dir: bool) -> io::Result<()> {
    if dir {
        tmpfs(target, "mode=0000,size=4k")?;
        ns::read_only(target)
    } else {
        let null = ns::open_tree(Path::new("/dev/null"))?;
        ns::attach(&null, target, Access::Devices)
    }
}

/// The secret files and directories of the system ([`SECRET_PATHS`]) that exist, each with
/// whether it is a directory. A symbolic link counts as what it leads to.
pub(super) fn secrets() -> Vec<(PathBuf, bool)> {
    let mut found = Vec::new();
    for secret in SECRET_PATHS {
        let secret = Path::new(secret);
        let (Some(parent), Some(prefix)) = (secret.parent(), secret.file_name()) else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name
                .as_encoded_bytes()
                .starts_with(prefix.as_encoded_bytes())
            {
                continue;
            }
            let path = entry.path();
            if let Ok(meta) = std::fs::metadata(&path) {
                found.push((path, meta.is_dir()));
            }
        }
    }
    found
}

/// Puts `entry` at `target` (a path below the new root).
fn place(target: &Path, entry: Entry) -> io::Result<()> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match entry {
        Entry::Link(to) => std::os::unix::fs::symlink(to, target),
        Entry::Tree(tree, access, dir) => {
            // A directory is bound onto a directory, anything else onto a file.
            if dir {
                std::fs::create_dir_all(target)?;
            } else if std::fs::symlink_metadata(target).is_err() {
                std::fs::File::create(target)?;
            }
            ns::attach(&tree, target, access)
        }
    }
}

fn tmpfs(target: &Path, options: &str) -> io::Result<()> {
    ns::mount(
        Some(Path::new("tmpfs")),
        target,
        Some(c"tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(options),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_secrets_are_found() {
        let found = secrets();
        let has = |p: &str| found.iter().any(|(path, _)| path == Path::new(p));
        if Path::new("/etc/shadow").exists() {
            assert!(has("/etc/shadow"), "{found:?}");
        }
        if Path::new("/etc/ssl/private").is_dir() {
            assert!(has("/etc/ssl/private"), "{found:?}");
        }
        assert!(!has("/etc/passwd"), "{found:?}");
        assert!(found.iter().all(|(path, _)| path.starts_with("/etc")));
    }
}
