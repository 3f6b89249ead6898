//! The keeper of a workspace layer: a long-lived process that holds one overlayfs mount of
//! the workspace (lower: the real workspace; upper and work: under the layer's directory) in a
//! mount namespace of its own, and hands copies of it out.
//!
//! One mount per layer, because overlayfs leaves two mounts sharing an upper directory
//! undefined. Who needs the layer reaches that one mount: the host's file tools through
//! `/proc/<keeper>/root/<layer>/merged` ([`Keeper::merged`]), a shell's view by asking the
//! keeper's socket for a detached copy of it ([`receive`]; a mount cannot be cloned from another
//! mount namespace, but a detached copy passed over a socket can be attached in any).
//!
//! As root, commands run as the sandbox user, to whom an overlay mount cannot be id-mapped:
//! the lower layer is then an id-mapped copy of the workspace instead, and the upper directory
//! is the sandbox user's, so the merged tree shows the workspace as the command's own.
//!
//! The keeper holds a lock on the layer while it runs (a second keeper is refused) and ends
//! when its standard input closes: when the cordon that started it ends, however it ends.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

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
const LOCK: &str = "lock";

/// How long a keeper waits for the layer's lock before it is refused.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A running keeper; dropping it ends the keeper, and with it the mount.
#[derive(Debug)]
pub struct Keeper {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: PathBuf,
}

