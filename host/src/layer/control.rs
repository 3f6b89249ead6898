//! `cordon layer` from another terminal, served by the cordon that holds the layer: a Unix
//! socket in the layer's directory ([`SOCKET`]) that takes one operation a connection and
//! does it between two of that cordon's calls ([`super::Live`]).
//!
//! [`apply`] is the other end, what `cordon layer` calls: it asks that cordon, or does the
//! operation itself when no cordon runs in the layer.
//!
//! The wire is a line of JSON each way: the operation ([`Op`], as a session's request), then
//! `"waiting"` while a call runs, then `{"done": …}` or `{"error": TEXT}`.
//!
//! Who may ask: the layer's directory is its owner's alone, and the server checks the peer
//! too. It must be the owner (or root) and in cordon's own mount namespace: a command of the
//! sandbox has a namespace of its own, so it is refused even where a grant lets it reach the
//! socket (an agent's command must not accept its own changes).

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::op::{self, Done, Op};
use super::{LayerError, io_at, stack};

/// The control socket, in the layer's directory.
pub const SOCKET: &str = "control.sock";

/// How long a connection may take to send its operation.
const REQUEST_WAIT: Duration = Duration::from_secs(10);

/// The largest operation taken (an accept's list of paths).
const MAX_REQUEST: u64 = 1 << 20;

/// A line of the answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    /// A call is running; the operation is done when it ends.
    Waiting,
    Done(Done),
    Error(String),
}

/// The thread that serves the socket; dropping it stops the thread, once the operation it is
/// doing (if any) is done, and removes the socket.
#[derive(Debug)]
pub(super) struct Server {
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
}

/// What does an operation for the socket: `waiting` is told first when it must wait for a
/// call to end.
pub(super) type Handler = dyn Fn(Op, &dyn Fn()) -> Result<Done, LayerError> + Send + Sync;

