//! Process plumbing that the host side, the helper and the init share: pipes, descriptors,
//! and waiting for a child until it exits, a deadline passes or the host goes away.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Instant;

use super::{Status, signal_name};

/// A pipe, both ends close-on-exec: (read, write).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// A connected pair of Unix stream sockets, both close-on-exec.
pub(super) fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let created = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if created != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nothing else.
    unsafe { Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))) }
}

/// Why a standard descriptor of the helper or an init cannot be set.
#[derive(Debug, thiserror::Error)]
pub(super) enum FdError {
    #[error("cannot open /dev/null: {0}")]
    Null(io::Error),
    #[error("dup2: {0}")]
    Dup(io::Error),
}

pub(super) fn open_null() -> Result<OwnedFd, FdError> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map(OwnedFd::from)
        .map_err(FdError::Null)
}

pub(super) fn dup2(from: i32, to: i32) -> Result<(), FdError> {
    // SAFETY: plain descriptors.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(FdError::Dup(io::Error::last_os_error()));
    }
    Ok(())
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
        if exited(pid).is_some() {
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

/// How `pid`, a child that has exited, ended (without reaping it).
pub(super) fn exited(pid: libc::pid_t) -> Option<Status> {
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
pub(super) fn status_of(code: i32, status: i32) -> Status {
    match code {
        libc::CLD_EXITED => Status::Exited(status),
        _ => Status::Signaled(signal_name(status)),
    }
}
