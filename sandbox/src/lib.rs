//! cordon's confined shell: `bash -c <command>` run confined, bounded in time, memory and
//! output, and never outliving its call. It is the `shell` capability of cordon's plugins,
//! and depends on nothing of them: a policy in, a [`Completion`] out.
//!
//! Its public face is [`Shell`] (commands under one [`Policy`], by a helper kept between
//! them), [`run`] (one command) and [`run_helper_if_asked`], which the program that runs
//! commands must call first thing in its `main`: commands run under a re-executed copy of that
//! program.
//!
//! # How a command runs
//!
//! A [`Shell`] re-executes the calling program once as a *sandbox helper* ([`SANDBOX_ARG`],
//! entry point [`run_helper_if_asked`]); the helper is freshly exec'd and single-threaded, so
//! namespaces and confinement are never set up in a `pre_exec` of the multi-threaded host,
//! and its environment is empty. The helper (`server.rs`) leaves the host's session, prepares
//! the confinement, finds where memory cgroups can be made and, when cordon runs as root,
//! opens the host trees of the view; then it clones the *zygote* (`zygote.rs`) into new user,
//! PID, mount, IPC, UTS and network namespaces, which builds the view once.
//!
//! Each command gets an *init* (`init.rs`) of its own: pid 1 of new user, PID, mount, IPC and
//! UTS namespaces, cloned by the zygote ahead of the command in the command's memory cgroup,
//! which mounts what is fresh for each command, confines itself and waits. Given its command,
//! it forks `bash --noprofile --norc -c <command>` in its own session, standard input
//! `/dev/null`, standard output and error on one pipe (so they stay in the order written),
//! working directory the workspace, and a fixed environment ([`ENVIRONMENT`]): `PATH`
//! ([`PATH`]), `HOME` ([`HOME`]), `TMPDIR` `/tmp`, `LANG` and `LC_ALL` `C.UTF-8`, `TERM`
//! `dumb`; nothing of the host's environment. It reaps every orphan of the namespace until bash
//! exits, kills what is left, reports bash's status and exits. At the timeout, or when the host
//! stops the command, the zygote kills the init: the kernel then kills every process of the
//! PID namespace at once — background jobs, daemons in their own session, fork chains that
//! `setsid` and regrow. The zygote dies with the helper and the inits with the zygote
//! (parent-death signal, and pid 1 of the namespaces), so a killed helper, or a killed host
//! whose socket to the helper closes, leaves nothing behind.
//!
//! The host drains the output pipe continuously and keeps its first [`Policy::output_cap`]
//! bytes and its last as many (what lies between is counted in [`Completion::omitted_bytes`]):
//! the end of a long output is where the error that stopped it is. If the helper has not reported
//! within [`BACKSTOP_GRACE`] after the timeout, the host gives the command up and tells the
//! helper to kill it.
//!
//! # Confinement (Linux)
//!
//! Unless [`Policy::unconfined`] is set, every part below must be enforced or the call is
//! [`Status::Refused`] with the missing part named (fail closed).
//!
//! **Namespaces.** User, PID, mount, IPC (System V and POSIX message queues of its own), UTS
//! (host name `cordon`), cgroup, and network unless [`Policy::network`] (a namespace with only
//! its loopback, up: the shell's commands', or with an allowlist each command's own). As an ordinary user, the command keeps its uid and gid,
//! mapped to themselves. As root, it runs as uid and gid 0 of its user namespace, which are
//! `nobody` (65534) outside: root's files are not its own, so a root-only file (mode 0600) in
//! a system directory stays unreadable; the workspace and the extra paths are idmapped mounts
//! on which root's files show as the command's own, so it writes them as before and what it
//! creates there belongs to root on disk.
//!
//! **The view** is a fresh root (a tmpfs) in the mount namespace; the old root is detached:
//!
//! - read-only: [`READ_ROOTS`] (symbolic links among them, such as `/bin` → `usr/bin`, kept
//!   as links), [`Policy::extra_read`], `/sys/devices/system/cpu`;
//! - read-write, at their real paths: the workspace and [`Policy::extra_write`];
//! - private: `/tmp` for the shell's commands (a session's lasts for the session, one
//!   command's is its own), and at each call `/dev/shm` and [`HOME`] (tmpfs, together
//!   bounded by the memory limit), `/dev/pts` (a new devpts instance, with `/dev/ptmx`), and a
//!   `/dev` holding only `null`, `zero`, `full`, `random`, `urandom`, `tty` and the usual links;
//! - a fresh `/proc` of the PID namespace (only the command's processes), with `sys`,
//!   `sysrq-trigger`, `irq` and `bus` read-only.
//!
//! Nothing else of the host is there: not `/root`, `/home`, `/run`, `/var`, the host's `/tmp`,
//! the rest of `/sys`, other workspaces.
//!
//! **Inside the namespaces**, as a second layer:
//!
//! - *Files* (Landlock, ABI 6 or later): read, write and execute in the workspace, `/tmp`,
//!   `/dev/shm`, [`HOME`] and [`Policy::extra_write`]; read and execute in [`READ_ROOTS`]
//!   (with the secret files of [`SECRET_PATHS`] left out) and [`Policy::extra_read`]; read
//!   `/proc`; the devices of the view; list any directory.
//! - *Network* (unless [`Policy::network`]): seccomp makes `socket(2)` fail with `EPERM` for
//!   every address family but IPv4 and IPv6, which reach only the namespace's loopback.
//!   Pathname Unix sockets
//!   (`AF_UNIX`) are refused too while the kernel's Landlock cannot confine which socket files
//!   may be connected to (before ABI 9). With ABI 9 `AF_UNIX` is allowed and connecting is
//!   limited to sockets in the writable directories. `socketpair(2)` always works.
//! - *Privileges*: no new privileges (`PR_SET_NO_NEW_PRIVS`); every capability dropped —
//!   effective, permitted, inheritable, ambient and the bounding set — and the securebits
//!   locked, so uid 0 of the namespace cannot regain them through exec. No mode with the
//!   set-user-ID or set-group-ID bit can be given to a file (seccomp on `chmod`, `open` and
//!   `mknod` and their variants; `openat2` reports `ENOSYS`): as root, the command's files in
//!   the workspace belong to root on disk.
//! - *Other processes*: signals only reach processes of the command's own tree (Landlock
//!   signal scope); `ptrace`, `process_vm_*`, `pidfd_getfd` are denied (seccomp), as are new
//!   namespaces, mounts, kernel keyrings, BPF, perf events, `userfaultfd`, System V and POSIX
//!   message-queue IPC, kernel modules; `io_uring` and `clone3` report `ENOSYS` (so C
//!   libraries fall back to `clone`, whose namespace flags are filtered); x32 system calls are
//!   refused.
//! - *Processes*: at most [`Policy::max_processes`] tasks (processes and threads), bound by
//!   `RLIMIT_NPROC`, which the kernel counts per user namespace: it binds the command's tree
//!   alone, root's included.
//! - *Memory*: [`Policy::memory_limit`] for the whole tree, in a memory cgroup (v1 or v2)
//!   created for the call and removed after it; when the kernel kills a process of it for
//!   lack of memory, the call ends [`Status::OutOfMemory`]. Where no memory cgroup can be
//!   created (an ordinary user without a delegated cgroup), each process gets the limit as its
//!   address space (`RLIMIT_AS`) instead. No core dumps.
//!
//! [`Policy::unconfined`] (`--unconfined-bash`) skips all of the above: bash runs in the
//! helper's namespaces, `HOME` and `TMPDIR` in a private directory, and the helper, a child
//! subreaper, kills the process tree it can find; the timeout, the clean environment and the
//! output bound still apply.

