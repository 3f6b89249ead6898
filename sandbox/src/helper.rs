//! The sandbox helper: the calling program re-executed (single-threaded, fresh) to run one
//! command and to make sure nothing it started survives it. The confined path is in
//! [`super::init`]; the unconfined one (`--unconfined-bash`) is here.
//!
//! File descriptors on entry: 0 the request (a memfd), 1 the output pipe, 2 the report pipe.

use std::ffi::{CString, OsStr};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::wire::{self, Report, Request};
use super::{ENVIRONMENT, PATH, Status, signal_name, whole_secs};

/// Runs the sandbox helper and exits; see the crate documentation.
pub(crate) fn sandbox_main() -> ! {
    let report = supervise().unwrap_or_else(|why| Report {
        status: Status::Refused(why),
        layers: Vec::new(),
    });
    let mut err = io::stderr();
    let _ = err.write_all(wire::report_line(&report).as_bytes());
    let _ = err.flush();
    std::process::exit(0)
}

fn supervise() -> Result<Report, String> {
    let mut raw = Vec::new();
    io::stdin()
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the request: {e}"))?;
    let request: Request =
        serde_json::from_slice(&raw).map_err(|e| format!("malformed request: {e}"))?;
    let null = open_null()?;
    // The request file is no longer needed: standard input becomes /dev/null.
    dup2(null.as_raw_fd(), 0)?;
    // SAFETY: no arguments. Out of the host's session and process group: terminal signals
    // meant for the host do not reach the helper, which must outlive the host long enough
    // to clean up.
    unsafe { libc::setsid() };
    if request.unconfined {
        unconfined(&request, null)
    } else {
        super::init::run(&request, null)
    }
}

/// bash, ready to exec: its path, arguments, environment and working directory.
pub(super) struct Bash {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    workspace: CString,
}

impl Bash {
    /// bash for `request`, with `HOME` and `TMPDIR` set to `home` and `tmp`.
    pub fn new(request: &Request, home: &Path, tmp: &Path) -> Result<Bash, String> {
        let argv = ["bash", "--noprofile", "--norc", "-c", &request.command]
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(Bash {
            path: find_bash()?,
            argv,
            envp: environment(home, tmp)?,
            workspace: cstring(&request.workspace)?,
        })
    }

    /// In a child just forked by `parent`: sets up descriptors and signals, enters the
    /// workspace and execs bash. Never returns; on failure it writes why to `error` and exits.
    pub fn exec(&self, null: &OwnedFd, error: &OwnedFd, parent: libc::pid_t) -> ! {
        let fail = |why: String| -> ! {
            // SAFETY: writing a buffer to an open descriptor, then exiting without unwinding.
            unsafe {
                libc::write(error.as_raw_fd(), why.as_ptr().cast(), why.len());
                libc::_exit(127)
            }
        };
        // SAFETY: system calls on this (single-threaded) process with valid arguments.
        unsafe {
            // Signal dispositions and mask are inherited through exec: start bash from
            // defaults (the Rust runtime ignores SIGPIPE, which would make `yes | head`
            // misbehave).
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            // Its own session and process group (the unconfined helper kills the group).
            libc::setsid();
            // Dies with its parent, should that be killed.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            // stdin /dev/null; stdout and stderr both the output pipe (fd 1).
            if libc::dup2(null.as_raw_fd(), 0) < 0 || libc::dup2(1, 2) < 0 {
                fail(format!("dup2: {}", io::Error::last_os_error()));
            }
            // Every other descriptor closes on exec (the error pipe included).
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) != 0
            {
                cloexec_all();
            }
            if libc::chdir(self.workspace.as_ptr()) != 0 {
                fail(format!(
                    "cannot enter the workspace: {}",
                    io::Error::last_os_error()
                ));
            }
        }
        let argv = pointers(&self.argv);
        let envp = pointers(&self.envp);
        // SAFETY: NUL-terminated arrays of valid C strings.
        unsafe { libc::execve(self.path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let err = io::Error::last_os_error();
        fail(if err.raw_os_error() == Some(libc::E2BIG) {
            "the command is too long for bash -c (the kernel limits one argument to 128 KiB); \
             write long content to a file in smaller steps"
                .to_string()
        } else {
            format!(
                "cannot run {}: {err}",
                String::from_utf8_lossy(self.path.as_bytes())
            )
        })
    }

    /// Forks and execs bash in the child: its pid once it has exec'd, or why it could not.
    pub fn spawn(&self, null: &OwnedFd) -> Result<libc::pid_t, String> {
        let (error_read, error_write) =
            super::runner::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
        // SAFETY: no arguments.
        let me = unsafe { libc::getpid() };
        // SAFETY: the caller is single-threaded, so the child may do anything.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("cannot fork: {}", io::Error::last_os_error()));
        }
        if pid == 0 {
            self.exec(null, &error_write, me);
        }
        drop(error_write);
        // The child writes why it could not exec bash, or nothing (the pipe closes on exec).
        let mut why = String::new();
        let _ = std::fs::File::from(error_read).read_to_string(&mut why);
        if why.is_empty() { Ok(pid) } else { Err(why) }
    }
}

