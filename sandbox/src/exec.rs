//! bash, ready to exec: its path, arguments, environment and working directory, and the
//! start that the helper (unconfined) and the init (confined) share.

use std::ffi::{CString, OsStr};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::proxy;
use super::{ENVIRONMENT, Network, PATH, Policy, RESERVED};

/// Why bash cannot be made ready, or started.
#[derive(Debug, thiserror::Error)]
pub(super) enum BashError {
    #[error("bash is not installed (looked in {PATH})")]
    NotInstalled,
    #[error("the command or a path contains a NUL byte")]
    Nul,
    #[error("cannot create a pipe: {0}")]
    Pipe(io::Error),
    #[error("cannot fork: {0}")]
    Fork(io::Error),
    #[error("dup2: {0}")]
    Dup(io::Error),
    #[error("cannot enter the workspace: {0}")]
    Workspace(io::Error),
    #[error(
        "the command is too long for bash -c (the kernel limits one argument to 128 KiB); write \
         long content to a file in smaller steps"
    )]
    TooLong,
    #[error("cannot run {path}: {source}")]
    Exec { path: String, source: io::Error },
    /// The child ended before it said how its start went.
    #[error("bash could not be started")]
    Unstarted,
}

/// bash, ready to exec a command: what does not depend on the command, made before it comes.
pub(super) struct Bash {
    path: CString,
    envp: Vec<CString>,
    workspace: CString,
}

impl Bash {
    /// bash as `policy` says, with `HOME` and `TMPDIR` set to `home` and `tmp`.
    pub fn new(policy: &Policy, home: &Path, tmp: &Path) -> Result<Bash, BashError> {
        Ok(Bash {
            path: find_bash()?,
            envp: environment(policy, home, tmp)?,
            workspace: cstring(policy.workspace.as_os_str().as_bytes())?,
        })
    }

    /// Starts bash in a child that shares this process's memory until it execs (as
    /// `posix_spawn` does: copying the address space for a child that execs at once costs
    /// 0.2–1 ms), this thread waiting meanwhile. Its pid once it has exec'd, or why it could
    /// not.
    pub fn spawn(&self, command: &str, null: &OwnedFd) -> Result<libc::pid_t, BashError> {
        let argv = ["bash", "--noprofile", "--norc", "-c", command]
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let (error_read, error_write) = super::process::pipe().map_err(BashError::Pipe)?;
        // Nothing of this process but the output (1) and what the child dups reaches bash. Done
        // here, since the child may not allocate: this process never execs itself.
        // SAFETY: a flag set on this process's own descriptors.
        if unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        } != 0
        {
            cloexec_all();
        }
        let launch = Launch {
            bash: self,
            argv: pointers(&argv),
            envp: pointers(&self.envp),
            null: null.as_raw_fd(),
            error: error_write.as_raw_fd(),
            // SAFETY: no arguments.
            parent: unsafe { libc::getpid() },
        };
        // Left uninitialized: zeroing it would fault in all of its pages, where the child
        // touches one or two.
        let mut stack = Box::<[u128]>::new_uninit_slice(STACK / 16);
        let top = stack.as_mut_ptr_range().end;
        // SAFETY: with CLONE_VFORK this thread is suspended until the child execs or exits, so
        // `launch` and `stack` outlive its use of them; the child runs `launch_bash` on `stack`
        // (16-byte aligned) and only makes system calls on what `launch` holds.
        let pid = unsafe {
            libc::clone(
                launch_bash,
                top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw const launch).cast_mut().cast(),
            )
        };
        if pid < 0 {
            return Err(BashError::Fork(io::Error::last_os_error()));
        }
        drop(error_write);
        // The child wrote where it failed, or nothing (the pipe closed on exec).
        let mut said = Vec::new();
        let _ = std::fs::File::from(error_read).read_to_end(&mut said);
        match <[u8; 5]>::try_from(said.as_slice()) {
            Ok([step, errno @ ..]) => Err(self.failure(step, i32::from_ne_bytes(errno))),
            // The child ended before a word (its parent seemed gone): reaped as any child.
            Err(_) if !said.is_empty() => Err(BashError::Unstarted),
            Err(_) => Ok(pid),
        }
    }

    /// Why bash could not be started, from the child's `step` and `errno`.
    fn failure(&self, step: u8, errno: i32) -> BashError {
        let err = io::Error::from_raw_os_error(errno);
        match step {
            DUP => BashError::Dup(err),
            CHDIR => BashError::Workspace(err),
            _ if errno == libc::E2BIG => BashError::TooLong,
            _ => BashError::Exec {
                path: String::from_utf8_lossy(self.path.as_bytes()).into_owned(),
                source: err,
            },
        }
    }
}

