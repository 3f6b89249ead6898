//! The file-system view of a command, built in its mount namespace: a fresh root with only
//! what the command may see, every host tree bound at its real path.
//!
//! The host trees are opened first, as detached copies ([`Sources::open`]): by the helper
//! when cordon runs as root (it alone may then reach every path, and it gives the workspace
//! its id map), by the namespace's init otherwise. [`build`] then lays them out on a new
//! tmpfs root, adds the private mounts (`/proc`, `/dev`, `/tmp`, `/dev/shm`, `/dev/pts`,
//! `HOME`) and pivots into it; the old root is detached, so nothing else of the host stays
//! reachable.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::ns::{self, Access};
use super::shield::{self, Shield};
use super::wire::{self, Request};
use super::{HOME, READ_ROOTS};

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
    /// The workspace and the extra paths, shallowest first, then the protected paths.
    granted: Vec<(PathBuf, Entry)>,
    /// The home directory that lasts between calls, if the command has one.
    home: Option<OwnedFd>,
    /// Paths inside granted trees that stay hidden: an empty read-only directory over each
    /// directory, an empty device (`/dev/null`) over each file.
    hidden: Vec<(PathBuf, Option<OwnedFd>)>,
}

impl Sources {
    /// Opens every host tree the view of `request` shows, `shield`'s protected paths among
    /// them. With `idmap` (cordon runs as root), the workspace, the extra paths and the home
    /// show root's files as the sandbox user's.
    pub fn open(
        request: &Request,
        shield: &Shield,
        idmap: Option<&OwnedFd>,
    ) -> Result<Sources, String> {
        let opening = |path: &Path, e: io::Error| format!("cannot open {}: {e}", path.display());
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
            vec![(wire::to_path(&request.workspace), Access::Writable)];
        for (paths, access, what) in [
            (&request.extra_read, Access::ReadOnly, "readable"),
            (&request.extra_write, Access::Writable, "writable"),
        ] {
            for path in paths {
                let path = wire::to_path(path);
                let real = path.canonicalize().map_err(|e| {
                    format!("the extra {what} path {} is unusable: {e}", path.display())
                })?;
                granted.push((real, access));
            }
        }
        granted.sort_by_key(|(path, _)| path.components().count());
        let shared = |path: &Path, tree: OwnedFd| -> Result<OwnedFd, String> {
            if let Some(userns) = idmap {
                ns::idmap(&tree, userns).map_err(|e| {
                    format!(
                        "cannot show {} to the sandbox's user (an idmapped mount of it \
                         failed: {e}; its file system may not support idmapped mounts)",
                        path.display()
                    )
                })?;
            }
            Ok(tree)
        };
        let mut granted = granted
            .into_iter()
            .map(|(path, access)| {
                let tree = ns::open_tree(&path).map_err(|e| opening(&path, e))?;
                let dir = path.is_dir();
                Ok((path.clone(), Entry::Tree(shared(&path, tree)?, access, dir)))
            })
            .collect::<Result<Vec<_>, String>>()?;
        // After the trees they lie in, and read-only whatever the grants above them.
        let workspace = wire::to_path(&request.workspace);
        let protected = shield::open(shield, &workspace).map_err(|e| {
            format!(
                "cannot open the protected paths of {}: {e}",
                workspace.display()
            )
        })?;
        for (path, tree, dir) in protected {
            let entry = Entry::Tree(shared(&path, tree)?, Access::ReadOnly, dir);
            granted.push((path, entry));
        }
        let mut hidden = Vec::new();
        for path in request.hidden.iter().map(|p| wire::to_path(p)) {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if !granted.iter().any(|(tree, _)| path.starts_with(tree)) {
                continue;
            }
            let cover = match meta.is_dir() {
                true => None,
                false => {
                    let null = Path::new("/dev/null");
                    Some(ns::open_tree(null).map_err(|e| opening(null, e))?)
                }
            };
            hidden.push((path, cover));
        }
        let home = match &request.home {
            Some(dir) => {
                let dir = wire::to_path(dir);
                let tree = ns::open_tree(&dir).map_err(|e| opening(&dir, e))?;
                Some(shared(&dir, tree)?)
            }
            None => None,
        };
        Ok(Sources {
            system,
            devices,
            granted,
            home,
            hidden,
        })
    }
}

