//! The zygote: pid 1 of a shell's PID namespace, in its user, mount, IPC, UTS and network
//! namespaces, holding the view that every command of the shell starts from.
//!
//! It builds the view once ([`view::build`]), opens what the commands' Landlock rules name
//! ([`Rules::open`]), and then waits for the helper. Each command gets an init of its own
//! ([`super::init`]) in new user, PID, mount, IPC and UTS namespaces (and a network namespace
//! of its own when commands have an allowlist): a fresh process view and `/proc`, a private
//! copy of the view, and its own task count. The zygote keeps one such init ready ahead, set
//! up and confined, in the memory cgroup of the next command, and covered as the last command
//! was; when the command comes, it mounts the command's covers into that init's mount
//! namespace if they changed, hands it the command, moves into the next command's cgroup and
//! readies the next init while the command runs. In a shell of many commands it also offers
//! the ready init to the helper, which hands it a command with the same covers itself, one
//! hop fewer on the command's way in, and tells the zygote after. It kills
//! a command's init at the command's timeout or when the helper says so, which kills the
//! command's whole PID namespace, and reaps each init, telling the helper when it exited (the
//! helper hears how bash ended from the init itself, on the pipe the zygote hands it).
//!
//! The zygote stays single-threaded, so what its children run after the clone is any code at
//! all. It dies with the helper (parent-death signal); as the init of the shell's PID
//! namespace, it takes every command with it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::cgroup::NotEntered;
use super::confine::{Plan, Rules};
use super::init::{self, Go, Prepared};
use super::ns;
use super::process;
use super::refused::{CannotRun, Part};
use super::view::{self, Sources, View, ViewError};
use super::wire::{self, FromZygote, Setup, ToZygote};
use super::{DEFAULT_MEMORY_LIMIT, Status, whole_secs};

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
    /// (non-blocking): a one-command shell's, read here once the init is gone; the helper holds
    /// the others.
    status: Option<File>,
    deadline: Instant,
    /// The command's timeout, from which `deadline` was set.
    timeout_ms: u64,
    timed_out: bool,
}

impl Running {
    /// The call, its deadline `timeout_ms` from now.
    fn lasting(self, timeout_ms: u64) -> Running {
        Running {
            deadline: Instant::now() + Duration::from_millis(timeout_ms),
            timeout_ms,
            ..self
        }
    }
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
            ServingZygote {
                zygote: &zygote,
                ready: &ready,
                socket: &socket,
                running: HashMap::new(),
                spare: None,
                covers: None,
                calls: 0,
            }
            .serve();
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
    /// The zygote's own mount namespace, to come back to after covering a command's.
    mounts: OwnedFd,
    /// The ids of this namespace, which each command's own maps to itself.
    ids: (libc::uid_t, libc::gid_t),
}

/// A command's init, cloned ahead and readying itself.
struct Spare {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    /// The zygote's end of the init's socket pair: its mount namespace when it is ready, then
    /// the command.
    control: OwnedFd,
    status: File,
    /// The init's mount namespace, once it is ready.
    mounts: Option<OwnedFd>,
    /// Whether it ended without getting ready: its status says why.
    failed: bool,
    /// The generation of covers mounted in it ([`LastCovers`]).
    covered: Option<u64>,
}

/// What the last command's view covered, which the next command's most likely covers too:
/// a ready init is covered so ahead, and again only when its command's generation differs.
struct LastCovers {
    generation: u64,
    protected: Vec<String>,
    hidden: Vec<Vec<u8>>,
}

