//! A command's init: pid 1 of the command's own namespaces, cloned by the zygote before the
//! command is known, so that what is fresh for each command is ready when it comes.
//!
//! Ahead of its command, the init maps its user, takes a cgroup namespace (it was born in the
//! command's memory cgroup), opens the proxy's port when commands have an allowlist, mounts
//! what is fresh for each command ([`view::fresh`]), confines itself ([`Plan::apply`]) and
//! readies bash (its path and environment); then it says it is ready and waits. Meanwhile the
//! zygote mounts the command's protected and hidden paths into its mount namespace
//! ([`view::cover`]), which needs no more than the namespace: a confined process may not
//! mount, but the zygote may mount for it.
//!
//! Given its command ([`Go`]), the init hands the proxy's port over, forks bash and reaps every
//! process of the namespace until bash exits; then it kills and reaps whatever is left,
//! reports bash's status and exits. The zygote kills the init at the timeout, or when the
//! helper says so: the kernel then kills every process of the namespace.

use std::fs::File;
use std::io::{self, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::confine::{self, Plan, Rules};
use super::exec::Bash;
use super::ns::{self, Access};
use super::process;
use super::proxy;
use super::refused::{CannotRun, Part};
use super::view;
use super::wire::{self, Setup};
use super::{HOME, Status};

/// What the zygote hands a command's init when it clones it.
pub(super) struct Prepared<'a> {
    pub setup: &'a Setup,
    pub plan: &'a Plan,
    pub rules: &'a Rules,
    /// The zygote's uid and gid, which the init's user namespace maps to themselves.
    pub ids: (libc::uid_t, libc::gid_t),
    /// The memory limit, which the private tmpfs mounts share.
    pub memory: u64,
    /// The trees bound into the view (the workspace and the extra paths).
    pub granted: &'a [(PathBuf, Access)],
    /// The init's end of its socket pair with the zygote: its mount namespace goes out when
    /// it is ready, the command ([`Go`]) comes in.
    pub control: OwnedFd,
    /// Where to write how bash ended.
    pub status: OwnedFd,
}

/// The command for a ready init. Attached: the output pipe's write end and, with an
/// allowlist, the end of the socket pair to hand the proxy's listening socket over on.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Go {
    pub command: String,
    /// The address-space limit of each process, where no memory cgroup bounds the command.
    pub address_space: Option<u64>,
}

/// A refusal of the init's own plumbing, which confinement cannot help.
fn helper(why: impl std::fmt::Display) -> CannotRun {
    CannotRun::failed(Part::Helper, why)
}

/// Runs the init. Never returns.
pub(super) fn run(init: Prepared) -> ! {
    let status = init.status.as_raw_fd();
    let outcome = prepare(&init).and_then(|waiting| {
        // Ready: the zygote covers what the command must not change in this namespace.
        let mounts = File::open("/proc/self/ns/mnt")
            .map_err(|e| helper(format!("cannot open the command's mount namespace: {e}")))?;
        wire::send(init.control.as_fd(), &(), &[mounts.as_fd()])
            .map_err(|e| helper(format!("cannot say the sandbox is ready: {e}")))?;
        start(&init, waiting)
    });
    let status_of = match outcome {
        Ok(bash) => reap(bash),
        Err(why) => Status::Refused(why),
    };
    let json = serde_json::to_vec(&status_of).expect("a status serializes");
    // SAFETY: writing a buffer to the status pipe, then exiting without unwinding: the
    // kernel kills what is left in the namespace.
    unsafe {
        libc::write(status, json.as_ptr().cast(), json.len());
        libc::_exit(0)
    }
}

/// What a ready init holds for its command, made before the command comes.
struct Waiting {
    /// The proxy's listening socket, when commands have an allowlist.
    listener: Option<TcpListener>,
    bash: Bash,
    null: OwnedFd,
}

/// Maps the user, builds what is fresh for a command, confines the init and readies bash.
fn prepare(init: &Prepared) -> Result<Waiting, CannotRun> {
    let namespaces = |why: String| CannotRun::unconfinable(Part::Namespaces, why);
    map_self(init.ids).map_err(|e| {
        namespaces(format!(
            "cannot map the command's user into its user namespace: {e}"
        ))
    })?;
    // SAFETY: a plain system call; the result is checked.
    // The command's /proc/self/cgroup starts at its own cgroup.
    if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } != 0 {
        return Err(namespaces(format!(
            "cannot create a cgroup namespace: {}",
            io::Error::last_os_error()
        )));
    }
    let setup = init.setup;
    // While the init holds every capability of the namespaces it owns.
    let listener = match setup.policy.network.proxied() {
        Some(_) => Some(open_proxy()?),
        None => None,
    };
    view::fresh(&view::Fresh {
        granted: init.granted,
        memory: init.memory,
        private_home: setup.policy.home.is_none(),
        tmp_lasts: setup.many,
    })
    .map_err(|e| CannotRun::unconfinable(Part::View, e))?;
    // The init itself counts as one of the tasks.
    init.plan
        .apply(init.rules, u64::from(setup.policy.max_processes) + 1)?;
    Ok(Waiting {
        listener,
        bash: Bash::new(&setup.policy, Path::new(HOME), Path::new("/tmp")).map_err(helper)?,
        null: process::open_null().map_err(helper)?,
    })
}

/// Waits for the command, then starts bash: bash's pid.
fn start(init: &Prepared, waiting: Waiting) -> Result<libc::pid_t, CannotRun> {
    let Waiting {
        listener,
        bash,
        null,
    } = waiting;
    let (go, fds) = match wire::recv::<Go>(init.control.as_fd()) {
        Ok(Some(received)) => received,
        // The zygote is gone, or it gave this init up.
        _ => return Err(helper("no command came")),
    };
    let mut fds = fds.into_iter();
    let out = fds
        .next()
        .ok_or_else(|| helper("no output pipe came with the command"))?;
    if let Some(listener) = &listener {
        let handover = fds
            .next()
            .ok_or_else(|| helper("no proxy channel came with the command"))?;
        proxy::hand_over(&handover, listener).map_err(|e| {
            CannotRun::unconfinable(
                Part::Proxy,
                format!("cannot hand the proxy's port to the helper: {e}"),
            )
        })?;
    }
    if let Some(bytes) = go.address_space {
        confine::limit(libc::RLIMIT_AS, bytes)?;
    }
    process::dup2(out.as_raw_fd(), 1).map_err(helper)?;
    drop(out);
    let pid = bash.spawn(&go.command, &null).map_err(helper)?;
    // Only bash keeps the output pipe: it reaches end-of-file when the tree is gone.
    process::dup2(null.as_raw_fd(), 1).map_err(helper)?;
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

/// Brings up the namespace's loopback and opens the proxy's listening socket on it.
fn open_proxy() -> Result<TcpListener, CannotRun> {
    ns::loopback_up().map_err(|e| {
        CannotRun::unconfinable(
            Part::Namespaces,
            format!("cannot bring up the loopback of the command's network namespace: {e}"),
        )
    })?;
    TcpListener::bind((Ipv4Addr::LOCALHOST, proxy::PORT)).map_err(|e| {
        CannotRun::unconfinable(Part::Proxy, format!("cannot open the proxy's port: {e}"))
    })
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
                return Status::Refused(helper("the sandbox's init lost track of bash"));
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