mod cgroup;
mod confine;
mod describe;
pub mod egress;
mod exec;
mod helper;
mod index;
mod init;
pub mod layer;
mod memories;
mod ns;
mod process;
pub mod protect;
mod proxy;
mod quarantine;
mod receipt;
mod refused;
mod runner;
mod seccomp;
mod server;
pub mod sets;
pub mod setting;
mod shell;
mod shield;
mod view;
mod wire;
mod zygote;

pub use confine::{NotOptional, OPTIONAL_LAYERS, OptionalLayer};
pub use egress::{Allowlist, Blocked, Network, Pattern};
pub use proxy::PORT as PROXY_PORT;
pub use receipt::{Enforcement, LAYERS, Layer};
pub use refused::{CannotRun, Part};
pub use setting::Setting;
pub use shell::Shell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The first argument that makes a program run as the sandbox helper
/// ([`run_helper_if_asked`]) instead of its own command line.
pub const SANDBOX_ARG: &str = "__sandbox";

/// The default timeout of a command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of the longest timeout a command may ask for ([`Policy::max_timeout`]).
pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// The default number of output bytes kept ([`Policy::output_cap`]).
pub const DEFAULT_OUTPUT_CAP: usize = 1 << 20;
/// The default memory limit of a command's whole process tree ([`Policy::memory_limit`]).
pub const DEFAULT_MEMORY_LIMIT: u64 = 4 << 30;
/// The default number of tasks a command may have at once ([`Policy::max_processes`]).
pub const DEFAULT_MAX_PROCESSES: u32 = 512;
/// How long after the timeout the host waits for the helper before killing it.
pub const BACKSTOP_GRACE: Duration = Duration::from_secs(5);