/// Takes the sandbox's identity, builds the view and opens the Landlock rules' paths.
fn set_up(zygote: &mut Zygote) -> Result<Ready, CannotRun> {
    let setup = &zygote.setup;
    let namespaces = |why: String| CannotRun::unconfinable(Part::Namespaces, why);
    if zygote.sandbox_user {
        ns::become_sandbox_user()
            .map_err(|e| namespaces(format!("cannot become the sandbox's user: {e}")))?;
        // A change of user clears the parent-death signal: set it again. A helper that died
        // in between closed its socket, which ends the zygote once it serves.
        // SAFETY: a plain prctl.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    }
    let name = b"cordon";
    // SAFETY: a valid buffer of the length given.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } != 0 {
        return Err(namespaces(format!(
            "cannot name the UTS namespace: {}",
            io::Error::last_os_error()
        )));
    }
    let sources = match zygote.sources.take() {
        Some(sources) => sources,
        None => Sources::open(&setup.policy, None).map_err(|e| CannotRun::failed(Part::View, e))?,
    };
    // A shell of many commands (a session) keeps one /tmp for them all.
    let memory = setup.policy.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT);
    let tmp = view::tmp_options(memory);
    let view = view::build(sources, setup.many.then_some(tmp.as_str()))
        .map_err(|e| CannotRun::unconfinable(Part::View, e))?;
    let rules = Rules::open(&setup.policy, zygote.plan.abi())
        .map_err(|e| CannotRun::unconfinable(Part::Landlock, e))?;
    let mounts = File::open("/proc/self/ns/mnt")
        .map(OwnedFd::from)
        .map_err(|e| namespaces(format!("cannot open the sandbox's mount namespace: {e}")))?;
    // SAFETY: no arguments.
    let ids = unsafe { (libc::geteuid(), libc::getegid()) };
    Ok(Ready {
        view,
        rules,
        mounts,
        ids,
    })
}

/// The zygote at work.
struct ServingZygote<'a> {
    zygote: &'a Zygote,
    ready: &'a Ready,
    /// The helper's socket.
    socket: &'a OwnedFd,
    running: HashMap<u64, Running>,
    /// The init of the next command, when there is one ready ahead.
    spare: Option<Spare>,
    covers: Option<LastCovers>,
    /// How many calls the helper has sent ([`ToZygote::Fork`] or [`ToZygote::Took`]).
    calls: u64,
}

