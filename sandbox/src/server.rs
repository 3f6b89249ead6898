//! A shell's helper: it sets up the sandbox once, then serves the host's commands until the
//! host closes its socket (descriptor 0).
//!
//! Set-up: the confinement is prepared ([`confine::prepare`], which refuses what the kernel
//! cannot enforce), the host trees of the view are opened (here when cordon runs as root,
//! which alone may give them an id map), and the *zygote* is cloned into new user, PID,
//! mount, IPC, UTS and (unless the network is open) network namespaces ([`super::zygote`]).
//! The zygote builds the view and waits for commands; it starts each one as the init of new
//! namespaces of its own.
//!
//! Each command then costs what must be fresh for it, and no more. The helper raises the
//! shield over the workspace's protected paths ([`Shield`]), starts the command's proxy when
//! it has an allowlist, and asks the zygote for it. Its memory cgroup is ready before it is
//! asked for ([`Memories`]). When the command's init says how bash ended (on a
//! pipe the zygote hands over; in a one-command shell, through the zygote), or the zygote
//! says the init exited without saying it, the helper reads whether the kernel killed the
//! command for lack of memory, judges what the command made of the protected paths outside
//! its covers and writes the report on the command's report pipe; the command's cgroup serves
//! a later command once the zygote says the init is gone. While commands run, a protected name
//! made in the workspace is judged as soon as the helper hears of it (the shield's inotify
//! instance is among what it polls), so that it is set aside within moments, not at the end
//! of a long command.
//!
//! A command is killed when the host says so ([`ToHelper::Stop`]), when its host end of the
//! report pipe closes, and at its timeout (by the zygote). When the host goes away the helper
//! kills the zygote, and with it every command; a helper killed outright takes the zygote
//! with it (the zygote's parent-death signal).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::cgroup::Cgroup;
use super::confine::{self, refusal};
use super::init::Go;
use super::memories::Memories;
use super::ns::{self, NAMESPACE_HINT};
use super::process;
use super::proxy::{self, Proxy};
use super::receipt::{self, Memory};
use super::shield::{Raised, Shield};
use super::view::Sources;
use super::wire::{self, FromZygote, Report, Setup, ToHelper, ToZygote};
use super::zygote::{self, Zygote};
use super::{DEFAULT_MEMORY_LIMIT, Layer, Network, Policy, Status};

/// Serves the host on descriptor 0 and exits.
pub(super) fn serve() -> ! {
    // SAFETY: descriptor 0 is the host's socket, which this function owns from now on.
    let host = unsafe { OwnedFd::from_raw_fd(0) };
    // SAFETY: no arguments. Out of the host's session and process group: terminal signals
    // meant for the host do not reach the helper, which must outlive the host long enough to
    // clean up.
    unsafe { libc::setsid() };
    let setup = match wire::recv::<Setup>(host.as_fd()) {
        Ok(Some((setup, _))) => setup,
        _ => std::process::exit(1),
    };
    match Server::start(setup, host.as_raw_fd()) {
        Ok(mut server) => server.serve(&host),
        Err(why) => refuse(&host, &why),
    }
    std::process::exit(0)
}

