//! The confined path of a command. The helper clones a process into new user, PID, mount,
//! IPC, UTS and (unless the network is open) network namespaces; that process is the init
//! (pid 1) of the PID namespace. The init joins the command's memory cgroup, takes a cgroup
//! namespace, builds the command's view ([`super::view`]), confines itself
//! ([`super::confine`]), forks bash and reaps every process of the namespace until bash exits;
//! then it reports bash's status and exits, and the kernel kills whatever is left in the
//! namespace. The helper kills the init at the timeout, or when the host goes away, with the
//! same effect; the init dies with the helper (parent-death signal), so a killed helper takes
//! the command's whole tree with it too. With an allowlist, the init also opens the proxy's
//! listening socket in the new network namespace and hands it to the helper, which serves it
//! ([`super::proxy`]) until the command ends.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bash::Bash;
use super::cgroup::Cgroup;
use super::confine::{self, Plan, refusal};
use super::ns;
use super::process::{self, Waited};
use super::proxy::{self, Proxy};
use super::shield::Shield;
use super::view::{self, Sources};
use super::wire::{Report, Request};
use super::{DEFAULT_MEMORY_LIMIT, HOME, Network, Status, receipt, whole_secs};

/// The helper's descriptor on which the host answers the proxy's questions.
const ANSWERS_FD: i32 = 3;

/// Everything the init needs, prepared by the helper before the clone.
struct Init<'a> {
    request: &'a Request,
    plan: Plan,
    /// The opened host trees when the helper could open them (as the sandbox user); else the
    /// init opens them.
    sources: Option<Sources>,
    shield: &'a Shield,
    cgroup: Option<&'a Cgroup>,
    /// The per-process address-space limit that stands in for a missing memory cgroup.
    address_space: Option<u64>,
    bash: Bash,
    null: OwnedFd,
    sandbox_user: bool,
    /// The init's end of the socket pair over which it hands the proxy's listening socket to
    /// the helper, when the command has an allowlist.
    proxy: Option<OwnedFd>,
}

/// Runs the command of `request` confined; see the module documentation.
pub(super) fn run(request: &Request, null: OwnedFd) -> Result<Report, String> {
    let plan = confine::prepare(request)?;
    // Dropped (its stand-ins removed) only once the command's namespace is empty.
    let shield = Shield::raise(request)?;
    let sandbox_user = ns::runs_as_sandbox_user();
    let (cgroup, no_cgroup) = match request.memory_limit {
        None => (None, None),
        Some(bytes) => match Cgroup::create(bytes) {
            Ok(cgroup) => (Some(cgroup), None),
            Err(why) => (None, Some(why)),
        },
    };
    // Without a memory cgroup (a user without a delegated one), each process gets the limit
    // as its address space instead.
    let address_space = no_cgroup.as_ref().and(request.memory_limit);
    let layers = receipt::confined(
        request,
        sandbox_user,
        &plan,
        cgroup.as_ref(),
        no_cgroup.as_deref(),
    );
    let proxy = match &request.network {
        Network::Allow(allowlist) => {
            let answers = match request.ask {
                true => Some(process::inherited(ANSWERS_FD).map_err(|e| {
                    format!("cannot use the descriptor of the host's answers: {e}")
                })?),
                false => None,
            };
            Some(Proxy::new(allowlist.clone(), answers))
        }
        _ => None,
    };
    let result = supervise(
        request,
        null,
        plan,
        &shield,
        sandbox_user,
        cgroup.as_ref(),
        address_space,
        proxy.as_ref(),
    );
    let oom = cgroup.map(|cgroup| {
        let killed = cgroup.oom_killed();
        cgroup.remove();
        killed
    });
    let status = match result? {
        Some(_) if oom == Some(true) => {
            Status::OutOfMemory(request.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) >> 20)
        }
        Some(status) => status,
        None => {
            // Exiting skips the drops: the stand-ins go first.
            drop(shield);
            std::process::exit(1)
        }
    };
    Ok(Report {
        status,
        layers,
        protected: shield.shown.clone(),
        blocked: proxy.map(|p| p.blocked()).unwrap_or_default(),
    })
}

