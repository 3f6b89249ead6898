//! A command's init: pid 1 of the command's own namespaces, cloned by the zygote. It maps its
//! user, takes a cgroup namespace (it was born in the command's memory cgroup), opens the
//! proxy's port when the command has an allowlist, mounts what is fresh for each command
//! ([`view::fresh`]), confines itself ([`Plan::apply`]), forks bash and reaps every process
//! of the namespace until bash exits; then it kills and reaps whatever is left, reports
//! bash's status and exits. The zygote kills the init at the timeout, or when the helper says
//! so: the kernel then kills every process of the namespace.

use std::fs::File;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::bash::Bash;
use super::confine::{Plan, Rules, refusal};
use super::ns::{self, Access};
use super::process;
use super::proxy;
use super::view;
use super::wire::{self, Setup};
use super::{HOME, Status};

/// What the zygote hands a command's init.
pub(super) struct CallInit<'a> {
    pub setup: &'a Setup,
    pub plan: &'a Plan,
    pub rules: &'a Rules,
    /// The zygote's uid and gid, which the init's user namespace maps to themselves.
    pub ids: (libc::uid_t, libc::gid_t),
    pub command: String,
    /// The protected paths, relative to the workspace.
    pub protected: Vec<String>,
    /// The hidden paths to cover.
    pub hidden: Vec<Vec<u8>>,
    pub address_space: Option<u64>,
    /// The memory limit, which the private tmpfs mounts share.
    pub memory: u64,
    /// The trees bound into the view (the workspace and the extra paths).
    pub granted: &'a [(PathBuf, Access)],
    /// The output pipe, bash's standard output and error.
    pub out: OwnedFd,
    /// Where to write how bash ended.
    pub status: Option<OwnedFd>,
    /// The socket pair end to hand the proxy's listening socket over, with an allowlist.
    pub handover: Option<OwnedFd>,
}

/// Runs the init. Never returns.
pub(super) fn run(mut init: CallInit) -> ! {
    let status_pipe = init.status.take();
    let status = match start(init) {
        Ok(bash) => reap(bash),
        Err(why) => Status::Refused(why),
    };
    let json = serde_json::to_vec(&status).expect("a status serializes");
    // SAFETY: writing a buffer to the status pipe, then exiting without unwinding: the
    // kernel kills what is left in the namespace.
    unsafe {
        if let Some(pipe) = &status_pipe {
            libc::write(pipe.as_raw_fd(), json.as_ptr().cast(), json.len());
        }
        libc::_exit(0)
    }
}

/// Maps the user, builds what is fresh for the command, confines the init and starts bash:
/// bash's pid.
fn start(init: CallInit) -> Result<libc::pid_t, String> {
    map_self(init.ids).map_err(|e| {
        refusal(format!(
            "cannot map the command's user into its user namespace: {e}"
        ))
    })?;
    // SAFETY: plain system calls; the results are checked.
    unsafe {
        // The command's /proc/self/cgroup starts at its own cgroup.
        if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
            return Err(refusal(format!(
                "cannot create a cgroup namespace: {}",
                io::Error::last_os_error()
            )));
        }
    }
    // While the init holds every capability of the namespaces it owns.
    if let Some(handover) = &init.handover {
        open_proxy(handover)?;
    }
    let setup = init.setup;
    view::fresh(&view::Fresh {
        workspace: &wire::to_path(&setup.workspace),
        granted: init.granted,
        memory: init.memory,
        private_home: setup.home.is_none(),
        protected: &init.protected,
        hidden: &init.hidden,
    })
    .map_err(refusal)?;
    // The init itself counts as one of the tasks.
    init.plan.apply(
        setup,
        init.rules,
        u64::from(setup.max_processes) + 1,
        init.address_space,
    )?;
    let bash = Bash::new(setup, &init.command, Path::new(HOME), Path::new("/tmp"))?;
    let null = process::open_null()?;
    process::dup2(init.out.as_raw_fd(), 1)?;
    drop(init.out);
    let pid = bash.spawn(&null)?;
    // Only bash keeps the output pipe: it reaches end-of-file when the tree is gone.
    process::dup2(null.as_raw_fd(), 1)?;
    Ok(pid)
}

/// Maps the init's uid and gid (`ids`, as the zygote's namespace sees them) to themselves in
/// its new user namespace, then makes it non-dumpable: its descriptors (the status pipe) and
/// memory are then out of the command's reach, though /proc/1 is the init. Only a dumpable
/// process may write its own maps.
fn map_self((uid, gid): (libc::uid_t, libc::gid_t)) -> io::Result<()> {
    // SAFETY: plain prctls.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
    let mapped = (|| {
        File::create("/proc/self/uid_map")?.write_all(format!("{uid} {uid} 1\n").as_bytes())?;
        File::create("/proc/self/setgroups")?.write_all(b"deny")?;
        File::create("/proc/self/gid_map")?.write_all(format!("{gid} {gid} 1\n").as_bytes())
    })();
    // SAFETY: a plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    mapped
}

/// Brings up the namespace's loopback and hands the proxy's listening socket on it to the
/// helper over `handover`.
fn open_proxy(handover: &OwnedFd) -> Result<(), String> {
    ns::loopback_up().map_err(|e| {
        refusal(format!(
            "cannot bring up the loopback of the command's network namespace: {e}"
        ))
    })?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, proxy::PORT))
        .map_err(|e| refusal(format!("cannot open the proxy's port: {e}")))?;
    proxy::hand_over(handover, &listener)
        .map_err(|e| refusal(format!("cannot hand the proxy's port to the helper: {e}")))
}

/// Reaps every process of the namespace (orphans come to pid 1) until bash exits, then kills
/// and reaps what is left: bash's status, once nothing of the command runs any more. Every
/// process of the namespace descends from the init, and one whose parent dies comes to it
/// before that parent can be reaped: when it has no child left, the namespace holds only
/// itself. So the command can be reported ended before the init exits, and the namespaces'
/// teardown that its exit sets off is nobody's wait.
fn reap(bash: libc::pid_t) -> Status {
    let status = wait_for(bash);
    // SAFETY: from pid 1, -1 is every other process of the namespace.
    unsafe { libc::kill(-1, libc::SIGKILL) };
    while wait_any() != Some(libc::ECHILD) {}
    status
}

/// Reaps children until `bash` is one of them: its status.
fn wait_for(bash: libc::pid_t) -> Status {
    loop {
        // SAFETY: `info` is a valid siginfo_t; reading its fields after a successful waitid
        // that reaped any child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            if libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::__WALL) == 0 {
                if info.si_pid() == bash {
                    return process::status_of(info.si_code, info.si_status());
                }
            } else if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Status::Refused("the sandbox's init lost track of bash".into());
            }
        }
    }
}

/// Reaps one child, waiting for it: none, or why there was none to reap.
fn wait_any() -> Option<i32> {
    // SAFETY: reaping any child of this process.
    match unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL) } {
        pid if pid > 0 => None,
        _ => io::Error::last_os_error().raw_os_error(),
    }
}