/// Answers the commands waiting on `host` with the refusal `why`, then leaves: the next
/// command starts a helper again, which tries again.
fn refuse(host: &OwnedFd, why: &str) {
    loop {
        let Ok(Some((message, fds))) = wire::recv::<ToHelper>(host.as_fd()) else {
            return;
        };
        if let (ToHelper::Run { .. }, Some(report)) = (message, fds.into_iter().nth(1)) {
            let _ = File::from(report)
                .write_all(wire::report_line(&Report::refused(why.to_string())).as_bytes());
        }
        let mut fd = libc::pollfd {
            fd: host.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; no wait.
        if unsafe { libc::poll(&mut fd, 1, 0) } <= 0 || fd.revents & libc::POLLIN == 0 {
            return;
        }
    }
}

/// The helper of a shell whose sandbox is set up.
struct Server {
    setup: Setup,
    zygote: libc::pid_t,
    socket: OwnedFd,
    /// The layers every command runs under, but for its memory.
    layers: Vec<Layer>,
    /// The trees commands may be granted, canonical: a hidden path counts only inside one.
    granted: Vec<PathBuf>,
    memory: Memories,
    calls: HashMap<u64, Call>,
    /// The workspace's protected paths.
    /// None over a layer: what commands make is judged when the layer is accepted, so no
    /// call pays for a scan or a watch of the workspace.
    shield: Option<Shield>,
    /// The notices of what was set aside while commands ran, for the next command to end.
    judged: Vec<String>,
    covers: Covers,
    /// The ready init the zygote offered, when the offer still holds.
    offered: Option<Offered>,
    /// How many calls the zygote has been sent ([`ToZygote::Fork`] or [`ToZygote::Took`]).
    sent: u64,
}

/// A ready init offered by the zygote ([`FromZygote::Offer`]).
struct Offered {
    serial: u64,
    generation: u64,
    /// The zygote's end of the init's socket pair, on which the init takes its command.
    control: OwnedFd,
    /// Where the init says how bash ended.
    status: File,
}

/// The generations of what commands' views cover: the protected paths, as the shield counts
/// them, and the hidden paths that exist.
#[derive(Default)]
struct Covers {
    shield: u64,
    hidden: Vec<Vec<u8>>,
    generation: u64,
}

impl Covers {
    /// The generation of covering the shield's generation `shield` and `hidden`: a new one
    /// when either changed since the command before.
    fn generation(&mut self, shield: u64, hidden: &[Vec<u8>]) -> u64 {
        if shield != self.shield || hidden != self.hidden {
            self.shield = shield;
            self.hidden = hidden.to_vec();
            self.generation += 1;
        }
        self.generation
    }
}

/// A command the zygote runs.
struct Call {
    report: Arc<Mutex<File>>,
    /// The protected paths it saw read-only.
    protected: Vec<String>,
    /// The shield's count of events when it started ([`Shield::judge`]).
    events: Option<u64>,
    cgroup: Option<Cgroup>,
    proxy: Option<Arc<Proxy>>,
    memory: Memory,
    /// Whether the zygote was told to kill it.
    killed: bool,
    /// Where its init says how bash ended (non-blocking), from the zygote; none once heard,
    /// and in a one-command shell, whose zygote hears it.
    status: Option<File>,
}

impl Call {
    /// How bash ended, if the init said so on its pipe; none if it has not (yet), or ended
    /// without saying it (killed: the zygote then says how it ended). The pipe is let go of
    /// once it said anything or ended.
    fn said(&mut self) -> Option<Status> {
        let mut said = [0u8; 4096];
        let read = rustix::io::read(self.status.as_ref()?, &mut said);
        match read {
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => None,
            Ok(n) => {
                self.status = None;
                serde_json::from_slice(&said[..n]).ok()
            }
            Err(_) => {
                self.status = None;
                None
            }
        }
    }
}

impl Server {
    /// Sets up the sandbox of `setup`: the zygote, ready for commands. `host` is the host's
    /// socket, which the zygote must not keep open.
    fn start(setup: Setup, host: i32) -> Result<Server, String> {
        // The inits of a zygote that dies come to the helper, which can then tell when they
        // are gone ([`Server::end`]).
        // SAFETY: a plain prctl.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
            return Err(format!(
                "cannot become a child subreaper: {}",
                io::Error::last_os_error()
            ));
        }
        let plan = confine::prepare(&setup.policy)?;
        let sandbox_user = ns::runs_as_sandbox_user();
        let sources = if sandbox_user {
            let userns = ns::sandbox_userns().map_err(|e| {
                refusal(format!(
                    "cannot create the user namespace of the sandbox's user: {e}{NAMESPACE_HINT}"
                ))
            })?;
            Some(Sources::open(&setup.policy, Some(&userns))?)
        } else {
            None
        };
        let granted = granted(&setup.policy)?;
        let shield = match setup.policy.layer {
            Some(_) => None,
            None => Some(Shield::new(&setup.policy)?),
        };
        let (ours, theirs) =
            process::socket_pair().map_err(|e| format!("cannot create a socket pair: {e}"))?;
        let (go_read, go_write) =
            process::pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
        let mut flags = ns::EVERY_COMMAND;
        if setup.policy.network != Network::Open {
            flags |= libc::CLONE_NEWNET;
        }
        let layers = receipt::confined(&setup.policy, sandbox_user, &plan);
        let pid = ns::clone(flags).map_err(|e| {
            refusal(format!(
                "the kernel refused to create the command's namespaces: {e}{NAMESPACE_HINT}"
            ))
        })?;
        if pid == 0 {
            // Only the zygote's own ends stay open in it: the host's socket must close when
            // the helper does.
            drop((ours, go_write));
            // SAFETY: closing the zygote's copy of the host's socket, which it never uses.
            unsafe { libc::close(host) };
            let zygote = Zygote {
                setup,
                plan,
                sources,
                sandbox_user,
            };
            zygote::main(zygote, go_read, theirs);
        }
        drop((go_read, theirs, sources));
        let kill = |why: String| {
            kill(pid);
            why
        };
        ns::write_maps(pid, sandbox_user).map_err(|e| {
            kill(refusal(format!(
                "cannot map the command's user into its user namespace: {e}"
            )))
        })?;
        let _ = File::from(go_write).write_all(b"1");
        match wire::recv::<FromZygote>(ours.as_fd()) {
            Ok(Some((FromZygote::Ready, _))) => {}
            Ok(Some((FromZygote::Refused { why }, _))) => return Err(kill(why)),
            _ => return Err(kill("the sandbox's zygote ended while setting up".into())),
        }
        let memory = Memories::start(setup.policy.memory_limit, &ours);
        Ok(Server {
            setup,
            zygote: pid,
            socket: ours,
            layers,
            granted,
            memory,
            calls: HashMap::new(),
            shield,
            judged: Vec::new(),
            covers: Covers::default(),
            offered: None,
            sent: 0,
        })
    }

    /// Serves the host until it closes its socket.
    fn serve(&mut self, host: &OwnedFd) {
        loop {
            let ids: Vec<u64> = self.calls.keys().copied().collect();
            let mut fds = vec![
                pollfd(host.as_raw_fd(), libc::POLLIN),
                pollfd(self.socket.as_raw_fd(), libc::POLLIN),
            ];
            for id in &ids {
                let call = &self.calls[id];
                // Only its errors: the host closed its end, it gave the command up.
                let report = match call.killed {
                    true => -1,
                    false => call.report.lock().map_or(-1, |f| f.as_raw_fd()),
                };
                let status = call.status.as_ref().map_or(-1, |f| f.as_raw_fd());
                fds.extend([pollfd(report, 0), pollfd(status, libc::POLLIN)]);
            }
            // What is made while commands run is judged as it is made.
            let watch = match ids.is_empty() {
                true => None,
                false => (self.shield.as_ref())
                    .and_then(Shield::watch)
                    .map(|fd| fd.as_raw_fd()),
            };
            fds.push(pollfd(watch.unwrap_or(-1), libc::POLLIN));
            // SAFETY: a valid array of pollfd.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if ready < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            if fds[1].revents != 0 && !self.hear_zygote() {
                break;
            }
            for (i, id) in ids.iter().enumerate() {
                if fds[2 + 2 * i].revents & (libc::POLLERR | libc::POLLHUP) != 0 {
                    self.kill(*id);
                }
                if fds[3 + 2 * i].revents != 0
                    && let Some(status) = self.calls.get_mut(id).and_then(Call::said)
                {
                    self.finish(*id, status);
                }
            }
            // Heard on the inotify instance, or read from it meanwhile (by a raise).
            if !self.calls.is_empty()
                && let Some(shield) = self.shield.as_mut()
                && shield.touched()
            {
                let covered: Vec<String> = (self.calls.values())
                    .flat_map(|call| call.protected.iter().cloned())
                    .collect();
                let judged = shield.judge_made(&covered);
                self.judged.extend(judged);
            }
            if fds[0].revents != 0 {
                match wire::recv::<ToHelper>(host.as_fd()) {
                    Ok(Some((
                        ToHelper::Run {
                            id,
                            command,
                            ask,
                            timeout_ms,
                        },
                        fds,
                    ))) => {
                        self.fork(id, command, timeout_ms, fds, ask);
                    }
                    Ok(Some((ToHelper::Stop { id }, _))) => self.kill(id),
                    // The host is gone: so is everything it started.
                    Ok(None) | Err(_) => break,
                }
            }
        }
        self.end("the host went away");
    }

    /// Asks the zygote to start the command of call `id`, to be killed after `timeout_ms`;
    /// `fds` are what the host attached.
    fn fork(&mut self, id: u64, command: String, timeout_ms: u64, fds: Vec<OwnedFd>, ask: bool) {
        let mut fds = fds.into_iter();
        let (Some(out), Some(report)) = (fds.next(), fds.next()) else {
            return;
        };
        let answers = fds.next().filter(|_| ask).map(File::from);
        let report = Arc::new(Mutex::new(File::from(report)));
        let refuse = |why: String| {
            write_report(&report, &Report::refused(why));
        };
        let raised = match self.shield.as_mut().map(Shield::raise) {
            Some(Ok(raised)) => raised,
            Some(Err(why)) => return refuse(why),
            None => Raised::default(),
        };
        let hidden = self.hidden();
        let (proxy, handover) = match self.setup.policy.network.proxied() {
            Some(allowlist) => {
                let proxy = Proxy::new(allowlist, answers, report.clone());
                match start_proxy(&proxy) {
                    Ok(theirs) => (Some(proxy), Some(theirs)),
                    Err(why) => return refuse(why),
                }
            }
            None => (None, None),
        };
        let memory = self.memory.of_next();
        let address_space = match &memory {
            Memory::PerProcess(bytes, _) => Some(*bytes),
            _ => None,
        };
        let then = self.memory.make();
        let generation = self.covers.generation(raised.generation, &hidden);
        let mut attached = vec![out.as_fd()];
        attached.extend(handover.as_ref().map(|h| h.as_fd()));
        let go = Go {
            command,
            address_space,
        };
        let status = self.hand_over(&go, &attached, generation);
        let then_enter = then.is_some();
        let (message, mut attached) = match status {
            Some(_) => (
                ToZygote::Took {
                    id,
                    then_enter,
                    timeout_ms,
                },
                Vec::new(),
            ),
            None => {
                let fork = ToZygote::Fork {
                    id,
                    command: go.command,
                    protected: raised.protected.clone(),
                    generation,
                    hidden,
                    address_space,
                    proxy: handover.is_some(),
                    then_enter,
                    timeout_ms,
                };
                (fork, attached)
            }
        };
        attached.extend(then.as_ref().map(Cgroup::join));
        self.sent += 1;
        if let Err(e) = wire::send(self.socket.as_fd(), &message, &attached) {
            if let Some(proxy) = &proxy {
                proxy.close();
            }
            if let Some(then) = then {
                then.remove();
            }
            return refuse(format!("cannot reach the sandbox's zygote: {e}"));
        }
        // Without a next one, the zygote stays in its cgroup: not this command's to remove.
        let cgroup = then.and_then(|then| self.memory.current.replace(then));
        // While the command starts.
        self.memory.replenish();
        self.calls.insert(
            id,
            Call {
                report,
                protected: raised.protected,
                events: raised.events,
                cgroup,
                proxy,
                memory,
                killed: false,
                status,
            },
        );
    }

    /// Hands `go` (with `attached`) straight to the init the zygote offered, when the offer
    /// still holds and that init is covered for `generation`: the pipe it says how bash ended
    /// on.
    fn hand_over(&mut self, go: &Go, attached: &[BorrowedFd], generation: u64) -> Option<File> {
        let offered = self.offered.take()?;
        let holds = offered.serial == self.sent && offered.generation == generation;
        let handed = holds && wire::send(offered.control.as_fd(), go, attached).is_ok();
        handed.then_some(offered.status)
    }

    /// Handles what the zygote says; false when it is gone.
    fn hear_zygote(&mut self) -> bool {
        match wire::recv::<FromZygote>(self.socket.as_fd()) {
            Ok(Some((FromZygote::Started { id, failed }, mut fds))) => {
                if let (Some(call), Some(status)) = (self.calls.get_mut(&id), fds.pop()) {
                    call.status = Some(File::from(status));
                }
                if let Some(why) = failed {
                    // The zygote is still in the command's cgroup, which is then not removed
                    // with it; the one it could not move into goes.
                    let held = self.calls.get_mut(&id).and_then(|c| c.cgroup.take());
                    if let Some(unused) = std::mem::replace(&mut self.memory.current, held) {
                        unused.remove();
                    }
                    self.memory.missing = Some(why);
                }
                true
            }
            Ok(Some((FromZygote::Offer { serial, generation }, fds))) => {
                let mut fds = fds.into_iter();
                if let (Some(control), Some(status)) = (fds.next(), fds.next()) {
                    self.offered = Some(Offered {
                        serial,
                        generation,
                        control,
                        status: File::from(status),
                    });
                }
                true
            }
            Ok(Some((FromZygote::Exited { id, status }, _))) => {
                // What the init said, if it did, comes first: it may still be in its pipe.
                let said = self.calls.get_mut(&id).and_then(Call::said);
                self.finish(id, said.unwrap_or(status));
                self.memory.reaped(id);
                true
            }
            Ok(Some(_)) => true,
            Ok(None) | Err(_) => false,
        }
    }

    /// Reports the end of call `id`; its cgroup goes once its init is reaped.
    fn finish(&mut self, id: u64, status: Status) {
        let Some(mut call) = self.calls.remove(&id) else {
            return;
        };
        let oom = call.cgroup.as_mut().map(Cgroup::oom_killed);
        let status = match status {
            Status::Refused(why) => Status::Refused(why),
            _ if oom == Some(true) => Status::OutOfMemory(
                self.setup
                    .policy
                    .memory_limit
                    .unwrap_or(DEFAULT_MEMORY_LIMIT)
                    >> 20,
            ),
            status => status,
        };
        let blocked = call.proxy.map(|proxy| {
            proxy.close();
            proxy.blocked()
        });
        let mut layers = self.layers.clone();
        receipt::set_memory(&mut layers, &call.memory);
        // Every process of the command is gone (its init reaped them all before it said how
        // bash ended, or the kernel killed them with it).
        let mut quarantined = std::mem::take(&mut self.judged);
        if let Some(shield) = self.shield.as_mut() {
            quarantined.extend(shield.judge(&call.protected, call.events));
        }
        let report = Report {
            status,
            layers,
            protected: call.protected,
            blocked: blocked.unwrap_or_default(),
            quarantined,
        };
        write_report(&call.report, &report);
        if let Some(cgroup) = call.cgroup {
            self.memory.over(id, cgroup);
        }
    }

    /// Kills the command of call `id`, if it runs.
    fn kill(&mut self, id: u64) {
        if let Some(call) = self.calls.get_mut(&id)
            && !call.killed
        {
            call.killed = true;
            let _ = wire::send(self.socket.as_fd(), &ToZygote::Kill { id }, &[]);
        }
    }

    /// The hidden paths of the set-up that exist now inside a granted tree.
    fn hidden(&self) -> Vec<Vec<u8>> {
        self.setup
            .policy
            .hidden
            .iter()
            .filter(|path| {
                self.granted.iter().any(|tree| path.starts_with(tree))
                    && std::fs::symlink_metadata(path).is_ok()
            })
            .map(|path| path.as_os_str().as_bytes().to_vec())
            .collect()
    }

    /// Kills the zygote, and with it every command, and reports each one as `why`.
    fn end(&mut self, why: &str) {
        kill(self.zygote);
        if !self.calls.is_empty() {
            // The inits die with the zygote, and every process of a command with its init:
            // once they are reaped, what the commands made is judged (no one hears it).
            reap_orphans(Instant::now() + ORPHANS_GRACE);
            if let Some(shield) = self.shield.as_mut() {
                for call in self.calls.values() {
                    shield.judge(&call.protected, None);
                }
            }
        }
        for (_, call) in self.calls.drain() {
            if let Some(proxy) = &call.proxy {
                proxy.close();
            }
            if let Some(cgroup) = call.cgroup {
                cgroup.remove();
            }
            write_report(&call.report, &Report::refused(why.to_string()));
        }
        self.memory.remove_all();
    }
}