/// The `PATH` of every command.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The private home directory of a confined command (`HOME`), on a tmpfs of its own.
pub const HOME: &str = "/home/cordon";

/// The environment of every command: these variables and no others. `HOME` is [`HOME`] and
/// `TMPDIR` is `/tmp` (private to the shell); unconfined, both are in a private directory
/// created for the call and removed after it.
pub const ENVIRONMENT: [&str; 6] = ["PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TERM"];

/// The variables of [`ENVIRONMENT`] that [`Policy::env`] cannot replace: the sandbox sets
/// them ([`Policy::path`] extends `PATH`, [`Policy::home`] chooses `HOME`).
pub const RESERVED: [&str; 3] = ["PATH", "HOME", "TMPDIR"];

/// System directories a confined command may read and execute from (those that exist).
pub const READ_ROOTS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];

/// Paths left out of the readable set even below a readable directory: a path is left out when
/// it starts with one of these (`/etc/shadow` also covers `/etc/shadow-`).
pub const SECRET_PATHS: [&str; 7] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/ssh/ssh_host_",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/credstore",
];

/// How commands run: where, for how long, and under which confinement. It travels to the
/// sandbox helper as itself (paths as bytes: they need not be UTF-8).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    /// The working directory of commands, readable and writable.
    #[serde(with = "wire::bytes")]
    pub workspace: PathBuf,
    /// How long a command may run before its whole process tree is killed.
    pub timeout: Duration,
    /// The longest timeout a command may be given instead ([`Shell::run_for`]).
    pub max_timeout: Duration,
    /// Run without the kernel confinement (`--unconfined-bash`).
    pub unconfined: bool,
    /// More directories (or files) commands may read and execute from.
    #[serde(with = "wire::bytes")]
    pub extra_read: Vec<PathBuf>,
    /// More directories (or files) commands may write.
    #[serde(with = "wire::bytes")]
    pub extra_write: Vec<PathBuf>,
    /// What commands may reach on the network: nothing (the default), the hosts of an
    /// allowlist through cordon's proxy, or everything.
    pub network: Network,
    /// The number of output bytes kept from its start, and as many from its end; the rest is
    /// drained and counted, not kept.
    pub output_cap: usize,
    /// The memory limit of a command's whole process tree, in bytes (a memory cgroup; where
    /// none can be created, the address-space limit of each process instead); none:
    /// unlimited.
    pub memory_limit: Option<u64>,
    /// How many tasks (processes and threads) a command may have at once.
    pub max_processes: u32,
    /// The layers of [`OPTIONAL_LAYERS`] commands may run without when the kernel cannot
    /// enforce them (`--sandbox-allow-missing`); the receipt then shows them off.
    pub allow_missing: Vec<OptionalLayer>,
    /// Protected paths ([`protect`]) relaxed for commands (`--unprotect`); relative ones
    /// resolve against the workspace.
    #[serde(with = "wire::bytes")]
    pub unprotect: Vec<PathBuf>,
    /// The directory mounted as [`HOME`], which keeps what commands leave there; none: an
    /// empty private one per call.
    #[serde(with = "wire::bytes")]
    pub home: Option<PathBuf>,
    /// Variables set on top of [`ENVIRONMENT`] (`PATH`, `HOME` and `TMPDIR` cannot be).
    pub env: Vec<(String, String)>,
    /// Directories put before [`PATH`] in commands' `PATH`.
    #[serde(with = "wire::bytes")]
    pub path: Vec<PathBuf>,
    /// Paths that stay out of sight even inside a granted tree (the user's keys and
    /// credentials): an empty directory, or an empty file, stands over each that exists.
    #[serde(with = "wire::bytes")]
    pub hidden: Vec<PathBuf>,
    /// The `PATH` directories of the user's toolchains left out: a command whose output says
    /// it did not find a program that one of them holds gets a note naming it and
    /// `--toolchains`. Only the host's side reads it, and only then: it stays there.
    #[serde(skip)]
    pub ungranted: Vec<PathBuf>,
    /// The socket of the keeper of the workspace's layer ([`layer::Keeper::socket`]): commands
    /// then see the workspace through that layer; none: the workspace itself.
    #[serde(with = "wire::bytes")]
    pub layer: Option<PathBuf>,
    /// The binary re-executed as the sandbox helper; it must call [`run_helper_if_asked`] at
    /// the top of its `main`. Default: `/proc/self/exe` (this very binary, even if
    /// it was replaced on disk since).
    #[serde(with = "wire::bytes")]
    pub helper: PathBuf,
}

