//! The keeper of a workspace layer: a long-lived process that holds one overlayfs mount of
//! the workspace (lower: the real workspace; upper and work: under the layer's directory) in a
//! mount namespace of its own, and hands copies of it out.
//!
//! One mount per layer, because overlayfs leaves two mounts sharing an upper directory
//! undefined. Who needs the layer reaches that one mount: the host's file tools through
//! `/proc/<keeper>/root/<layer>/merged` ([`Keeper::merged`]), a shell's view by asking the
//! keeper's socket for a detached copy of it (`receive`; a mount cannot be cloned from another
//! mount namespace, but a detached copy passed over a socket can be attached in any).
//!
//! As root, commands run as the sandbox user, to whom an overlay mount cannot be id-mapped:
//! the lower layer is then an id-mapped copy of the workspace instead, and the upper directory
//! is the sandbox user's, so the merged tree shows the workspace as the command's own.
//!
//! The keeper holds a lock on the layer while it runs (a second keeper is refused) and ends
//! when its standard input closes: when the cordon that started it ends, however it ends.
//! On its standard input it also takes `unmount` and `mount` lines, between which its cordon
//! changes the layer's levels ([`Keeper::remounting`]); it answers each with `ready` or
//! `error: WHY`. It notes when it mounted the layer, so a shell's helper whose view holds an
//! older mount is started again (`generation`).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use super::ns::{self, Access};
use super::wire;

/// The first argument that makes this program a layer keeper.
pub const KEEPER_ARG: &str = "--cordon-layer-keeper";

/// The directories of a layer, under its directory.
pub const UPPER: &str = "upper";
/// The file that lists a layer's frozen levels (checkpoints and forks, see `cordon::layer`):
/// one absolute directory a line, the lowest first. They lie between the workspace and the
/// upper directory.
pub const STACK: &str = "stack";
const WORK: &str = "work";
const MERGED: &str = "merged";
const LOWER: &str = "lower";
const SOCKET: &str = "keeper.sock";
/// When the keeper last mounted the layer, in nanoseconds since the epoch ([`generation`]).
const MOUNTED: &str = "mounted";
const LOCK: &str = "lock";

/// How long a keeper waits for the layer's lock before it is refused.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A running keeper; dropping it ends the keeper, and with it the mount.
#[derive(Debug)]
pub struct Keeper {
    child: Child,
    /// Its standard input and output, on which it is told to unmount and mount again.
    io: Mutex<Option<(ChildStdin, BufReader<ChildStdout>)>>,
    dir: PathBuf,
}

/// Why a layer's keeper cannot mount the layer, or mount it again.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error(
        "cannot layer over {}: overlayfs cannot take a path with a comma, a colon or a \
         backslash ({})",
        workspace.display(),
        path.display()
    )]
    Path { workspace: PathBuf, path: PathBuf },
    #[error("cannot start the layer keeper {}: {source}", helper.display())]
    Start { helper: PathBuf, source: io::Error },
    /// What the keeper itself said (`MountError`, as text: it crossed a process).
    #[error("{0}")]
    Refused(String),
    #[error(
        "the layer keeper ended before mounting the layer ({})",
        .0.as_ref().map_or("no reason given".into(), io::Error::to_string)
    )]
    EndedEarly(Option<io::Error>),
    #[error("the layer keeper has ended")]
    Ended,
    #[error("the layer keeper has ended ({0})")]
    Gone(io::Error),
}

/// Why the keeper cannot mount its layer, as it tells its cordon.
#[derive(Debug, thiserror::Error)]
enum MountError {
    #[error("cannot {what} {}: {source}", dir.display())]
    At {
        what: &'static str,
        dir: PathBuf,
        source: io::Error,
    },
    #[error("the layer {} is in use by another cordon (one process at a time may use a layer)", .0.display())]
    InUse(PathBuf),
    #[error("cannot read the workspace {}: {source}", workspace.display())]
    Workspace {
        workspace: PathBuf,
        source: io::Error,
    },
    #[error("cannot make a mount namespace for the layer: {0}{hint}", hint = ns::NAMESPACE_HINT)]
    Namespace(io::Error),
    #[error("cannot map the layer keeper's user: {0}")]
    MapUser(io::Error),
    #[error("cannot make the layer's mounts private: {0}")]
    Private(io::Error),
    #[error(
        "cannot show {} to the sandbox's user in the layer (an id-mapped mount of it failed: \
         {source})",
        workspace.display()
    )]
    IdMap {
        workspace: PathBuf,
        source: io::Error,
    },
    #[error("cannot read the layer's levels in {}: {source}", dir.display())]
    Levels { dir: PathBuf, source: io::Error },
    #[error(
        "cannot stack the level {}: overlayfs cannot take a path with a comma, a colon or a \
         backslash",
        .0.display()
    )]
    Level(PathBuf),
    #[error(
        "cannot mount the layer: overlayfs refused ({source}); it needs Linux 5.11 or later for \
         a user namespace, the overlay module, and an upper directory ({}) on a file system \
         that supports it (not overlayfs itself, NFS or FUSE)",
        upper.display()
    )]
    Overlay { upper: PathBuf, source: io::Error },
    #[error("cannot unmount the layer: {0}")]
    Unmount(io::Error),
    #[error("the layer keeper takes `unmount` or `mount`")]
    Told,
}