/// Starts the proxy of one command: a thread that receives the listening socket the
/// command's init hands over, and serves it. The end of the socket pair to give the init.
fn start_proxy(proxy: &Arc<Proxy>) -> Result<OwnedFd, String> {
    let (ours, theirs) = process::socket_pair()
        .map_err(|e| format!("cannot create the proxy's socket pair: {e}"))?;
    let proxy = proxy.clone();
    std::thread::Builder::new()
        .spawn(move || {
            if let Ok(listener) = proxy::receive(&ours) {
                proxy.serve(listener);
            }
        })
        .map_err(|e| format!("cannot start the proxy: {e}"))?;
    Ok(theirs)
}

/// Writes `report` as the last line of a command's report pipe.
fn write_report(report: &Mutex<File>, line: &Report) {
    if let Ok(mut file) = report.lock() {
        let _ = file.write_all(wire::report_line(line).as_bytes());
    }
}

/// The workspace and the extra paths of `policy`, canonical.
fn granted(policy: &Policy) -> Result<Vec<PathBuf>, String> {
    let mut trees = vec![policy.workspace.clone()];
    for (paths, what) in [
        (&policy.extra_read, "readable"),
        (&policy.extra_write, "writable"),
    ] {
        for path in paths {
            trees.push(path.canonicalize().map_err(|e| {
                format!("the extra {what} path {} is unusable: {e}", path.display())
            })?);
        }
    }
    Ok(trees)
}

/// How long the helper waits, when it ends, for the inits of commands still running to be
/// gone.
const ORPHANS_GRACE: Duration = Duration::from_secs(2);

/// Reaps the children that came to the helper (it is their subreaper: the inits of a killed
/// zygote) until none is left or `deadline` passes.
fn reap_orphans(deadline: Instant) {
    // SAFETY: reaping this helper's own children, without waiting.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::__WALL | libc::WNOHANG) } >= 0
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kills the zygote, and with it every process of its namespaces, and reaps it.
fn kill(pid: libc::pid_t) {
    // SAFETY: signalling and reaping this helper's own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        while libc::waitpid(pid, std::ptr::null_mut(), libc::__WALL) < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

fn pollfd(fd: i32, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}