impl Policy {
    /// The default policy for commands run in `workspace`.
    pub fn new(workspace: PathBuf) -> Self {
        Policy {
            workspace,
            timeout: DEFAULT_TIMEOUT,
            max_timeout: DEFAULT_MAX_TIMEOUT,
            unconfined: false,
            extra_read: Vec::new(),
            extra_write: Vec::new(),
            network: Network::Off,
            output_cap: DEFAULT_OUTPUT_CAP,
            memory_limit: Some(DEFAULT_MEMORY_LIMIT),
            max_processes: DEFAULT_MAX_PROCESSES,
            allow_missing: Vec::new(),
            unprotect: Vec::new(),
            home: None,
            env: Vec::new(),
            path: Vec::new(),
            hidden: Vec::new(),
            ungranted: Vec::new(),
            layer: None,
            helper: PathBuf::from(helper::SELF),
        }
    }

    /// The timeout in whole seconds, as reported in [`Status::TimedOut`] (rounded up).
    pub fn timeout_secs(&self) -> u32 {
        whole_secs(self.timeout)
    }

    /// The longest timeout a command may be given, in whole seconds (never below the
    /// timeout).
    pub fn max_timeout_secs(&self) -> u32 {
        whole_secs(self.max_timeout.max(self.timeout))
    }
}

/// Whether a command may connect to a host and port off its allowlist: the user's answer.
/// Called on the thread that runs the command ([`run`]), which waits for it; one question at
/// a time per command.
#[derive(Clone)]
pub struct Asker(Arc<AskFn>);

/// The answer to whether `host` (as the command asked for it) may be reached on a port.
type AskFn = dyn Fn(&str, u16) -> bool + Send + Sync;

impl Asker {
    pub fn new(ask: impl Fn(&str, u16) -> bool + Send + Sync + 'static) -> Self {
        Asker(Arc::new(ask))
    }

    /// Whether `host` (as the command asked for it) may be reached on `port`.
    pub fn ask(&self, host: &str, port: u16) -> bool {
        (self.0)(host, port)
    }
}

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asker")
    }
}

/// Stops a running command from any thread: [`Stop::stop`] kills its whole process tree at
/// once, as its timeout would, and [`run`] returns. Clones share the signal, which stays
/// given once given.
#[derive(Clone, Debug)]
pub struct Stop(Arc<OwnedFd>);

impl Stop {
    /// A signal not given yet (an eventfd, which the runner polls beside the output).
    pub fn new() -> std::io::Result<Stop> {
        // SAFETY: plain flags; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        Ok(Stop(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Gives the signal: the command's tree is killed, if it still runs.
    pub fn stop(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to an eventfd this value owns. It cannot
        // fail but by overflow, after 2^64 - 1 signals.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    fn fd(&self) -> i32 {
        self.0.as_raw_fd()
    }
}

/// What the running commands of a call have printed so far, read from any thread: how many
/// bytes, and the newest of them ([`Progress::lines_since`]), for a front door that shows a
/// command's output as it runs. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<Mutex<Printed>>);

/// The output seen so far: its length, and its last [`PROGRESS_TAIL`] bytes.
#[derive(Debug, Default)]
struct Printed {
    bytes: u64,
    tail: std::collections::VecDeque<u8>,
}

/// How many of the newest bytes of output [`Progress`] keeps.
const PROGRESS_TAIL: usize = 16 << 10;

impl Progress {
    /// The bytes of output read so far, kept or not.
    pub fn bytes(&self) -> u64 {
        self.0.lock().map_or(0, |p| p.bytes)
    }