impl MountError {
    /// The failure to do `what` with the layer's directory `dir`.
    fn at(what: &'static str, dir: &Path, source: io::Error) -> MountError {
        MountError::At {
            what,
            dir: dir.to_path_buf(),
            source,
        }
    }
}

impl Keeper {
    /// Starts the keeper of the layer at `dir` (absolute; created if missing) over `workspace`
    /// (canonical), running `helper` (a program that calls [`super::run_helper_if_asked`]),
    /// and waits until the layer is mounted. The error says what is missing.
    pub fn start(helper: &Path, workspace: &Path, dir: &Path) -> Result<Keeper, KeeperError> {
        for path in [workspace, dir] {
            let text = path.to_string_lossy();
            if text.contains([',', ':', '\\']) {
                return Err(KeeperError::Path {
                    workspace: workspace.to_path_buf(),
                    path: path.to_path_buf(),
                });
            }
        }
        let mut child = Command::new(helper)
            .arg(KEEPER_ARG)
            .arg(workspace)
            .arg(dir)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| KeeperError::Start {
                helper: helper.to_path_buf(),
                source,
            })?;
        let stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        answer(&mut stdout)?;
        Ok(Keeper {
            child,
            io: Mutex::new(Some((stdin, stdout))),
            dir: dir.to_path_buf(),
        })
    }

    /// Unmounts the layer, runs `change` (which may change its levels and upper directory)
    /// and mounts the layer again, as `change` left it. Nothing may use the layer meanwhile.
    pub fn remounting<T>(&self, change: impl FnOnce() -> T) -> Result<T, KeeperError> {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        let Some((stdin, stdout)) = io.as_mut() else {
            return Err(KeeperError::Ended);
        };
        let mut tell = |what: &str| -> Result<(), KeeperError> {
            writeln!(stdin, "{what}")
                .and_then(|()| stdin.flush())
                .map_err(KeeperError::Gone)?;
            answer(stdout)
        };
        tell("unmount")?;
        let changed = change();
        tell("mount")?;
        Ok(changed)
    }

    /// The layer's merged tree, as this process reaches it.
    pub fn merged(&self) -> PathBuf {
        let inside = self.dir.join(MERGED);
        Path::new(&format!("/proc/{}/root", self.child.id()))
            .join(inside.strip_prefix("/").unwrap_or(&inside))
    }

    /// The socket a shell asks for a copy of the merged tree (`receive`).
    pub fn socket(&self) -> PathBuf {
        self.dir.join(SOCKET)
    }

    /// Ends the keeper, and with it the mount, and waits until it has ended.
    pub fn end(&mut self) {
        drop(self.io.lock().unwrap_or_else(|e| e.into_inner()).take());
        let _ = self.child.wait();
    }
}

/// Reads the keeper's answer: `ready`, or why not.
fn answer(stdout: &mut BufReader<ChildStdout>) -> Result<(), KeeperError> {
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    match (read, line.trim_end().strip_prefix("error: ")) {
        (Ok(_), None) if line == "ready\n" => Ok(()),
        (Ok(_), Some(why)) => Err(KeeperError::Refused(why.to_string())),
        (read, _) => Err(KeeperError::EndedEarly(read.err())),
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.end();
    }
}

