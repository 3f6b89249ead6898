//! The zygote: pid 1 of a shell's PID namespace, in its user, mount, IPC, UTS and network
//! namespaces, holding the view that every command of the shell starts from.
//!
//! It builds the view once ([`view::build`]), opens what the commands' Landlock rules name
//! ([`Rules::open`]), and then waits for the helper. For each command it clones the command's
//! init ([`super::init`]) into new user, PID, mount, IPC and UTS namespaces (and a network
//! namespace of its own when the command has an allowlist): a fresh process view and `/proc`,
//! a private copy of the view, and its own task count for each command. It kills a command's
//! init at the command's timeout or when the helper says so, which kills the command's whole
//! PID namespace, and tells the helper how each command ended.
//!
//! The zygote stays single-threaded, so what its children run after the clone is any code at
//! all. It dies with the helper (parent-death signal); as the init of the shell's PID
//! namespace, it takes every command with it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::confine::{Plan, Rules, refusal};
use super::init::{self, CallInit};
use super::ns;
use super::process;
use super::view::{self, Sources, View};
use super::wire::{self, FromZygote, Setup, ToZygote};
use super::{DEFAULT_MEMORY_LIMIT, Network, Status, whole_secs};

/// What the helper prepared before the clone.
pub(super) struct Zygote {
    pub setup: Setup,
    pub plan: Plan,
    /// The opened host trees when the helper could open them (as the sandbox user); else the
    /// zygote opens them.
    pub sources: Option<Sources>,
    pub sandbox_user: bool,
}

/// A command's init, as the zygote follows it.
struct Running {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// Where the init writes how bash ended, once nothing of the command runs any more
    /// (non-blocking); none once read to its end.
    status: Option<File>,
    deadline: Instant,
    timed_out: bool,
    /// Whether the helper was told how it ended.
    reported: bool,
}

/// Runs the zygote: sets up once the helper writes to `go` (the id maps are in place), then
/// serves the helper on `socket`. Never returns.
pub(super) fn main(mut zygote: Zygote, go: OwnedFd, socket: OwnedFd) -> ! {
    // SAFETY: a plain prctl; the helper is this process's parent and single-threaded.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    // End-of-file instead of the byte: the helper failed or died.
    if File::from(go).read(&mut [0u8]).ok() != Some(1) {
        exit();
    }
    match set_up(&mut zygote) {
        Ok(ready) => {
            let _ = wire::send(socket.as_fd(), &FromZygote::Ready, &[]);
            serve(&zygote, &ready, &socket);
        }
        Err(why) => {
            let _ = wire::send(socket.as_fd(), &FromZygote::Refused { why }, &[]);
        }
    }
    exit()
}

fn exit() -> ! {
    // SAFETY: exiting without unwinding: the kernel kills what is left in the namespace.
    unsafe { libc::_exit(0) }
}

/// What the zygote holds for every command.
struct Ready {
    view: View,
    rules: Rules,
}

/// Takes the sandbox's identity, builds the view and opens the Landlock rules' paths.
fn set_up(zygote: &mut Zygote) -> Result<Ready, String> {
    let setup = &zygote.setup;
    if zygote.sandbox_user {
        ns::become_sandbox_user()
            .map_err(|e| refusal(format!("cannot become the sandbox's user: {e}")))?;
        // A change of user clears the parent-death signal: set it again, then make sure the
        // helper did not die in between.
        // SAFETY: a plain prctl.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    }
    let name = b"cordon";
    // SAFETY: a valid buffer of the length given.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
        return Err(refusal(format!(
            "cannot name the UTS namespace: {}",
            io::Error::last_os_error()
        )));
    }
    let sources = match zygote.sources.take() {
        Some(sources) => sources,
        None => Sources::open(setup, None)?,
    };
    let view = view::build(sources).map_err(refusal)?;
    let rules = Rules::open(setup, zygote.plan.abi()).map_err(refusal)?;
    Ok(Ready { view, rules })
}