    /// The whole lines printed since the byte `since` (0, then what the last call returned),
    /// as text (invalid UTF-8 replaced), and where the next call starts: at most the newest
    /// 16 KiB of output, a line cut by that bound left out.
    pub fn lines_since(&self, since: u64) -> (Vec<String>, u64) {
        let Ok(printed) = self.0.lock() else {
            return (Vec::new(), since);
        };
        let kept_from = printed.bytes - printed.tail.len() as u64;
        let bytes: Vec<u8> = printed.tail.iter().copied().collect();
        let start = match since.checked_sub(kept_from) {
            Some(start) => (start as usize).min(bytes.len()),
            // The line under way at the bound is not whole.
            None => bytes
                .iter()
                .position(|b| *b == b'\n')
                .map_or(bytes.len(), |n| n + 1),
        };
        let Some(end) = bytes[start..].iter().rposition(|b| *b == b'\n') else {
            return (Vec::new(), kept_from + start as u64);
        };
        let end = start + end;
        let lines = String::from_utf8_lossy(&bytes[start..end])
            .split('\n')
            .map(str::to_string)
            .collect();
        (lines, kept_from + end as u64 + 1)
    }

    fn add(&self, data: &[u8]) {
        if let Ok(mut printed) = self.0.lock() {
            printed.bytes += data.len() as u64;
            let data = &data[data.len().saturating_sub(PROGRESS_TAIL)..];
            let over = (printed.tail.len() + data.len()).saturating_sub(PROGRESS_TAIL);
            printed.tail.drain(..over);
            printed.tail.extend(data);
        }
    }
}

/// What a command printed and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// stdout and stderr merged in the order written, decoded as UTF-8 (invalid sequences
    /// replaced): all of it, or, when it was longer than twice [`Policy::output_cap`] bytes,
    /// its first `output_cap` bytes ([`Completion::tail`] holds the end).
    pub output: String,
    /// The end of the output (at most [`Policy::output_cap`] bytes), after a gap of
    /// [`Completion::omitted_bytes`]; empty when nothing was left out.
    pub tail: String,
    /// How many bytes of output were dropped between [`Completion::output`] and
    /// [`Completion::tail`] (0 when none).
    pub omitted_bytes: u64,
    /// How the command ended.
    pub status: Status,
    /// The layers of confinement it ran under, one per name of [`LAYERS`]; empty when it
    /// could not run.
    pub layers: Vec<Layer>,
    /// The connections the proxy refused, one per `host:port` (their lines end
    /// [`Completion::output`]).
    pub blocked: Vec<Blocked>,
}

impl Completion {
    fn refused(why: CannotRun) -> Self {
        Completion {
            output: String::new(),
            tail: String::new(),
            omitted_bytes: 0,
            status: Status::Refused(why),
            layers: Vec::new(),
            blocked: Vec::new(),
        }
    }
}

/// `duration` in whole seconds, rounded up.
fn whole_secs(duration: Duration) -> u32 {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    u32::try_from(secs).unwrap_or(u32::MAX)
}

/// How a command ended. The helper reports it to the host in this form, too.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Status {
    /// bash exited with this status code.
    Exited(i32),
    /// A signal killed bash; its name, such as `SIGKILL`.
    Signaled(String),
    /// The command ran past the timeout (whole seconds) and its process tree was killed.
    TimedOut(u32),
    /// The command's processes together reached the memory limit (MiB) and the kernel
    /// killed at least one of them.
    OutOfMemory(u64),
    /// The command could not run at all: the part of the sandbox that refused it, and why.
    Refused(CannotRun),
    /// The host stopped the command ([`Hooks::stop`]): its call was cancelled.
    Cancelled,
    /// The helper ended without reporting how the command ended; what it printed on its way
    /// out, if anything.
    HelperLost(String),
}

impl Status {
    /// Why the command has no end of its own, for the user, when it has none: it was refused,
    /// cancelled, or its helper was lost (the `refused` of cordon's shell capability). None
    /// when it exited, was killed by a signal, or was stopped at its timeout or memory limit.
    pub fn refusal(&self) -> Option<String> {
        match self {
            Status::Refused(why) => Some(why.to_string()),
            Status::Cancelled => Some("the command was stopped: its call was cancelled".into()),
            Status::HelperLost(said) => Some(format!(
                "the sandbox helper ended without a report{}{said}",
                if said.is_empty() { "" } else { ": " }
            )),
            Status::Exited(_)
            | Status::Signaled(_)
            | Status::TimedOut(_)
            | Status::OutOfMemory(_) => None,
        }
    }
}

