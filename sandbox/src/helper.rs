//! The sandbox helper: the calling program re-executed (single-threaded, fresh), so that no
//! namespace or confinement is ever set up in a `pre_exec` of the multi-threaded host.
//!
//! It runs in one of two ways. As a [`super::Shell`]'s helper (`__sandbox shell`) it serves
//! the shell's confined commands until the host closes its socket ([`super::server`]). For an
//! unconfined command (`--unconfined-bash`) it runs that one command, here, and makes sure
//! nothing it started survives it; file descriptors on entry: 0 the request (a memfd), 1 the
//! output pipe, 2 the report pipe.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::exec::Bash;
use super::process::{Waited, dup2, exited, open_null, wait};
use super::refused::{CannotRun, Part};
use super::setting::Setting;
use super::wire::{self, Report, Request};
use super::{Network, Policy, SANDBOX_ARG, Status, signal_name, whole_secs};

/// The second argument of a shell's helper (`cordon __sandbox shell`).
pub(super) const SHELL_ARG: &str = "shell";

/// The default helper: this very program, even if it was replaced on disk since it started.
pub(super) const SELF: &str = "/proc/self/exe";

/// Whether this program called [`super::run_helper_if_asked`], and so may be its own helper.
static ENTRY_CALLED: AtomicBool = AtomicBool::new(false);

/// Runs the helper, and never returns, when this process was started as one.
pub(super) fn run_if_asked() {
    ENTRY_CALLED.store(true, Ordering::Relaxed);
    if std::env::args_os().nth(1).as_deref() == Some(SANDBOX_ARG.as_ref()) {
        sandbox_main();
    }
    if std::env::args_os().nth(1).as_deref() == Some(super::layer::KEEPER_ARG.as_ref()) {
        super::layer::keeper_main();
    }
}

/// Why the host cannot start a helper or hand it a command.
#[derive(Debug, thiserror::Error)]
pub(super) enum HelperError {
    #[error(
        "cannot start the sandbox helper: this program would run itself as the helper ({}) but \
         did not call cordon_sandbox::run_helper_if_asked() first thing in main; call it there, \
         or set the policy's helper to a program that does, such as the cordon binary",
        helper.display()
    )]
    NoEntryPoint { helper: PathBuf },
    #[error("cannot start the sandbox helper {}: {source}", helper.display())]
    Start { helper: PathBuf, source: io::Error },
    #[error("the workspace {} is unusable: {source}", path.display())]
    Workspace { path: PathBuf, source: io::Error },
    #[error("cannot create a pipe: {0}")]
    Pipe(io::Error),
    #[error("cannot create a socket pair: {0}")]
    SocketPair(io::Error),
    #[error("cannot pass the sandbox's set-up on: {0}")]
    SetUp(io::Error),
    #[error("cannot pass the command on: {0}")]
    Request(io::Error),
    #[error("cannot reach the sandbox helper: {0}")]
    Unreachable(io::Error),
}

impl From<HelperError> for CannotRun {
    fn from(e: HelperError) -> Self {
        let part = match e {
            HelperError::Workspace { .. } => Part::View,
            _ => Part::Helper,
        };
        CannotRun::failed(part, e)
    }
}

/// The command that starts `policy`'s helper (its arguments after [`SANDBOX_ARG`] to add):
/// an empty environment, working directory `/`. A program that would re-execute itself is
/// refused unless it called [`super::run_helper_if_asked`]: its own `main` would run with the
/// helper's arguments instead (a test harness runs tests, a bench measures beside itself).
pub(super) fn command(policy: &Policy) -> Result<Command, HelperError> {
    let itself = policy.helper == Path::new(SELF)
        || std::env::current_exe().is_ok_and(|exe| exe == policy.helper);
    if itself && !ENTRY_CALLED.load(Ordering::Relaxed) {
        return Err(HelperError::NoEntryPoint {
            helper: policy.helper.clone(),
        });
    }
    let mut command = Command::new(&policy.helper);
    command
        .arg0("cordon")
        .arg(SANDBOX_ARG)
        .env_clear()
        .current_dir("/");
    Ok(command)
}

/// Runs the sandbox helper and exits; see the module documentation.
pub(crate) fn sandbox_main() -> ! {
    if std::env::args_os().nth(2).as_deref() == Some(SHELL_ARG.as_ref()) {
        super::server::serve();
    }
    let report = once().unwrap_or_else(Report::refused);
    let mut err = io::stderr();
    let _ = err.write_all(wire::report_line(&report).as_bytes());
    let _ = err.flush();
    std::process::exit(0)
}