/// Starts, follows and kills commands as the helper asks, until it goes away.
fn serve(zygote: &Zygote, ready: &Ready, socket: &OwnedFd) {
    let mut running: HashMap<u64, Running> = HashMap::new();
    // SAFETY: no arguments. The ids of this namespace, which each command's own maps to itself.
    let ids = unsafe { (libc::geteuid(), libc::getegid()) };
    loop {
        let now = Instant::now();
        for call in running.values_mut().filter(|c| !c.timed_out && !c.reported) {
            if now >= call.deadline {
                call.timed_out = true;
                signal(call.pid);
            }
        }
        let next = running
            .values()
            .filter(|c| !c.timed_out && !c.reported)
            .map(|c| c.deadline)
            .min();
        let wait = next.map_or(-1, |deadline| {
            let left = deadline.saturating_duration_since(Instant::now());
            left.as_millis().clamp(1, i32::MAX as u128) as i32
        });
        let mut fds = vec![libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        let ids_running: Vec<u64> = running.keys().copied().collect();
        for id in &ids_running {
            let call = &running[id];
            let status = call.status.as_ref().map_or(-1, |f| f.as_raw_fd());
            fds.extend([call.pidfd.as_raw_fd(), status].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            }));
        }
        // SAFETY: a valid array of pollfd.
        let polled = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if polled < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        for (i, id) in ids_running.iter().enumerate() {
            let (exited, said) = (fds[1 + 2 * i].revents != 0, fds[2 + 2 * i].revents != 0);
            let call = running.get_mut(id).expect("a running call");
            let status = match (exited, said) {
                (_, true) => hear(call, zygote.setup.timeout_ms),
                (true, false) => None,
                (false, false) => continue,
            };
            if exited {
                let call = running.remove(id).expect("a running call");
                let status = status
                    .or_else(|| (!call.reported).then(|| reap(&call, zygote.setup.timeout_ms)));
                // SAFETY: reaping this process's own child, which exited.
                unsafe { libc::waitpid(call.pid, std::ptr::null_mut(), libc::__WALL) };
                if let Some(status) = status
                    && wire::send(socket.as_fd(), &FromZygote::Exited { id: *id, status }, &[])
                        .is_err()
                {
                    return;
                }
            } else if let Some(status) = status
                && wire::send(socket.as_fd(), &FromZygote::Exited { id: *id, status }, &[]).is_err()
            {
                return;
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        match wire::recv::<ToZygote>(socket.as_fd()) {
            Ok(Some((ToZygote::Kill { id }, _))) => {
                if let Some(call) = running.get(&id) {
                    signal(call.pid);
                }
            }
            Ok(Some((ToZygote::Enter, fds))) => {
                let entered = FromZygote::Entered {
                    failed: enter(fds.first()),
                };
                if wire::send(socket.as_fd(), &entered, &[]).is_err() {
                    return;
                }
            }
            Ok(Some((fork @ ToZygote::Fork { .. }, mut fds))) => {
                let ToZygote::Fork { id, then_enter, .. } = fork else {
                    unreachable!()
                };
                let then = then_enter.then(|| fds.pop()).flatten();
                let outcome = match start(zygote, ready, ids, fork, fds, &mut running) {
                    Ok(call) => {
                        running.insert(id, call);
                        // The next command is born in the next cgroup.
                        let failed = then.and_then(|then| enter(Some(&then)));
                        FromZygote::Started { id, failed }
                    }
                    Err(why) => FromZygote::Exited {
                        id,
                        status: Status::Refused(why),
                    },
                };
                if wire::send(socket.as_fd(), &outcome, &[]).is_err() {
                    return;
                }
            }
            // The helper is gone.
            Ok(None) | Err(_) => return,
        }
    }
}

/// Clones the init of the command of `fork`; `fds` are what the helper attached to it.
fn start(
    zygote: &Zygote,
    ready: &Ready,
    ids: (libc::uid_t, libc::gid_t),
    fork: ToZygote,
    fds: Vec<OwnedFd>,
    running: &mut HashMap<u64, Running>,
) -> Result<Running, String> {
    let ToZygote::Fork {
        command,
        protected,
        hidden,
        address_space,
        proxy,
        ..
    } = fork
    else {
        unreachable!("only a fork starts a command")
    };
    let mut fds = fds.into_iter();
    let out = fds.next().ok_or("no output pipe came with the command")?;
    let handover = match proxy {
        true => Some(fds.next().ok_or("no proxy channel came with the command")?),
        false => None,
    };
    let (status_read, status_write) =
        process::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if let Network::Allow(_) = zygote.setup.network {
        flags |= libc::CLONE_NEWNET;
    }
    let started = Instant::now();
    let pid = ns::clone(flags).map_err(|e| {
        refusal(format!(
            "the kernel refused to create the command's namespaces: {e}{}",
            super::server::NAMESPACE_HINT
        ))
    })?;
    if pid == 0 {
        // Nothing of the other commands stays open in this one's init.
        running.clear();
        drop(status_read);
        init::run(CallInit {
            setup: &zygote.setup,
            plan: &zygote.plan,
            rules: &ready.rules,
            ids,
            command,
            protected,
            hidden,
            address_space,
            memory: zygote.setup.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT),
            granted: &ready.view.granted,
            out,
            status: Some(status_write),
            handover,
        });
    }
    drop((out, handover, status_write));
    // SAFETY: a plain system call on this process's own child; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        let e = io::Error::last_os_error();
        signal(pid);
        // SAFETY: reaping the child just signalled.
        unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
        return Err(format!("cannot follow the command's init: {e}"));
    }
    // Read when readable, without waiting for the init's exit.
    // SAFETY: setting a flag on a descriptor this function owns.
    unsafe { libc::fcntl(status_read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    Ok(Running {
        pid,
        // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd as i32) },
        status: Some(File::from(status_read)),
        deadline: started + Duration::from_millis(zygote.setup.timeout_ms),
        timed_out: false,
        reported: false,
    })
}

/// Moves the zygote into the memory cgroup whose task file is `join`: why it could not.
fn enter(join: Option<&OwnedFd>) -> Option<String> {
    let Some(join) = join else {
        return Some("no memory cgroup came to move into".into());
    };
    match rustix::io::write(join, b"0") {
        Ok(_) => None,
        Err(e) => Some(format!("cannot move into a memory cgroup: {e}")),
    }
}

/// Kills a command's init, and with it its PID namespace.
fn signal(pid: libc::pid_t) {
    // SAFETY: signalling this process's own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// What the init of `call` says about how the command ended, read once its status pipe is
/// readable: the status when it says it (nothing of the command runs any more then), none
/// when the pipe ended without it (the init was killed: its exit must be waited for).
fn hear(call: &mut Running, timeout_ms: u64) -> Option<Status> {
    let mut report = Vec::new();
    let _ = call.status.as_ref()?.read_to_end(&mut report);
    call.status = None;
    let status = serde_json::from_slice::<Status>(&report).ok()?;
    call.reported = true;
    Some(match call.timed_out {
        true => Status::TimedOut(whole_secs(Duration::from_millis(timeout_ms))),
        false => status,
    })
}

/// How the command of `call` ended when its init exited without saying so: the kernel killed
/// every process of its namespace when it did.
fn reap(call: &Running, timeout_ms: u64) -> Status {
    if call.timed_out {
        return Status::TimedOut(whole_secs(Duration::from_millis(timeout_ms)));
    }
    // Only the kernel kills the init before it reports: for memory, when its cgroup is full
    // (the helper then says so), or the zygote, when the command was given up.
    Status::Signaled(super::signal_name(libc::SIGKILL))
}
