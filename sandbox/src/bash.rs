//! bash, ready to exec: its path, arguments, environment and working directory, and the
//! fork-and-exec that the helper (unconfined) and the init (confined) share.

use std::ffi::{CString, OsStr};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::proxy;
use super::wire::Setup;
use super::{ENVIRONMENT, Network, PATH, RESERVED};

/// bash, ready to exec.
pub(super) struct Bash {
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    workspace: CString,
}

impl Bash {
    /// bash running `command` as `setup` says, with `HOME` and `TMPDIR` set to `home` and
    /// `tmp`.
    pub fn new(setup: &Setup, command: &str, home: &Path, tmp: &Path) -> Result<Bash, String> {
        let argv = ["bash", "--noprofile", "--norc", "-c", command]
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(Bash {
            path: find_bash()?,
            argv,
            envp: environment(setup, home, tmp)?,
            workspace: cstring(&setup.workspace)?,
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
            super::process::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
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

/// The command's whole environment (see [`ENVIRONMENT`]): the fixed variables, `PATH`
/// after the request's own directories, the proxy's variables when the command has an
/// allowlist, then the request's variables (which cannot replace `PATH`, `HOME`, `TMPDIR` or
/// the proxy's).
fn environment(request: &Setup, home: &Path, tmp: &Path) -> Result<Vec<CString>, String> {
    let mut path = Vec::new();
    for dir in &request.path {
        path.extend_from_slice(dir);
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
    let proxy: &[(&str, &str)] = match request.network {
        Network::Allow(_) => &proxy::VARIABLES,
        _ => &[],
    };
    let reserved = |k: &str| RESERVED.contains(&k) || proxy.iter().any(|(p, _)| *p == k);
    let mut values: Vec<(&str, &OsStr)> = fixed
        .into_iter()
        .filter(|(k, _)| RESERVED.contains(k) || !request.env.iter().any(|(name, _)| name == k))
        .chain(proxy.iter().map(|(k, v)| (*k, OsStr::new(v))))
        .collect();
    values.extend(
        request
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

fn cstring(bytes: &[u8]) -> Result<CString, String> {
    CString::new(bytes).map_err(|_| "the command or a path contains a NUL byte".to_string())
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