/// Starts the init and waits for it: the command's status, or `None` when the host went away.
#[allow(clippy::too_many_arguments)]
fn supervise(
    request: &Request,
    null: OwnedFd,
    plan: Plan,
    shield: &Shield,
    sandbox_user: bool,
    cgroup: Option<&Cgroup>,
    address_space: Option<u64>,
    proxy: Option<&Arc<Proxy>>,
) -> Result<Option<Status>, String> {
    let sources = if sandbox_user {
        let userns = ns::sandbox_userns().map_err(|e| {
            refusal(format!(
                "cannot create the user namespace of the sandbox's user: {e}{}",
                NAMESPACE_HINT
            ))
        })?;
        Some(Sources::open(request, shield, Some(&userns))?)
    } else {
        None
    };
    let bash = Bash::new(request, Path::new(HOME), Path::new("/tmp"))?;
    let pipe = || process::pipe().map_err(|e| format!("cannot create a pipe: {e}"));
    let (go_read, go_write) = pipe()?;
    let (status_read, status_write) = pipe()?;
    let (handover, proxy_end) = match proxy {
        Some(_) => {
            let (ours, theirs) = process::socket_pair()
                .map_err(|e| format!("cannot create the proxy's socket pair: {e}"))?;
            (Some(ours), Some(theirs))
        }
        None => (None, None),
    };
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if request.network != Network::Open {
        flags |= libc::CLONE_NEWNET;
    }
    let started = Instant::now();
    let pid = ns::clone(flags).map_err(|e| {
        refusal(format!(
            "the kernel refused to create the command's namespaces: {e}{NAMESPACE_HINT}"
        ))
    })?;
    if pid == 0 {
        drop((go_write, status_read));
        let setup = Init {
            request,
            plan,
            sources,
            shield,
            cgroup,
            address_space,
            bash,
            null,
            sandbox_user,
            proxy: proxy_end,
        };
        init(setup, go_read, status_write);
    }
    drop((go_read, status_write, sources, proxy_end));
    if let (Some(proxy), Some(handover)) = (proxy, handover) {
        // Threads only now, after the clone: the init must be a copy of a single thread.
        let proxy = proxy.clone();
        std::thread::Builder::new()
            .spawn(move || {
                if let Ok(listener) = proxy::receive(&handover) {
                    proxy.serve(listener);
                }
            })
            .map_err(|e| format!("cannot start the proxy: {e}"))?;
    }
    // The helper keeps no copy of the output pipe: it reaches end-of-file when the tree is gone.
    process::dup2(null.as_raw_fd(), 1)?;
    if let Err(e) = ns::write_maps(pid, sandbox_user) {
        kill(pid);
        return Err(refusal(format!(
            "cannot map the command's user into its user namespace: {e}"
        )));
    }
    let _ = File::from(go_write).write_all(b"1");

    let timeout = Duration::from_millis(request.timeout_ms);
    let waited = process::wait(pid, started + timeout);
    kill(pid);
    let mut report = String::new();
    let _ = File::from(status_read).read_to_string(&mut report);
    Ok(match waited {
        Waited::HostGone => None,
        Waited::TimedOut => Some(Status::TimedOut(whole_secs(timeout))),
        Waited::Exited => Some(serde_json::from_str(&report).unwrap_or_else(|_| {
            // Only the kernel kills the init before it reports: for memory, when its cgroup
            // is full (the caller then says so).
            Status::Signaled(super::signal_name(libc::SIGKILL))
        })),
    })
}

/// What may stand in the way of namespaces, for the refusal.
const NAMESPACE_HINT: &str = " (user namespaces may be disabled, see the sysctls \
                              user.max_user_namespaces and kernel.unprivileged_userns_clone, \
                              or refused by a container's seccomp profile, which must allow \
                              clone and unshare with CLONE_NEWUSER)";

/// Kills the init, and with it every process of its PID namespace, and reaps it; the kernel
/// returns the init to its parent only once the namespace is empty.
fn kill(pid: libc::pid_t) {
    // SAFETY: signalling and reaping this helper's own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// The init: pid 1 of the command's namespaces. It starts once the helper writes to `go`
/// (the id maps are in place) and reports on `out`. Never returns.
fn init(setup: Init, go: OwnedFd, out: OwnedFd) -> ! {
    // SAFETY: a plain prctl; the helper is this process's parent and single-threaded.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    // End-of-file instead of the byte: the helper failed or died.
    if File::from(go).read(&mut [0u8]).ok() != Some(1) {
        // SAFETY: exiting without unwinding.
        unsafe { libc::_exit(1) };
    }
    // Out of the command's reach: the init's descriptors (the helper's report and status
    // pipes) and memory, which /proc/1 would otherwise open to a command of the same uid.
    // Only now: the id maps the helper wrote are files of this process that it must be able
    // to open. bash is dumpable again after its exec.
    // SAFETY: a plain prctl.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let status = match start(setup) {
        Ok(bash) => reap(bash),
        Err(why) => Status::Refused(why),
    };
    let json = serde_json::to_vec(&status).expect("a status serializes");
    // SAFETY: writing a buffer to the status pipe, then exiting without unwinding: the
    // kernel kills what is left in the namespace.
    unsafe {
        libc::write(out.as_raw_fd(), json.as_ptr().cast(), json.len());
        libc::_exit(0)
    }
}

/// Joins the cgroup, builds the view, confines the init and starts bash: bash's pid.
fn start(init: Init) -> Result<libc::pid_t, String> {
    let request = init.request;
    if let Some(cgroup) = init.cgroup {
        cgroup.join().map_err(refusal)?;
    }
    // SAFETY: plain system calls; the results are checked.
    unsafe {
        // The command's /proc/self/cgroup starts at its own cgroup.
        if libc::unshare(libc::CLONE_NEWCGROUP) != 0 {
            return Err(refusal(format!(
                "cannot create a cgroup namespace: {}",
                io::Error::last_os_error()
            )));
        }
        let name = b"cordon";
        if libc::sethostname(name.as_ptr().cast(), name.len()) != 0 {
            return Err(refusal(format!(
                "cannot name the UTS namespace: {}",
                io::Error::last_os_error()
            )));
        }
    }
    // While the init holds every capability of the namespace it owns.
    if let Some(handover) = &init.proxy {
        open_proxy(handover)?;
    }
    if init.sandbox_user {
        ns::become_sandbox_user()
            .map_err(|e| refusal(format!("cannot become the sandbox's user: {e}")))?;
    }
    let sources = match init.sources {
        Some(sources) => sources,
        None => Sources::open(request, init.shield, None)?,
    };
    let memory = request.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT);
    view::build(sources, memory).map_err(refusal)?;
    // The init itself counts as one of the tasks.
    init.plan.apply(
        request,
        u64::from(request.max_processes) + 1,
        init.address_space,
    )?;
    let pid = init.bash.spawn(&init.null)?;
    process::dup2(init.null.as_raw_fd(), 1)?;
    Ok(pid)
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

/// Reaps every process of the namespace (orphans come to pid 1) until bash exits: its status.
fn reap(bash: libc::pid_t) -> Status {
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