/// Runs the one unconfined command of the request on standard input.
fn once() -> Result<Report, CannotRun> {
    let mut raw = Vec::new();
    io::stdin()
        .read_to_end(&mut raw)
        .map_err(|e| helper(format!("cannot read the request: {e}")))?;
    let request: Request =
        serde_json::from_slice(&raw).map_err(|e| helper(format!("malformed request: {e}")))?;
    let null = open_null().map_err(helper)?;
    // The request file is no longer needed: standard input becomes /dev/null.
    dup2(null.as_raw_fd(), 0).map_err(helper)?;
    // SAFETY: no arguments. Out of the host's session and process group: terminal signals
    // meant for the host do not reach the helper, which must outlive the host long enough
    // to clean up.
    unsafe { libc::setsid() };
    if !request.policy.unconfined {
        return Err(helper("a confined command is run by its shell's helper"));
    }
    if let Network::Allow(_) = request.policy.network {
        // Unconfined, the command has the host's network: an allowlist would be a lie.
        return Err(CannotRun::failed(
            Part::Proxy,
            format!(
                "an allowlist of hosts ({}) needs the confined shell; {} gives commands the \
                 host's whole network",
                Setting::Allowlist,
                Setting::Unconfined
            ),
        ));
    }
    unconfined(&request, null)
}

/// A refusal of the helper's own plumbing, which confinement cannot help.
fn helper(why: impl std::fmt::Display) -> CannotRun {
    CannotRun::failed(Part::Helper, why)
}

/// The unconfined path: bash in the helper's own namespaces, `HOME` and `TMPDIR` in a private
/// directory removed after the call; the helper is a child subreaper, so orphans of the
/// command come back to it, and it kills until none is left.
fn unconfined(request: &Request, null: OwnedFd) -> Result<Report, CannotRun> {
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(helper(format!(
            "cannot become a child subreaper: {}",
            io::Error::last_os_error()
        )));
    }
    let private = tempfile::Builder::new()
        .prefix("cordon-bash-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            helper(format!(
                "cannot create the private directory of the command: {e}"
            ))
        })?;
    let (home, tmp) = (private.path().join("home"), private.path().join("tmp"));
    for dir in [&home, &tmp] {
        std::fs::create_dir(dir).map_err(|e| {
            helper(format!(
                "cannot create the private directory of the command: {e}"
            ))
        })?;
    }
    let home = request.policy.home.clone().unwrap_or(home);
    let bash = Bash::new(&request.policy, &home, &tmp).map_err(helper)?;
    let started = Instant::now();
    let spawned = bash.spawn(&request.command, &null);
    // The helper keeps no copy of the output pipe: it reaches end-of-file when the tree is gone.
    dup2(null.as_raw_fd(), 1).map_err(helper)?;
    let pid = match spawned {
        Ok(pid) => pid,
        Err(why) => {
            kill_tree(None);
            return Err(helper(why));
        }
    };
    let timeout = request.policy.timeout;
    let waited = wait(pid, started + timeout);
    let status = exited(pid);
    kill_tree(Some(pid));
    remove_private(private.keep());
    let status = match waited {
        Waited::Exited => status.unwrap_or(Status::Signaled(signal_name(libc::SIGKILL))),
        Waited::TimedOut => Status::TimedOut(whole_secs(timeout)),
        Waited::HostGone => std::process::exit(1),
    };
    Ok(Report {
        status,
        layers: super::receipt::unconfined(),
        protected: Vec::new(),
        blocked: Vec::new(),
        quarantined: Vec::new(),
    })
}

/// Removes the private directory, even where the command took away its own permissions.
fn remove_private(path: PathBuf) {
    if std::fs::remove_dir_all(&path).is_ok() {
        return;
    }
    fn writable(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                writable(&entry.path());
            }
        }
    }
    writable(&path);
    let _ = std::fs::remove_dir_all(&path);
}

/// Kills everything the unconfined command started: bash's process group (bash, `pid`, is not
/// yet reaped, so the group id cannot have been reused), then every child of the helper —
/// orphans are reparented to it, the subreaper — until it has none. Best effort: a confined
/// command gets a PID namespace instead, which the kernel kills as a whole.
fn kill_tree(pid: Option<libc::pid_t>) {
    if let Some(pid) = pid {
        // SAFETY: signalling a process group this helper owns.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    // Well within the host's backstop grace, which would kill the helper mid-way.
    let give_up = Instant::now() + super::BACKSTOP_GRACE / 2;
    loop {
        for child in children() {
            // SAFETY: `child` is a child of this process, not yet reaped: its pid is ours.
            unsafe { libc::kill(child, libc::SIGKILL) };
        }
        loop {
            let mut status = 0;
            // SAFETY: reaping any child without blocking.
            let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::__WALL) };
            if reaped > 0 {
                continue;
            }
            if reaped < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // No child left: the tree is gone.
                    _ => return,
                }
            }
            break;
        }
        if Instant::now() >= give_up {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The pids of this process's children.
fn children() -> Vec<libc::pid_t> {
    // SAFETY: no arguments.
    let me = unsafe { libc::getpid() };
    let list = PathBuf::from(format!("/proc/{me}/task/{me}/children"));
    if let Ok(text) = std::fs::read_to_string(list) {
        return text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    // Without CONFIG_PROC_CHILDREN: scan every process's parent.
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| parent_of(*pid) == Some(me))
        .collect()
}

fn parent_of(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}