/// The child's stack: it makes a few system calls and execs.
const STACK: usize = 64 << 10;

/// Where the child failed, as it tells the parent.
const DUP: u8 = 1;
const CHDIR: u8 = 2;
const EXEC: u8 = 3;

/// What the child of [`Bash::spawn`] needs, made before it exists: it shares the parent's
/// memory, so it must not allocate.
struct Launch<'a> {
    bash: &'a Bash,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    null: RawFd,
    error: RawFd,
    parent: libc::pid_t,
}

/// The child of [`Bash::spawn`]: sets up descriptors and signals, enters the workspace and
/// execs bash. Never returns; on failure it writes where and `errno` to the error pipe and
/// exits.
extern "C" fn launch_bash(launch: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `spawn` passes a `Launch` that outlives this child's use of it.
    let launch = unsafe { &*launch.cast::<Launch>() };
    let fail = |step: u8| -> ! {
        let mut said = [step, 0, 0, 0, 0];
        said[1..].copy_from_slice(
            &io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(0)
                .to_ne_bytes(),
        );
        // SAFETY: writing a buffer to an open descriptor, then exiting without unwinding.
        unsafe {
            libc::write(launch.error, said.as_ptr().cast(), said.len());
            libc::_exit(127)
        }
    };
    // SAFETY: system calls on this child (its own signal dispositions, mask, descriptor table
    // and working directory: none of them is shared with the parent) with valid arguments.
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
        // Its own session and process group (the unconfined helper kills the group).
        libc::setsid();
        // Dies with its parent, should that be killed.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != launch.parent {
            libc::_exit(127);
        }
        // stdin /dev/null; stdout and stderr both the output pipe (fd 1).
        if libc::dup2(launch.null, 0) < 0 || libc::dup2(1, 2) < 0 {
            fail(DUP);
        }
        if libc::chdir(launch.bash.workspace.as_ptr()) != 0 {
            fail(CHDIR);
        }
        libc::execve(
            launch.bash.path.as_ptr(),
            launch.argv.as_ptr(),
            launch.envp.as_ptr(),
        );
    }
    fail(EXEC)
}

/// The absolute path of bash, looked up in [`PATH`].
fn find_bash() -> Result<CString, BashError> {
    PATH.split(':')
        .map(|dir| Path::new(dir).join("bash"))
        .find(|p| is_executable(p))
        .ok_or(BashError::NotInstalled)
        .and_then(|p| cstring(p.as_os_str().as_bytes()))
}

fn is_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid C string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// The command's whole environment (see [`ENVIRONMENT`]): the fixed variables, `PATH`
/// after the policy's own directories, the proxy's variables when the command has an
/// allowlist, then the policy's variables (which cannot replace `PATH`, `HOME`, `TMPDIR` or
/// the proxy's).
fn environment(policy: &Policy, home: &Path, tmp: &Path) -> Result<Vec<CString>, BashError> {
    let mut path = Vec::new();
    for dir in &policy.path {
        path.extend_from_slice(dir.as_os_str().as_bytes());
        path.push(b':');
    }
    path.extend_from_slice(PATH.as_bytes());
    let fixed: [(&str, &OsStr); 6] = [
        ("PATH", OsStr::from_bytes(&path)),
        ("HOME", home.as_os_str()),
        ("TMPDIR", tmp.as_os_str()),
        ("LANG", OsStr::new("C.UTF-8")),
        ("LC_ALL", OsStr::new("C.UTF-8")),
        ("TERM", OsStr::new("dumb")),
    ];
    debug_assert!(fixed.iter().map(|(k, _)| *k).eq(ENVIRONMENT));
    let proxy: Vec<(&str, &str)> = match policy.network {
        Network::Allow(_) => proxy::VARIABLES.to_vec(),
        // Nothing can be reached: a refusal is final, not a reason to try again.
        Network::Off => proxy::VARIABLES
            .iter()
            .chain(&proxy::NO_RETRIES)
            .copied()
            .collect(),
        Network::Open => Vec::new(),
    };
    let reserved = |k: &str| RESERVED.contains(&k) || proxy.iter().any(|(p, _)| *p == k);
    let mut values: Vec<(&str, &OsStr)> = fixed
        .into_iter()
        .filter(|(k, _)| RESERVED.contains(k) || !policy.env.iter().any(|(name, _)| name == k))
        .chain(proxy.iter().map(|(k, v)| (*k, OsStr::new(v))))
        .collect();
    values.extend(
        policy
            .env
            .iter()
            .filter(|(k, _)| !reserved(k))
            .map(|(k, v)| (k.as_str(), OsStr::new(v))),
    );
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

fn cstring(bytes: &[u8]) -> Result<CString, BashError> {
    CString::new(bytes).map_err(|_| BashError::Nul)
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