/// Builds the view from `sources` and makes it the root of this (the namespace's init's)
/// mount namespace. The private tmpfs mounts together hold at most `memory` bytes: `/tmp` half,
/// `/dev/shm` and `HOME` a quarter each (a memory cgroup also counts their files; without
/// one, these sizes are what bounds them).
pub(super) fn build(sources: Sources, memory: u64) -> Result<(), String> {
    let root = Path::new(NEW_ROOT);
    let at = |path: &Path| root.join(path.strip_prefix("/").unwrap_or(path));
    // Paths are named as the command would see them.
    let fail = |doing: &str, path: &Path, e: io::Error| {
        let seen = path
            .strip_prefix(root)
            .map_or(path.to_path_buf(), |p| Path::new("/").join(p));
        format!(
            "cannot build the command's view: {doing} {}: {e}",
            seen.display()
        )
    };
    // Nothing done here propagates back to the host.
    ns::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(|e| fail("making private", Path::new("/"), e))?;
    tmpfs(root, "mode=0755,size=1m").map_err(|e| fail("mounting a tmpfs on", root, e))?;

    let Sources {
        system,
        devices,
        granted,
        home: kept_home,
        hidden,
    } = sources;
    for (path, entry) in system {
        let target = at(&path);
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }

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
    for name in PROC_FROZEN {
        let path = proc.join(name);
        if path.exists() {
            ns::freeze(&path).map_err(|e| fail("freezing", &path, e))?;
        }
    }

    let dev = at(Path::new("/dev"));
    std::fs::create_dir_all(&dev).map_err(|e| fail("creating", &dev, e))?;
    tmpfs(&dev, "mode=0755,size=64k").map_err(|e| fail("mounting a tmpfs on", &dev, e))?;
    for (path, entry) in devices {
        let target = at(&path);
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir_all(&pts).map_err(|e| fail("creating", &pts, e))?;
    ns::mount(
        Some(Path::new("devpts")),
        &pts,
        Some(c"devpts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )
    .map_err(|e| fail("mounting a new devpts on", &pts, e))?;
    let shm = dev.join("shm");
    std::fs::create_dir_all(&shm).map_err(|e| fail("creating", &shm, e))?;
    tmpfs(&shm, &format!("mode=1777,size={}", memory / 4))
        .map_err(|e| fail("mounting a tmpfs on", &shm, e))?;
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
    tmpfs(&tmp, &format!("mode=1777,size={}", memory / 2))
        .map_err(|e| fail("mounting a tmpfs on", &tmp, e))?;
    let home = at(Path::new(HOME));
    let homes = home.parent().unwrap_or(&home);
    std::fs::create_dir_all(homes).map_err(|e| fail("creating", homes, e))?;
    tmpfs(homes, &format!("mode=0755,size={}", memory / 4))
        .map_err(|e| fail("mounting a tmpfs on", homes, e))?;
    std::fs::create_dir_all(&home).map_err(|e| fail("creating", &home, e))?;
    if let Some(tree) = kept_home {
        ns::attach(&tree, &home, Access::Writable).map_err(|e| fail("binding", &home, e))?;
    }

    for (path, entry) in granted {
        let target = at(&path);
        place(&target, entry).map_err(|e| fail("binding", &target, e))?;
    }

    for (path, cover) in hidden {
        let target = at(&path);
        match cover {
            Some(null) => ns::attach(&null, &target, Access::Devices),
            None => tmpfs(&target, "mode=0000,size=4k").and_then(|()| ns::read_only(&target)),
        }
        .map_err(|e| fail("hiding", &target, e))?;
    }

    ns::pivot_into(root).map_err(|e| fail("pivoting into", root, e))?;
    // The root itself holds only mount points: nothing may be created at the top.
    ns::read_only(Path::new("/")).map_err(|e| fail("making read-only", Path::new("/"), e))
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