impl Server {
    /// Serves the socket of the layer at `dir`, each operation done by `handler`.
    pub(super) fn start(dir: &Path, handler: Box<Handler>) -> io::Result<Server> {
        let path = dir.join(SOCKET);
        // The keeper holds the layer's lock: a socket found here is an ended cordon's.
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        let accepting = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cordon-layer-control".into())
            .spawn(move || {
                loop {
                    let accepted = accepting.accept();
                    if stopped.load(Ordering::Acquire) {
                        return;
                    }
                    match accepted {
                        // A connection that panics ends alone: the socket goes on serving
                        // (a dead thread would leave every later client waiting).
                        Ok((stream, _)) => {
                            let serving = AssertUnwindSafe(|| serve(&*handler, stream));
                            let _ = std::panic::catch_unwind(serving);
                        }
                        // Out of descriptors, say: the next connection may fare better.
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })?;
        Ok(Server {
            listener,
            stop,
            thread: Some(thread),
            path,
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the thread's accept (Linux fails it once the socket is shut down).
        // SAFETY: a descriptor this value owns; the result does not matter.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

/// Answers one connection.
fn serve(handler: &Handler, stream: UnixStream) {
    let send = |reply: &Reply| {
        let mut line = serde_json::to_string(reply).expect("a reply serializes");
        line.push('\n');
        let _ = (&stream).write_all(line.as_bytes());
    };
    // Read before the peer is judged, so that a refused one still gets its answer.
    let line = read_line(&stream);
    let answer = peer_allowed(&stream)
        .and(line)
        .and_then(|line| {
            serde_json::from_str(&line)
                .map_err(|e| format!("not a layer operation ({e}): {line:?}"))
        })
        .and_then(|op| handler(op, &|| send(&Reply::Waiting)).map_err(|e| e.to_string()));
    send(&match answer {
        Ok(done) => Reply::Done(done),
        Err(why) => Reply::Error(why),
    });
}

/// Reads the line of a connection's operation.
fn read_line(stream: &UnixStream) -> Result<String, String> {
    let _ = stream.set_read_timeout(Some(REQUEST_WAIT));
    let mut line = String::new();
    BufReader::new(stream.take(MAX_REQUEST))
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the operation: {e}"))?;
    Ok(line)
}

/// Whether the process at the other end may change the layer: its owner's (or root's), in
/// this process's mount namespace.
fn peer_allowed(stream: &UnixStream) -> Result<(), String> {
    // SAFETY: zeroes are a valid `ucred`.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket and a buffer of `len` bytes; the result is checked.
    let got = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if got != 0 {
        return Err(format!(
            "refused: cannot tell who asks ({})",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: no arguments.
    let me = unsafe { libc::geteuid() };
    if cred.uid != me && cred.uid != 0 {
        return Err("refused: only the layer's owner may change it".into());
    }
    let namespace =
        |pid: &str| fs::metadata(format!("/proc/{pid}/ns/mnt")).map(|m| (m.dev(), m.ino()));
    match (namespace(&cred.pid.to_string()), namespace("self")) {
        (Ok(theirs), Ok(ours)) if theirs == ours => Ok(()),
        _ => Err(
            "refused: the request comes from another mount namespace (a sandboxed command \
             cannot change its own layer); run cordon layer where cordon itself runs"
                .into(),
        ),
    }
}

/// Does `op` to the layer at `dir`, from any process. When a running cordon uses the layer,
/// that cordon does what changes it between two of its calls ([`super::Live`]); `waiting` is
/// told when a call is running and the operation waits for its end. Else it is done here,
/// the layer locked.
pub fn apply(dir: &Path, op: Op, waiting: impl FnMut()) -> Result<Done, LayerError> {
    let workspace = super::workspace_of(dir)?;
    if !op.reads()
        && let Some(answer) = ask(dir, &op, waiting)?
    {
        return answer;
    }
    Ok(match op {
        Op::Diff { stat } => Done::Diff(super::diff(dir, &workspace, stat)?),
        Op::Checkpoints => op::labels(dir)?,
        Op::Checkpoint { label } => Done::Checkpoint(stack::checkpoint(dir, label.as_deref())?),
        Op::Rollback { label } => {
            stack::rollback(dir, &label)?;
            Done::RolledBack(label)
        }
        Op::Fork { name } => {
            stack::fork(dir, &super::dir(&name)?)?;
            Done::Fork(name)
        }
        Op::Accept(accept) => Done::Accepted(super::accept(dir, &workspace, &accept)?),
        Op::Discard => {
            super::discard(dir)?;
            Done::Discarded { pending: false }
        }
    })
}

/// Asks the running cordon that holds the layer at `dir` to do `op`, telling `waiting` when
/// it waits for a call to end. None when no cordon answers: none holds the layer, or the one
/// that did ended before doing it.
pub(super) fn ask(
    dir: &Path,
    op: &Op,
    mut waiting: impl FnMut(),
) -> Result<Option<Result<Done, LayerError>>, LayerError> {
    let stream = match UnixStream::connect(dir.join(SOCKET)) {
        Ok(stream) => stream,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(io_at("reach the cordon using the layer", dir)(e)),
    };
    let mut line = serde_json::to_string(op).expect("an operation serializes");
    line.push('\n');
    if (&stream).write_all(line.as_bytes()).is_err() {
        return Ok(None);
    }
    for line in BufReader::new(&stream).lines() {
        let Ok(line) = line else { return Ok(None) };
        match serde_json::from_str(&line) {
            Ok(Reply::Waiting) => waiting(),
            Ok(Reply::Done(done)) => return Ok(Some(Ok(done))),
            Ok(Reply::Error(why)) => return Ok(Some(Err(LayerError::Answered(why)))),
            Err(e) => {
                let bad = io::Error::other(format!("{e}: {line:?}"));
                return Err(io_at("read the answer of the cordon using the layer", dir)(
                    bad,
                ));
            }
        }
    }
    Ok(None)
}