/// What follows one command while it runs, from the host's side.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// Asked, while the command runs, whether it may reach a host that its allowlist does not
    /// name (`--permissions ask`); none: such a connection is refused.
    pub ask: Option<Asker>,
    /// Stops the command from another thread (its call was cancelled); none: only its
    /// timeout does.
    pub stop: Option<Stop>,
    /// Counts the command's output as it is read, for a progress report while it runs.
    pub progress: Option<Progress>,
}

/// Runs `command` with `bash -c` under `policy` and waits for it to end or time out: a
/// [`Shell`] for this one command. A program that runs many commands under one policy keeps a
/// [`Shell`] instead, and pays for the sandbox's set-up once.
///
/// Blocking: call it from a thread that may block (e.g. `spawn_blocking`). The program named
/// by [`Policy::helper`] (by default the calling one) must call [`run_helper_if_asked`].
pub fn run(policy: &Policy, command: &str) -> Completion {
    let mut shell = Shell::new(policy.clone());
    shell.expect_one_command();
    shell.run(command, &Hooks::default())
}

/// Runs this process as the sandbox helper, and never returns, when it was started as one (its
/// first argument is [`SANDBOX_ARG`]); otherwise returns at once. Call it first thing in
/// `main`, before any thread starts: the helper sets up confinement in a single-threaded
/// process. `examples/embed` in the repository is such a program. A program that re-executes
/// itself as the helper (the default [`Policy::helper`]) without having called it first gets
/// its commands refused, rather than its own `main` run with the helper's arguments.
pub fn run_helper_if_asked() {
    helper::run_if_asked();
}

/// The conventional name of signal `sig`, such as `SIGKILL`.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => {
            let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
            return if (min..=max).contains(&sig) {
                format!("SIGRTMIN+{}", sig - min)
            } else {
                format!("signal {sig}")
            };
        }
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_gives_each_whole_line_once_and_only_the_newest() {
        let progress = Progress::default();
        progress.add(b"one\ntw");
        let (lines, next) = progress.lines_since(0);
        assert_eq!((lines, next), (vec!["one".to_string()], 4));
        assert_eq!(progress.lines_since(next), (vec![], 4));
        progress.add(b"o\nthree\n");
        assert_eq!(
            progress.lines_since(next),
            (vec!["two".to_string(), "three".to_string()], 14)
        );
        // Past the bound, the line it cuts is left out.
        progress.add(&[b'x'; PROGRESS_TAIL]);
        progress.add(b"\nlast\n");
        assert_eq!(progress.bytes(), 14 + PROGRESS_TAIL as u64 + 6);
        let (lines, next) = progress.lines_since(14);
        assert_eq!(lines, ["last"]);
        assert_eq!(next, progress.bytes());
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(libc::SIGRTMIN() + 2), "SIGRTMIN+2");
        assert_eq!(signal_name(200), "signal 200");
    }

    /// The test harness never calls `run_helper_if_asked`: re-executed as the helper, it would
    /// run its tests instead. Both ways of running a command refuse, and say what to do.
    #[test]
    fn a_program_without_the_entry_point_is_not_its_own_helper() {
        for unconfined in [false, true] {
            let mut policy = Policy::new(std::env::temp_dir());
            policy.unconfined = unconfined;
            let completion = run(&policy, "true");
            let Status::Refused(why) = &completion.status else {
                panic!("ran without a helper: {:?}", completion.status);
            };
            assert!(
                why.to_string()
                    .contains("did not call cordon_sandbox::run_helper_if_asked()"),
                "{why}"
            );
        }
    }

    #[test]
    fn only_a_command_without_an_end_of_its_own_has_a_refusal() {
        let lost = |said: &str| Status::HelperLost(said.into()).refusal();
        assert_eq!(
            Status::Cancelled.refusal().as_deref(),
            Some("the command was stopped: its call was cancelled")
        );
        assert_eq!(
            lost("").as_deref(),
            Some("the sandbox helper ended without a report")
        );
        assert_eq!(
            lost("killed").as_deref(),
            Some("the sandbox helper ended without a report: killed")
        );
        assert_eq!(
            Status::Refused(CannotRun::failed(Part::Helper, "no"))
                .refusal()
                .as_deref(),
            Some("no")
        );
        assert_eq!(Status::TimedOut(3).refusal(), None);
        assert_eq!(Status::Exited(1).refusal(), None);
    }

    #[test]
    fn timeout_rounds_up() {
        let mut policy = Policy::new("/".into());
        assert_eq!(policy.timeout_secs(), 30);
        policy.timeout = Duration::from_millis(1500);
        assert_eq!(policy.timeout_secs(), 2);
    }
}