/// The unconfined path: bash in the helper's own namespaces, `HOME` and `TMPDIR` in a private
/// directory removed after the call; the helper is a child subreaper, so orphans of the
/// command come back to it, and it kills until none is left.
fn unconfined(request: &Request, null: OwnedFd) -> Result<Report, String> {
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "cannot become a child subreaper: {}",
            io::Error::last_os_error()
        ));
    }
    let private = tempfile::Builder::new()
        .prefix("cordon-bash-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|e| format!("cannot create the private directory of the command: {e}"))?;
    let (home, tmp) = (private.path().join("home"), private.path().join("tmp"));
    for dir in [&home, &tmp] {
        std::fs::create_dir(dir)
            .map_err(|e| format!("cannot create the private directory of the command: {e}"))?;
    }
    let bash = Bash::new(request, &home, &tmp)?;
    let started = Instant::now();
    let spawned = bash.spawn(&null);
    // The helper keeps no copy of the output pipe: it reaches end-of-file when the tree is gone.
    dup2(null.as_raw_fd(), 1)?;
    let pid = match spawned {
        Ok(pid) => pid,
        Err(why) => {
            kill_tree(None);
            return Err(why);
        }
    };
    let timeout = Duration::from_millis(request.timeout_ms);
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

/// The absolute path of bash, looked up in [`PATH`].
fn find_bash() -> Result<CString, String> {
    PATH.split(':')
        .map(|dir| Path::new(dir).join("bash"))
        .find(|p| is_executable(p))
        .ok_or_else(|| format!("bash is not installed (looked in {PATH})"))
        .and_then(|p| cstring(p.as_os_str().as_bytes()))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// The command's whole environment (see [`ENVIRONMENT`]).
fn environment(home: &Path, tmp: &Path) -> Result<Vec<CString>, String> {
    let values: [(&str, &OsStr); 6] = [
        ("PATH", OsStr::new(PATH)),
        ("HOME", home.as_os_str()),
        ("TMPDIR", tmp.as_os_str()),
        ("LANG", OsStr::new("C.UTF-8")),
        ("LC_ALL", OsStr::new("C.UTF-8")),
        ("TERM", OsStr::new("dumb")),
    ];
    debug_assert!(values.iter().map(|(k, _)| *k).eq(ENVIRONMENT));
    values
        .iter()
        .map(|(k, v)| {
            let mut entry = k.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(v.as_bytes());
            cstring(&entry)
        })
        .collect()
}

fn cstring(bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| "the command or a path contains a NUL byte".to_string())
}

pub(super) fn open_null() -> Result<OwnedFd, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| format!("cannot open /dev/null: {e}"))
}

pub(super) fn dup2(from: i32, to: i32) -> Result<(), String> {
    // SAFETY: plain descriptors.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(format!("dup2: {}", io::Error::last_os_error()));
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec, for kernels without `close_range`.
fn cloexec_all() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: setting a flag on a descriptor; a stale one fails harmlessly.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// How waiting for a process ended.
pub(super) enum Waited {
    /// It exited (it is left unreaped).
    Exited,
    TimedOut,
    /// The host went away (the read end of the report pipe, fd 2, closed).
    HostGone,
}

/// Waits until `pid`, a child, exits, the deadline passes, or the host goes away. The child is
/// left unreaped, so its pid (and process group) stays ours.
pub(super) fn wait(pid: libc::pid_t, deadline: Instant) -> Waited {
    // SAFETY: plain system call; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let waited = loop {
        if has_exited(pid) {
            break Waited::Exited;
        }
        let now = Instant::now();
        if now >= deadline {
            break Waited::TimedOut;
        }
        let left = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
        // Without a pidfd (old kernels), poll for the exit every few milliseconds.
        let slice = if pidfd >= 0 { left } else { left.min(5) };
        let mut fds = [
            libc::pollfd {
                fd: 2,
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: a valid array of pollfd (a negative fd is ignored).
        unsafe { libc::poll(fds.as_mut_ptr(), 2, slice) };
        if fds[0].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            break Waited::HostGone;
        }
    };
    if pidfd >= 0 {
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(pidfd) };
    }
    waited
}

fn has_exited(pid: libc::pid_t) -> bool {
    // SAFETY: `info` is a valid siginfo_t; reading its fields after a successful waitid.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) == 0 && info.si_pid() != 0
    }
}

/// How `pid`, a child that has exited, ended (without reaping it).
fn exited(pid: libc::pid_t) -> Option<Status> {
    // SAFETY: `info` is a valid siginfo_t; reading its fields after a successful waitid.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 || info.si_pid() == 0
        {
            return None;
        }
        Some(status_of(info.si_code, info.si_status()))
    }
}

/// The [`Status`] of a `waitid` result.
fn status_of(code: i32, status: i32) -> Status {
    match code {
        libc::CLD_EXITED => Status::Exited(status),
        _ => Status::Signaled(signal_name(status)),
    }
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