/// Which mount of its layer a shell of `policy` would get: when its keeper mounted it, as
/// it wrote in the layer's directory (0 without a layer).
pub(super) fn generation(policy: &super::Policy) -> u64 {
    let dir = policy.layer.as_deref().and_then(Path::parent);
    let text = dir.and_then(|dir| std::fs::read_to_string(dir.join(MOUNTED)).ok());
    text.and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// A detached copy of the merged tree of the layer whose keeper listens at `socket`.
pub(super) fn receive(socket: &Path) -> io::Result<OwnedFd> {
    let stream = UnixStream::connect(socket)?;
    match wire::recv::<()>(stream.as_fd())? {
        Some(((), mut fds)) if fds.len() == 1 => Ok(fds.remove(0)),
        _ => Err(io::Error::other("it sent no tree")),
    }
}

/// Takes the lock of the layer at `dir`, which its keeper holds while it runs (`create`: made
/// when missing). The keeper of a cordon that just ended may still be on its way out: it is
/// waited for a while. None: the lock is held.
pub fn lock(dir: &Path, create: bool) -> io::Result<Option<File>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .open(dir.join(LOCK))?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    // SAFETY: a valid descriptor; the result is checked.
    while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        if std::time::Instant::now() > deadline {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(Some(file))
}

/// Runs the keeper and exits; see the module documentation.
pub(super) fn keeper_main() -> ! {
    let args: Vec<OsString> = std::env::args_os().skip(2).collect();
    let [workspace, dir] = &args[..] else {
        std::process::exit(2)
    };
    let (workspace, dir) = (Path::new(workspace), Path::new(dir));
    let mut out = io::stdout();
    let mut mounted = match mount(workspace, dir) {
        Ok(mounted) => mounted,
        Err(why) => {
            let _ = writeln!(out, "error: {why}");
            std::process::exit(1)
        }
    };
    let _ = out.write_all(b"ready\n").and_then(|()| out.flush());
    serve(&mut mounted);
    // overlayfs makes a directory in its work directory that its owner cannot enter: opened
    // again, the layer can be removed with `rm -r` like any directory of its owner's.
    let inner = dir.join(WORK).join("work");
    let _ = std::fs::set_permissions(inner, std::fs::Permissions::from_mode(0o700));
    std::process::exit(0)
}

/// A mounted layer, as its keeper holds it.
struct Mounted {
    listener: Option<UnixListener>,
    _lock: File,
    dir: PathBuf,
    /// The workspace as the overlay's lowest layer sees it.
    lower: PathBuf,
    /// The workspace's permission bits, which the upper directory takes.
    mode: u32,
    root: bool,
}

/// Takes the layer's lock, mounts it in a mount namespace of this process's own and listens
/// on its socket.
fn mount(workspace: &Path, dir: &Path) -> Result<Mounted, MountError> {
    let at = |what, e| MountError::at(what, dir, e);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| at("create the layer directory", e))?;
    let lock = match lock(dir, true).map_err(|e| at("lock the layer", e))? {
        Some(lock) => lock,
        None => {
            return Err(MountError::InUse(dir.to_path_buf()));
        }
    };
    let root = ns::runs_as_sandbox_user();
    let mode = std::fs::metadata(workspace)
        .map_err(|source| MountError::Workspace {
            workspace: workspace.to_path_buf(),
            source,
        })?
        .permissions()
        .mode();
    for name in [UPPER, WORK, MERGED, LOWER] {
        let path = dir.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .or_else(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
            .map_err(|e| at("create a directory in", e))?;
    }
    // SAFETY: no arguments.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let flags = if root {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    };
    // SAFETY: a plain system call in a single-threaded process; the result is checked.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(MountError::Namespace(io::Error::last_os_error()));
    }
    if !root {
        // The user stays itself inside, so the layer's files are its own: its ids as they were
        // outside, read before the new namespace, where they are unmapped until then.
        std::fs::write("/proc/self/setgroups", "deny")
            .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")))
            .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")))
            .map_err(MountError::MapUser)?;
    }
    ns::make_private().map_err(MountError::Private)?;
    let lower = if root {
        ns::open_tree(workspace)
            .and_then(|tree| {
                ns::idmap(&tree, &ns::sandbox_userns()?)?;
                ns::attach(&tree, &dir.join(LOWER), Access::ReadOnly)
            })
            .map_err(|source| MountError::IdMap {
                workspace: workspace.to_path_buf(),
                source,
            })?;
        dir.join(LOWER)
    } else {
        workspace.to_path_buf()
    };
    let mut mounted = Mounted {
        listener: None,
        _lock: lock,
        dir: dir.to_path_buf(),
        lower,
        mode,
        root,
    };
    overlay(&mut mounted)?;
    Ok(mounted)
}