impl ServingZygote<'_> {
    /// Starts, follows and kills commands as the helper asks, until it goes away.
    fn serve(&mut self) {
        loop {
            let now = Instant::now();
            for call in self.running.values_mut().filter(|c| !c.timed_out) {
                if now >= call.deadline {
                    call.timed_out = true;
                    signal(call.pid);
                }
            }
            let next = (self.running.values())
                .filter(|c| !c.timed_out)
                .map(|c| c.deadline)
                .min();
            let wait = next.map_or(-1, |deadline| {
                let left = deadline.saturating_duration_since(Instant::now());
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            });
            let waiting = (self.spare.as_ref()).filter(|s| s.mounts.is_none() && !s.failed);
            let mut fds = vec![
                pollfd(self.socket.as_raw_fd()),
                pollfd(waiting.map_or(-1, |s| s.control.as_raw_fd())),
            ];
            let ids: Vec<u64> = self.running.keys().copied().collect();
            fds.extend(
                ids.iter()
                    .map(|id| pollfd(self.running[id].pidfd.as_raw_fd())),
            );
            // SAFETY: a valid array of pollfd.
            let polled = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
            if polled < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if fds[1].revents != 0 {
                self.cover_spare();
                if !self.offer() {
                    return;
                }
            }
            for (i, id) in ids.iter().enumerate() {
                if fds[2 + i].revents != 0 && !self.follow(*id) {
                    return;
                }
            }
            if fds[0].revents != 0 && !self.hear() {
                return;
            }
        }
    }

    /// Reaps the init of call `id`, which exited, and tells the helper: false when the helper
    /// is gone.
    ///
    /// In a shell of many commands the helper hears how the command ended from the init
    /// itself, as soon as it is said (nothing of the command runs any more then), before the
    /// init's exit takes its namespaces down; what this says counts only if the init could not
    /// say it. A one-command shell hears it here, once the init is gone.
    fn follow(&mut self, id: u64) -> bool {
        let mut call = self.running.remove(&id).expect("a running call");
        let status = heard(&mut call).unwrap_or_else(|| reap(&call));
        // SAFETY: reaping this process's own child, which exited.
        unsafe { libc::waitpid(call.pid, std::ptr::null_mut(), libc::__WALL) };
        self.send(&FromZygote::Exited { id, status })
    }

    /// Handles what the helper says: false when it is gone.
    fn hear(&mut self) -> bool {
        match wire::recv::<ToZygote>(self.socket.as_fd()) {
            Ok(Some((ToZygote::Kill { id }, _))) => {
                if let Some(call) = self.running.get(&id) {
                    signal(call.pid);
                }
                true
            }
            Ok(Some((ToZygote::Enter, fds))) => {
                let failed = enter(fds.first());
                // The first init is born in the first cgroup.
                self.ready_spare();
                self.send(&FromZygote::Entered { failed })
            }
            Ok(Some((fork @ ToZygote::Fork { .. }, mut fds))) => {
                let ToZygote::Fork {
                    id,
                    then_enter,
                    timeout_ms,
                    ..
                } = fork
                else {
                    unreachable!()
                };
                let then = then_enter.then(|| fds.pop()).flatten();
                let started = self.start(fork, fds).map(|c| c.lasting(timeout_ms));
                self.begun(id, started, then)
            }
            Ok(Some((
                ToZygote::Took {
                    id,
                    then_enter,
                    timeout_ms,
                },
                mut fds,
            ))) => {
                let then = then_enter.then(|| fds.pop()).flatten();
                let started = self.taken().map(|c| c.lasting(timeout_ms));
                self.begun(id, started, then)
            }
            // The helper is gone.
            Ok(None) | Err(_) => false,
        }
    }

    /// Sends `message` to the helper: false when it is gone.
    fn send(&self, message: &FromZygote) -> bool {
        wire::send(self.socket.as_fd(), message, &[]).is_ok()
    }

    /// Follows call `id`, `started` or not, and tells the helper; moves into the cgroup of
    /// the command after, `then`, and readies its init: false when the helper is gone.
    fn begun(
        &mut self,
        id: u64,
        started: Result<Running, CannotRun>,
        then: Option<OwnedFd>,
    ) -> bool {
        self.calls += 1;
        let mut status = None;
        let outcome = match started {
            Ok(mut call) => {
                // Bash's status goes to the helper first-hand, one hop fewer; a one-command
                // shell hears it from here, once the init is gone (see `follow`).
                if self.zygote.setup.many {
                    status = call.status.take();
                }
                self.running.insert(id, call);
                // The next command is born in the next cgroup.
                let failed = then.and_then(|then| enter(Some(&then)));
                FromZygote::Started { id, failed }
            }
            Err(why) => FromZygote::Exited {
                id,
                status: Status::Refused(why),
            },
        };
        let attached: Vec<_> = status.iter().map(AsFd::as_fd).collect();
        let sent = wire::send(self.socket.as_fd(), &outcome, &attached).is_ok();
        // While the command runs, when another may follow.
        if self.zygote.setup.many {
            self.ready_spare();
        }
        sent
    }

    /// Offers the helper the spare init, once it is ready and covered, in a shell of many
    /// commands: false when the helper is gone.
    fn offer(&self) -> bool {
        let Some(spare) = self.spare.as_ref() else {
            return true;
        };
        let (true, Some(generation)) = (self.zygote.setup.many, spare.covered) else {
            return true;
        };
        let offer = FromZygote::Offer {
            serial: self.calls,
            generation,
        };
        let attached = [spare.control.as_fd(), spare.status.as_fd()];
        wire::send(self.socket.as_fd(), &offer, &attached).is_ok()
    }

    /// The spare init, to which the helper handed its command: followed from now on, its
    /// status heard by the helper.
    fn taken(&mut self) -> Result<Running, CannotRun> {
        match self.spare.take() {
            Some(spare) if spare.mounts.is_some() => Ok(self.running(spare, false)),
            spare => {
                self.spare = spare;
                Err(CannotRun::failed(
                    Part::Helper,
                    "the sandbox's zygote had no ready init for the command",
                ))
            }
        }
    }

    /// Takes the mount namespace of the spare init, which says it is ready, and covers it as
    /// the last command's view was. An init that could not ready itself is left as it is: its
    /// command is refused with why.
    fn cover_spare(&mut self) {
        let Some(spare) = self.spare.as_mut() else {
            return;
        };
        let Ok(Some(((), mut namespace))) = wire::recv::<()>(spare.control.as_fd()) else {
            spare.failed = true;
            return;
        };
        spare.mounts = namespace.pop();
        spare.failed = spare.mounts.is_none();
        if let (Some(mounts), Some(covers)) = (&spare.mounts, &self.covers)
            && cover(self.zygote, self.ready, mounts, covers).is_ok()
        {
            spare.covered = Some(covers.generation);
        }
    }

    /// Clones the next command's init, unless one is ready already. A failure waits for the
    /// next command, which is then refused with it.
    fn ready_spare(&mut self) {
        if self.spare.is_none() {
            self.spare = self.clone_init().ok();
        }
    }

    /// Clones a command's init, which readies itself ahead of its command.
    fn clone_init(&mut self) -> Result<Spare, CannotRun> {
        let zygote = self.zygote;
        let (status_read, status_write) = process::pipe()
            .map_err(|e| CannotRun::failed(Part::Helper, format!("cannot create a pipe: {e}")))?;
        let (control, theirs) = process::socket_pair().map_err(|e| {
            CannotRun::failed(Part::Helper, format!("cannot create a socket pair: {e}"))
        })?;
        let mut flags = ns::EVERY_COMMAND;
        if zygote.setup.policy.network.proxied().is_some() {
            flags |= libc::CLONE_NEWNET;
        }
        let pid = ns::clone(flags).map_err(|e| {
            CannotRun::unconfinable(
                Part::Namespaces,
                format!(
                    "the kernel refused to create the command's namespaces: {e}{}",
                    ns::NAMESPACE_HINT
                ),
            )
        })?;
        if pid == 0 {
            // Nothing of the other commands, nor the helper's socket, stays open in this one's
            // init.
            self.running.clear();
            drop((status_read, control));
            // SAFETY: closing this process's copy of the helper's socket, never used here.
            unsafe { libc::close(self.socket.as_raw_fd()) };
            init::run(Prepared {
                setup: &zygote.setup,
                plan: &zygote.plan,
                rules: &self.ready.rules,
                ids: self.ready.ids,
                memory: zygote
                    .setup
                    .policy
                    .memory_limit
                    .unwrap_or(DEFAULT_MEMORY_LIMIT),
                granted: &self.ready.view.granted,
                control: theirs,
                status: status_write,
            });
        }
        drop((theirs, status_write));
        // SAFETY: a plain system call on this process's own child; the result is checked.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if pidfd < 0 {
            let e = io::Error::last_os_error();
            signal(pid);
            // SAFETY: reaping the child just signalled.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) };
            return Err(CannotRun::failed(
                Part::Helper,
                format!("cannot follow the command's init: {e}"),
            ));
        }
        // Read when readable, without waiting for the init's exit.
        // SAFETY: setting a flag on a descriptor this function owns.
        unsafe { libc::fcntl(status_read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        Ok(Spare {
            pid,
            // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd as i32) },
            control,
            status: File::from(status_read),
            mounts: None,
            failed: false,
            covered: None,
        })
    }

    /// Hands the command of `fork` to the ready init; `fds` are what the helper attached to it.
    fn start(&mut self, fork: ToZygote, fds: Vec<OwnedFd>) -> Result<Running, CannotRun> {
        let ToZygote::Fork {
            command,
            protected,
            hidden,
            generation,
            address_space,
            proxy,
            ..
        } = fork
        else {
            unreachable!("only a fork starts a command")
        };
        if self.spare.is_none() {
            self.spare = Some(self.clone_init()?);
        }
        if self
            .spare
            .as_ref()
            .is_some_and(|s| s.mounts.is_none() && !s.failed)
        {
            // Its mount namespace, which only it may open (it is not dumpable).
            self.cover_spare();
        }
        let spare = self.spare.take().expect("a ready init");
        let Some(mounts) = &spare.mounts else {
            // It could not ready itself: it says why on its way out.
            signal(spare.pid);
            return Err(refused(spare));
        };
        let covers = LastCovers {
            generation,
            protected,
            hidden,
        };
        if spare.covered != Some(generation)
            && let Err(why) = cover(self.zygote, self.ready, mounts, &covers)
        {
            signal(spare.pid);
            refused(spare);
            return Err(CannotRun::unconfinable(Part::View, why));
        }
        self.covers = Some(covers);
        let go = Go {
            command,
            address_space,
        };
        let attached: Vec<_> = fds
            .iter()
            .take(1 + usize::from(proxy))
            .map(AsFd::as_fd)
            .collect();
        if let Err(e) = wire::send(spare.control.as_fd(), &go, &attached) {
            signal(spare.pid);
            refused(spare);
            return Err(CannotRun::failed(
                Part::Helper,
                format!("cannot hand the command to its init: {e}"),
            ));
        }
        Ok(self.running(spare, true))
    }

    /// The init `spare`, given its command now, as the zygote follows it; with its status
    /// pipe when `heard_here` (else the helper holds it).
    fn running(&self, spare: Spare, heard_here: bool) -> Running {
        Running {
            pid: spare.pid,
            pidfd: spare.pidfd,
            status: heard_here.then_some(spare.status),
            deadline: Instant::now() + self.zygote.setup.policy.timeout,
            timeout_ms: wire::millis(self.zygote.setup.policy.timeout),
            timed_out: false,
        }
    }
}

