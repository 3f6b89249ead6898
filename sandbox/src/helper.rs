//! The sandbox helper: the calling program re-executed (single-threaded, fresh) to run one
//! command confined and to make sure nothing it started survives it.
//!
//! File descriptors on entry: 0 the request (a memfd), 1 the output pipe, 2 the report pipe.

use std::ffi::{CString, OsStr};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::confine::{self, Plan};
use super::wire::{self, Request};
use super::{ENVIRONMENT, PATH, Status, signal_name, whole_secs};

/// Runs the sandbox helper and exits; see the crate documentation.
pub(crate) fn sandbox_main() -> ! {
    let status = supervise().unwrap_or_else(Status::Refused);
    let mut err = io::stderr();
    let _ = err.write_all(wire::report_line(&status).as_bytes());
    let _ = err.flush();
    std::process::exit(0)
}

/// Everything the forked child needs, prepared before the fork.
struct Launch {
    bash: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    workspace: CString,
    null: OwnedFd,
    error: OwnedFd,
    helper_pid: libc::pid_t,
    plan: Option<Plan>,
}

fn supervise() -> Result<Status, String> {
    let mut raw = Vec::new();
    io::stdin()
        .read_to_end(&mut raw)
        .map_err(|e| format!("cannot read the request: {e}"))?;
    let request: Request =
        serde_json::from_slice(&raw).map_err(|e| format!("malformed request: {e}"))?;
    let null = open_null()?;
    // The request file is no longer needed: standard input becomes /dev/null.
    dup2(null.as_raw_fd(), 0)?;
    // SAFETY: plain system calls without pointers.
    unsafe {
        // Out of the host's session and process group: terminal signals meant for the host do
        // not reach the helper, which must outlive the host long enough to clean up.
        libc::setsid();
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(format!(
                "cannot become a child subreaper: {}",
                io::Error::last_os_error()
            ));
        }
    }

    let private = wire::to_path(&request.private_dir);
    let bash = find_bash()?;
    let argv = ["bash", "--noprofile", "--norc", "-c", &request.command]
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let envp = environment(&private)?;
    let workspace = cstring(&request.workspace)?;
    let (error_read, error_write) =
        super::runner::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    // Last, as it may create a cgroup, which must be removed whatever happens next.
    let plan = if request.unconfined {
        None
    } else {
        Some(confine::prepare(&request)?)
    };
    let launch = Launch {
        bash,
        argv,
        envp,
        workspace,
        null,
        error: error_write,
        // SAFETY: no arguments.
        helper_pid: unsafe { libc::getpid() },
        plan,
    };
    let started = Instant::now();
    // SAFETY: the helper is single-threaded, so the child may do anything.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let why = format!("cannot fork: {}", io::Error::last_os_error());
        if let Some(cgroup) = launch.plan.and_then(|p| p.cgroup) {
            cgroup.remove();
        }
        return Err(why);
    }
    if pid == 0 {
        child(launch);
    }
    let Launch {
        error, null, plan, ..
    } = launch;
    drop(error);
    // The helper keeps no copy of the output pipe: it reaches end-of-file when the tree is gone.
    dup2(null.as_raw_fd(), 1)?;
    drop(null);
    let cgroup = plan.and_then(|p| p.cgroup);

    // The child writes why it could not exec bash, or nothing (the pipe closes on exec).
    let mut why = String::new();
    let _ = std::fs::File::from(error_read).read_to_string(&mut why);
    if !why.is_empty() {
        kill_tree(pid, cgroup.as_ref());
        if let Some(cgroup) = cgroup {
            cgroup.remove();
        }
        return Err(why);
    }

    let timeout = Duration::from_millis(request.timeout_ms);
    let outcome = wait_for(pid, started + timeout);
    kill_tree(pid, cgroup.as_ref());
    if let Some(cgroup) = cgroup {
        cgroup.remove();
    }
    match outcome {
        Waited::Exited(report) => Ok(report),
        Waited::TimedOut => Ok(Status::TimedOut(whole_secs(timeout))),
        Waited::HostGone => {
            // The host cannot remove the private directory any more: do it for it.
            let _ = std::fs::remove_dir_all(&private);
            std::process::exit(1)
        }
    }
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
fn environment(private: &Path) -> Result<Vec<CString>, String> {
    let home = private.join("home");
    let tmp = private.join("tmp");
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

fn open_null() -> Result<OwnedFd, String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(|e| format!("cannot open /dev/null: {e}"))
}

