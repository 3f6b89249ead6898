//! A confined shell: one sandbox helper, started once, that runs every command of a policy.
//!
//! Setting up the sandbox (re-executing the helper, opening the host trees of the view, the
//! user namespace and its id maps, the Landlock and seccomp preparations) costs several times
//! what running `bash -c true` does, so it is done once per [`Shell`]; what must be fresh for
//! each command (its PID namespace and `/proc`, its mount namespace with `/tmp`, `/dev/shm`,
//! `/dev/pts` and the protected paths, its memory cgroup, its Landlock domain) is made per
//! command from the prepared state, by the zygote ([`super::zygote`]).
//!
//! The helper is started on the first command, or earlier by [`Shell::warm`] (a one-shot
//! `cordon call bash` starts it before loading the plugin, so that both happen at once). A
//! helper that died (killed, or gone after refusing to set up) is started again for the next
//! command, as is one whose workspace was replaced since it started. Dropping the [`Shell`]
//! closes the helper's socket, which ends it and everything it ran.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::helper::HelperError;
use super::process::{pipe, socket_pair};
use super::refused::CannotRun;
use super::runner::{self, Pipes};
use super::wire::{self, Setup, ToHelper};
use super::{Completion, Hooks, Network, Policy, helper};

/// Bash commands run under one [`Policy`], by a helper kept between them.
pub struct Shell {
    policy: Policy,
    helper: Mutex<Option<Helper>>,
    calls: AtomicU64,
    /// Whether commands are expected to follow one another.
    many: bool,
}

/// A command sent to the helper: its call id, the host's ends of its pipes, and the asker of
/// the proxy's questions with the write end of the answers.
struct Sent {
    id: u64,
    pipes: Pipes,
    asking: Option<(super::Asker, File)>,
}

/// A running helper and the host's end of its socket.
struct Helper {
    child: Child,
    socket: OwnedFd,
    /// The workspace the helper's view shows, as (device, inode), and the generation of its
    /// layer's mount ([`super::layer::generation`]).
    workspace: Option<((u64, u64), u64)>,
}

impl Shell {
    /// A shell for `policy`; its helper starts with the first command, or with [`Shell::warm`].
    pub fn new(policy: Policy) -> Shell {
        Shell {
            policy,
            helper: Mutex::new(None),
            calls: AtomicU64::new(0),
            many: true,
        }
    }

    /// Tells the shell, before its helper starts, that one command is all it will run (a
    /// one-shot `cordon call`): no init is readied ahead for a command that would follow.
    pub fn expect_one_command(&mut self) {
        self.many = false;
    }

    /// The policy its commands run under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Starts the helper now, without waiting for it to be ready, so that its set-up overlaps
    /// whatever the caller does before its first command. Does nothing for an unconfined
    /// shell, whose commands each get a helper of their own.
    pub fn warm(&self) {
        if self.policy.unconfined {
            return;
        }
        let mut helper = self.helper.lock().unwrap_or_else(|e| e.into_inner());
        if helper.is_none() {
            *helper = self.start().ok();
        }
    }

    /// Runs `command` with `bash -c` and waits for it to end, time out or be stopped.
    ///
    /// Blocking: call it from a thread that may block (e.g. `spawn_blocking`). Commands may
    /// run at once from several threads.
    pub fn run(&self, command: &str, hooks: &Hooks) -> Completion {
        self.run_for(command, self.policy.timeout, hooks)
    }

    /// [`Shell::run`] with a timeout of its own instead of the policy's: refused when it is
    /// longer than [`Policy::max_timeout_secs`] allows.
    pub fn run_for(&self, command: &str, timeout: Duration, hooks: &Hooks) -> Completion {
        let most = self.policy.max_timeout_secs();
        if timeout > Duration::from_secs(most.into()) || timeout.is_zero() {
            return Completion::refused(CannotRun::Timeout {
                asked: timeout,
                most,
            });
        }
        if self.policy.unconfined {
            return runner::once(&self.policy, command, timeout, hooks);
        }
        match self.send(command, timeout, hooks) {
            Ok(sent) => runner::collect(&self.policy, timeout, sent.pipes, sent.asking, |report| {
                self.stop(sent.id);
                if let Some(report) = report {
                    runner::linger(report);
                }
            }),
            Err(why) => Completion::refused(why.into()),
        }
    }