/// Mounts `covers` into an init's mount namespace `mounts`.
fn cover(
    zygote: &Zygote,
    ready: &Ready,
    mounts: &OwnedFd,
    covers: &LastCovers,
) -> Result<(), ViewError> {
    let view = view::ToCover {
        workspace: &zygote.setup.policy.workspace,
        protected: &covers.protected,
        hidden: &covers.hidden,
    };
    within(mounts, &ready.mounts, || view::cover(&view))
}

/// Runs `cover` in the mount namespace `theirs`, then comes back to `ours`: the zygote may
/// mount into the namespaces of the inits it cloned, whose user namespaces its own owns.
fn within(
    theirs: &OwnedFd,
    ours: &OwnedFd,
    cover: impl FnOnce() -> Result<(), ViewError>,
) -> Result<(), ViewError> {
    // SAFETY: entering a mount namespace by its descriptor; the zygote is single-threaded.
    if unsafe { libc::setns(theirs.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
        return Err(ViewError::Enter(io::Error::last_os_error()));
    }
    let covered = cover();
    // SAFETY: as above. Staying in a command's namespace would put the next ones wrong.
    if unsafe { libc::setns(ours.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
        exit();
    }
    covered
}

/// Why an init that could not ready itself, or was given up, did not run its command: what it
/// says on its status pipe once it has exited, which this waits for.
fn refused(spare: Spare) -> CannotRun {
    // SAFETY: reaping this process's own child.
    unsafe { libc::waitpid(spare.pid, std::ptr::null_mut(), libc::__WALL) };
    let mut report = Vec::new();
    let _ = (&spare.status).read_to_end(&mut report);
    match serde_json::from_slice::<Status>(&report) {
        Ok(Status::Refused(why)) => why,
        _ => CannotRun::failed(
            Part::Helper,
            "the command's init ended before its command came",
        ),
    }
}

fn pollfd(fd: i32) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Moves the zygote into the memory cgroup whose task file is `join`: why it could not.
fn enter(join: Option<&OwnedFd>) -> Option<NotEntered> {
    let Some(join) = join else {
        return Some(NotEntered::NoCgroup);
    };
    match rustix::io::write(join, b"0") {
        Ok(_) => None,
        Err(e) => Some(NotEntered::Write(e.to_string())),
    }
}

/// Kills a command's init, and with it its PID namespace.
fn signal(pid: libc::pid_t) {
    // SAFETY: signalling this process's own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// What the init of `call` said about how the command ended, read once it exited: none when
/// it did not say it (it was killed), or when the helper holds its pipe.
fn heard(call: &mut Running) -> Option<Status> {
    let mut report = Vec::new();
    let _ = call.status.as_ref()?.read_to_end(&mut report);
    call.status = None;
    let status = serde_json::from_slice::<Status>(&report).ok()?;
    Some(match call.timed_out {
        true => Status::TimedOut(whole_secs(Duration::from_millis(call.timeout_ms))),
        false => status,
    })
}

/// How the command of `call` ended when its init exited without saying so: the kernel killed
/// every process of its namespace when it did.
fn reap(call: &Running) -> Status {
    if call.timed_out {
        return Status::TimedOut(whole_secs(Duration::from_millis(call.timeout_ms)));
    }
    // Only the kernel kills the init before it reports: for memory, when its cgroup is full
    // (the helper then says so), or the zygote, when the command was given up.
    Status::Signaled(super::signal_name(libc::SIGKILL))
}