impl Keeper {
    /// Starts the keeper of the layer at `dir` (absolute; created if missing) over `workspace`
    /// (canonical), running `helper` (a program that calls [`super::run_helper_if_asked`]),
    /// and waits until the layer is mounted. The error says what is missing.
    pub fn start(helper: &Path, workspace: &Path, dir: &Path) -> Result<Keeper, String> {
        for path in [workspace, dir] {
            let text = path.to_string_lossy();
            if text.contains([',', ':', '\\']) {
                return Err(format!(
                    "cannot layer over {}: overlayfs cannot take a path with a comma, a colon \
                     or a backslash ({})",
                    workspace.display(),
                    path.display()
                ));
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
            .map_err(|e| format!("cannot start the layer keeper {}: {e}", helper.display()))?;
        let stdin = child.stdin.take();
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        let read = BufReader::new(stdout).read_line(&mut line);
        let keeper = Keeper {
            child,
            stdin,
            dir: dir.to_path_buf(),
        };
        match (read, line.trim_end().strip_prefix("error: ")) {
            (Ok(_), None) if line == "ready\n" => Ok(keeper),
            (Ok(_), Some(why)) => Err(why.to_string()),
            (read, _) => Err(format!(
                "the layer keeper ended before mounting the layer ({})",
                read.err()
                    .map_or("no reason given".into(), |e| e.to_string())
            )),
        }
    }

    /// The layer's merged tree, as this process reaches it.
    pub fn merged(&self) -> PathBuf {
        let inside = self.dir.join(MERGED);
        Path::new(&format!("/proc/{}/root", self.child.id()))
            .join(inside.strip_prefix("/").unwrap_or(&inside))
    }

    /// The socket a shell asks for a copy of the merged tree ([`receive`]).
    pub fn socket(&self) -> PathBuf {
        self.dir.join(SOCKET)
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A detached copy of the merged tree of the layer whose keeper listens at `socket`.
pub(super) fn receive(socket: &Path) -> Result<OwnedFd, String> {
    let failed = |e: io::Error| {
        format!(
            "cannot get the workspace's layer from its keeper at {}: {e}",
            socket.display()
        )
    };
    let stream = UnixStream::connect(socket).map_err(failed)?;
    match wire::recv::<()>(stream.as_fd()).map_err(failed)? {
        Some(((), mut fds)) if fds.len() == 1 => Ok(fds.remove(0)),
        _ => Err(failed(io::Error::other("it sent no tree"))),
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
    let listener = match mount(workspace, dir) {
        Ok(served) => served,
        Err(why) => {
            let _ = writeln!(out, "error: {why}");
            std::process::exit(1)
        }
    };
    let _ = out.write_all(b"ready\n").and_then(|()| out.flush());
    serve(&listener);
    // overlayfs makes a directory in its work directory that its owner cannot enter: opened
    // again, the layer can be removed with `rm -r` like any directory of its owner's.
    let inner = dir.join(WORK).join("work");
    let _ = std::fs::set_permissions(inner, std::fs::Permissions::from_mode(0o700));
    std::process::exit(0)
}

/// Takes the layer's lock, mounts it in a mount namespace of this process's own and listens
/// on its socket.
fn mount(workspace: &Path, dir: &Path) -> Result<(UnixListener, File), String> {
    let at = |what: &str, e: io::Error| format!("cannot {what} {}: {e}", dir.display());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| at("create the layer directory", e))?;
    let lock = match lock(dir, true).map_err(|e| at("lock the layer", e))? {
        Some(lock) => lock,
        None => {
            return Err(format!(
                "the layer {} is in use by another cordon (one process at a time may use a \
                 layer)",
                dir.display()
            ));
        }
    };
    let root = ns::runs_as_sandbox_user();
    let mode = std::fs::metadata(workspace)
        .map_err(|e| format!("cannot read the workspace {}: {e}", workspace.display()))?
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
    // The upper directory is the merged tree's root: it shows as the workspace's.
    let upper = dir.join(UPPER);
    std::fs::set_permissions(&upper, std::fs::Permissions::from_mode(mode))
        .map_err(|e| at("set up", e))?;
    if root {
        let id = ns::SANDBOX_ID;
        std::os::unix::fs::chown(&upper, Some(id), Some(id)).map_err(|e| at("set up", e))?;
        std::os::unix::fs::chown(dir.join(WORK), Some(id), Some(id))
            .map_err(|e| at("set up", e))?;
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
        return Err(format!(
            "cannot make a mount namespace for the layer: {}{}",
            io::Error::last_os_error(),
            ns::NAMESPACE_HINT
        ));
    }
    if !root {
        // The user stays itself inside, so the layer's files are its own.
        std::fs::write("/proc/self/setgroups", "deny")
            .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")))
            .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")))
            .map_err(|e| format!("cannot map the layer keeper's user: {e}"))?;
    }
    ns::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(|e| format!("cannot make the layer's mounts private: {e}"))?;
    let lower = if root {
        ns::open_tree(workspace)
            .and_then(|tree| {
                ns::idmap(&tree, &ns::sandbox_userns()?)?;
                ns::attach(&tree, &dir.join(LOWER), Access::ReadOnly)
            })
            .map_err(|e| {
                format!(
                    "cannot show {} to the sandbox's user in the layer (an id-mapped mount of \
                     it failed: {e})",
                    workspace.display()
                )
            })?;
        dir.join(LOWER)
    } else {
        workspace.to_path_buf()
    };
    let levels = stack(dir)?;
    // No redirects and no metadata-only copies: every change is a whole file of the upper
    // directory (a renamed directory is copied). In a user namespace the markers are `user.`
    // extended attributes, which only allow redirects not to be followed.
    let features = if root {
        "redirect_dir=off"
    } else {
        "userxattr,redirect_dir=nofollow"
    };
    let mut lowers: Vec<&Path> = levels.iter().rev().map(PathBuf::as_path).collect();
    lowers.push(&lower);
    let lowers: Vec<String> = lowers.iter().map(|p| p.display().to_string()).collect();
    let options = format!(
        "lowerdir={},upperdir={},workdir={},metacopy=off,{features}",
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
    .map_err(|e| {
        format!(
            "cannot mount the layer: overlayfs refused ({e}); it needs Linux 5.11 or later for \
             a user namespace, the overlay module, and an upper directory ({}) on a file system \
             that supports it (not overlayfs itself, NFS or FUSE)",
            upper.display()
        )
    })?;
    let socket = dir.join(SOCKET);
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| at("listen in", e))?;
    Ok((listener, lock))
}

/// The frozen levels of the layer at `dir`, the lowest first (none without a stack file).
fn stack(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let text = match std::fs::read_to_string(dir.join(STACK)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(format!(
                "cannot read the layer's levels in {}: {e}",
                dir.display()
            ));
        }
    };
    let levels: Vec<PathBuf> = text.lines().map(PathBuf::from).collect();
    if let Some(bad) = levels
        .iter()
        .find(|p| p.to_string_lossy().contains([',', ':', '\\']))
    {
        return Err(format!(
            "cannot stack the level {}: overlayfs cannot take a path with a comma, a colon or \
             a backslash",
            bad.display()
        ));
    }
    Ok(levels)
}

/// Hands a copy of the merged tree to each connection, until standard input closes.
fn serve((listener, _lock): &(UnixListener, File)) {
    let merged = match std::env::args_os().nth(3) {
        Some(dir) => Path::new(&dir).join(MERGED),
        None => return,
    };
    let mut fds = [
        libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: two valid pollfd structures.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if fds[0].revents != 0 && io::stdin().read(&mut [0; 64]).unwrap_or(0) == 0 {
            return;
        }
        if fds[1].revents != 0
            && let Ok((stream, _)) = listener.accept()
            && let Ok(tree) = ns::open_tree(&merged)
        {
            let _ = wire::send(stream.as_fd(), &(), &[tree.as_fd()]);
        }
    }
}