/// Mounts the layer's overlay (its upper directory made ready, its levels read again), and
/// listens on a new socket.
fn overlay(mounted: &mut Mounted) -> Result<(), MountError> {
    let dir = &mounted.dir;
    let at = |what, e| MountError::at(what, dir, e);
    // The upper directory is the merged tree's root: it shows as the workspace's.
    let upper = dir.join(UPPER);
    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(mounted.mode))
        .map_err(|e| at("set up", e))?;
    if mounted.root {
        let id = ns::SANDBOX_ID;
        std::os::unix::fs::chown(&upper, Some(id), Some(id)).map_err(|e| at("set up", e))?;
        std::os::unix::fs::chown(dir.join(WORK), Some(id), Some(id))
            .map_err(|e| at("set up", e))?;
    }
    let levels = stack(dir)?;
    // No redirects and no metadata-only copies: every change is a whole file of the upper
    // directory (a renamed directory is copied). In a user namespace the markers are `user.`
    // extended attributes, which only allow redirects not to be followed.
    let features = if mounted.root {
        "redirect_dir=off"
    } else {
        "userxattr,redirect_dir=nofollow"
    };
    // No index either (a kernel may default to it): it ties the work directory to the lower
    // directories it was first mounted with, and a checkpoint or rollback changes them.
    let mut lowers: Vec<&Path> = levels.iter().rev().map(PathBuf::as_path).collect();
    lowers.push(&mounted.lower);
    let lowers: Vec<String> = lowers.iter().map(|p| p.display().to_string()).collect();
    let options = format!(
        "lowerdir={},upperdir={},workdir={},metacopy=off,index=off,{features}",
        lowers.join(":"),
        upper.display(),
        dir.join(WORK).display()
    );
    ns::mount(
        Some(Path::new("overlay")),
        &dir.join(MERGED),
        Some(c"overlay"),
        0,
        Some(&options),
    )
    .map_err(|source| MountError::Overlay {
        upper: upper.clone(),
        source,
    })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let stamp = dir.join(MOUNTED);
    let next = stamp.with_extension("new");
    std::fs::write(&next, format!("{nanos}\n"))
        .and_then(|()| std::fs::rename(&next, &stamp))
        .map_err(|e| at("write in", e))?;
    let socket = dir.join(SOCKET);
    let _ = std::fs::remove_file(&socket);
    mounted.listener = Some(UnixListener::bind(&socket).map_err(|e| at("listen in", e))?);
    Ok(())
}

/// The frozen levels of the layer at `dir`, the lowest first (none without a stack file).
fn stack(dir: &Path) -> Result<Vec<PathBuf>, MountError> {
    let text = match std::fs::read_to_string(dir.join(STACK)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(MountError::Levels {
                dir: dir.to_path_buf(),
                source,
            });
        }
    };
    let levels: Vec<PathBuf> = text.lines().map(PathBuf::from).collect();
    if let Some(bad) = levels
        .iter()
        .find(|p| p.to_string_lossy().contains([',', ':', '\\']))
    {
        return Err(MountError::Level(bad.clone()));
    }
    Ok(levels)
}

/// Hands a copy of the merged tree to each connection, and unmounts and mounts the layer as
/// told, until standard input closes.
fn serve(mounted: &mut Mounted) {
    let merged = mounted.dir.join(MERGED);
    let mut input = Vec::new();
    loop {
        let listening = mounted.listener.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let mut fds = [
            libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: listening,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd structures (a negative descriptor is ignored).
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[0].revents != 0 {
            let mut buf = [0; 64];
            match io::stdin().read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => input.extend_from_slice(&buf[..n]),
            }
            while let Some(end) = input.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = input.drain(..=end).collect();
                let done = match &line[..] {
                    b"unmount\n" => {
                        // No command may get the layer until it is mounted again.
                        mounted.listener = None;
                        let _ = std::fs::remove_file(mounted.dir.join(SOCKET));
                        ns::detach(&merged).map_err(MountError::Unmount)
                    }
                    b"mount\n" => overlay(mounted),
                    _ => Err(MountError::Told),
                };
                let mut out = io::stdout();
                let _ = match done {
                    Ok(()) => out.write_all(b"ready\n"),
                    Err(why) => writeln!(out, "error: {why}"),
                }
                .and_then(|()| out.flush());
            }
            continue;
        }
        if fds[1].revents != 0
            && let Some(listener) = &mounted.listener
            && let Ok((stream, _)) = listener.accept()
            && let Ok(tree) = ns::open_tree(&merged)
        {
            let _ = wire::send(stream.as_fd(), &(), &[tree.as_fd()]);
        }
    }
}