    /// Sends `command` to the helper (started, or started again, as needed).
    fn send(&self, command: &str, timeout: Duration, hooks: &Hooks) -> Result<Sent, HelperError> {
        let (out_read, out_write) = pipe().map_err(HelperError::Pipe)?;
        let (report_read, report_write) = pipe().map_err(HelperError::Pipe)?;
        let asker = match (&hooks.ask, &self.policy.network) {
            (Some(asker), Network::Allow(_)) => Some(asker.clone()),
            _ => None,
        };
        let answers = match asker {
            Some(asker) => Some((asker, pipe().map_err(HelperError::Pipe)?)),
            None => None,
        };
        let id = self.calls.fetch_add(1, Ordering::Relaxed);
        let run = ToHelper::Run {
            id,
            command: command.to_string(),
            ask: answers.is_some(),
            timeout_ms: wire::millis(timeout),
        };
        let mut fds = vec![out_write.as_fd(), report_write.as_fd()];
        if let Some((_, (read, _))) = &answers {
            fds.push(read.as_fd());
        }
        let generation = super::layer::generation(&self.policy);
        let workspace = Some((runner::workspace(&self.policy)?.1, generation));
        let mut helper = self.helper.lock().unwrap_or_else(|e| e.into_inner());
        // A helper that died is started again once; so is one whose view shows a workspace
        // that has been replaced since, or a layer mounted again since.
        let mut tries = 0;
        loop {
            if helper.as_ref().is_none_or(|h| h.workspace != workspace) {
                *helper = Some(self.start()?);
            }
            let socket = &helper.as_ref().expect("a helper").socket;
            match wire::send(socket.as_fd(), &run, &fds) {
                Ok(()) => break,
                Err(_) if tries == 0 => {
                    tries += 1;
                    *helper = None;
                }
                Err(e) => return Err(HelperError::Unreachable(e)),
            }
        }
        drop(helper);
        let pipes = Pipes {
            out: File::from(out_read),
            report: File::from(report_read),
            stop: hooks.stop.clone(),
            progress: hooks.progress.clone(),
        };
        Ok(Sent {
            id,
            pipes,
            asking: answers.map(|(asker, (_, write))| (asker, File::from(write))),
        })
    }

    /// Tells the helper to kill call `id` at once.
    fn stop(&self, id: u64) {
        let helper = self.helper.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(helper) = helper.as_ref() {
            let _ = wire::send(helper.socket.as_fd(), &ToHelper::Stop { id }, &[]);
        }
    }

    /// Starts a helper and sends it the [`Setup`]: it sets up the sandbox while the caller
    /// goes on.
    fn start(&self) -> Result<Helper, HelperError> {
        let (ours, theirs) = socket_pair().map_err(HelperError::SocketPair)?;
        let child = helper::command(&self.policy)?
            .arg(helper::SHELL_ARG)
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            // A helper that panics says why on cordon's own standard error.
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| HelperError::Start {
                helper: self.policy.helper.clone(),
                source,
            })?;
        let helper = Helper {
            child,
            socket: ours,
            workspace: runner::workspace(&self.policy)
                .ok()
                .map(|(_, id)| (id, super::layer::generation(&self.policy))),
        };
        let setup = Setup {
            policy: runner::sent(&self.policy),
            many: self.many,
        };
        wire::send(helper.socket.as_fd(), &setup, &[]).map_err(HelperError::SetUp)?;
        Ok(helper)
    }
}

impl std::fmt::Debug for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shell")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        let helper = self.helper.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut helper) = helper.take() {
            // End-of-file on its socket: the helper kills what still runs and exits.
            drop(helper.socket);
            let _ = helper.child.wait();
        }
    }
}