fn dup2(from: i32, to: i32) -> Result<(), String> {
    // SAFETY: plain descriptors.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(format!("dup2: {}", io::Error::last_os_error()));
    }
    Ok(())
}

/// The forked child: set up descriptors, confine, exec bash. Never returns; on failure it
/// writes why to the error pipe and exits.
fn child(mut launch: Launch) -> ! {
    let fail = |error: &OwnedFd, why: String| -> ! {
        // SAFETY: writing a buffer to an open descriptor, then exiting without unwinding.
        unsafe {
            libc::write(error.as_raw_fd(), why.as_ptr().cast(), why.len());
            libc::_exit(127)
        }
    };
    // SAFETY: system calls on this (single-threaded) process with valid arguments.
    unsafe {
        // Signal dispositions and mask are inherited through exec: start bash from defaults
        // (the Rust runtime ignores SIGPIPE, which would make `yes | head` misbehave).
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        // Its own session and process group (the helper kills the group as a whole).
        libc::setsid();
        // Dies with the helper, should the host kill it.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != launch.helper_pid {
            libc::_exit(127);
        }
        // stdin /dev/null; stdout and stderr both the output pipe (the helper's fd 1).
        if libc::dup2(launch.null.as_raw_fd(), 0) < 0 || libc::dup2(1, 2) < 0 {
            fail(
                &launch.error,
                format!("dup2: {}", io::Error::last_os_error()),
            );
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
        if libc::chdir(launch.workspace.as_ptr()) != 0 {
            fail(
                &launch.error,
                format!("cannot enter the workspace: {}", io::Error::last_os_error()),
            );
        }
    }
    if let Some(plan) = launch.plan.take()
        && let Err(why) = plan.apply()
    {
        fail(&launch.error, why);
    }
    let argv = pointers(&launch.argv);
    let envp = pointers(&launch.envp);
    // SAFETY: NUL-terminated arrays of valid C strings.
    unsafe { libc::execve(launch.bash.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    let err = io::Error::last_os_error();
    let why = if err.raw_os_error() == Some(libc::E2BIG) {
        "the command is too long for bash -c (the kernel limits one argument to 128 KiB); \
         write long content to a file in smaller steps"
            .to_string()
    } else {
        format!(
            "cannot run {}: {err}",
            String::from_utf8_lossy(launch.bash.as_bytes())
        )
    };
    fail(&launch.error, why)
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

enum Waited {
    Exited(Status),
    TimedOut,
    HostGone,
}

/// Waits until bash (`pid`) exits, the deadline passes, or the host goes away (the read end of
/// the report pipe, fd 2, closes). bash is left unreaped, so its pid (and process group) stays
/// ours until [`kill_tree`].
fn wait_for(pid: libc::pid_t, deadline: Instant) -> Waited {
    // SAFETY: plain system call; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    loop {
        if let Some(report) = exited(pid) {
            if pidfd >= 0 {
                // SAFETY: closing the descriptor opened above.
                unsafe { libc::close(pidfd) };
            }
            return Waited::Exited(report);
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::TimedOut;
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
            return Waited::HostGone;
        }
    }
}

/// bash's status if it has exited, without reaping it.
fn exited(pid: libc::pid_t) -> Option<Status> {
    // SAFETY: `info` is a valid siginfo_t; reading its fields after a successful waitid.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 || info.si_pid() == 0
        {
            return None;
        }
        Some(match info.si_code {
            libc::CLD_EXITED => Status::Exited(info.si_status()),
            _ => Status::Signaled(signal_name(info.si_status())),
        })
    }
}

/// Kills everything the command started: bash's process group (bash, `pid`, is not yet
/// reaped, so the group id cannot have been reused), the cgroup if there is one, then every
/// child of the helper — orphans are reparented to it, the subreaper — until it has none.
fn kill_tree(pid: libc::pid_t, cgroup: Option<&super::cgroup::Cgroup>) {
    // SAFETY: signalling a process group this helper owns.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    // Well within the host's backstop grace, which would kill the helper mid-way.
    let give_up = Instant::now() + super::BACKSTOP_GRACE / 2;
    loop {
        if let Some(cgroup) = cgroup {
            cgroup.kill_all();
        }
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
