//! The `shell` capability: the WIT face of [`crate::sandbox`], which runs the command confined.

use std::time::Duration;

use crate::bindings::cordon::tool::shell::{Completion, Host, Status, TimeoutBounds};
use crate::output;
use crate::sandbox;
use crate::state::State;

impl Host for State {
    async fn run(&mut self, command: String) -> Completion {
        self.run_shell(&command, None)
    }

    async fn run_for(&mut self, command: String, timeout: u32) -> Completion {
        self.run_shell(&command, Some(Duration::from_secs(timeout.into())))
    }

    async fn timeouts(&mut self) -> TimeoutBounds {
        match &self.grants.shell {
            Some(shell) => TimeoutBounds {
                usual: shell.policy().timeout_secs(),
                most: shell.policy().max_timeout_secs(),
            },
            None => TimeoutBounds { usual: 0, most: 0 },
        }
    }

    async fn describe(&mut self) -> String {
        (self.grants.shell.as_ref()).map_or_else(String::new, |shell| shell.policy().describe())
    }
}

impl State {
    /// Runs `command` in the granted shell, for `timeout` when given (else the policy's).
    fn run_shell(&mut self, command: &str, timeout: Option<Duration>) -> Completion {
        let Some(shell) = self.grants.shell.clone() else {
            return refused("the shell capability is not granted to this plugin".into());
        };
        let hooks = sandbox::Hooks {
            ask: self.watch.asker.clone(),
            stop: self.stop.clone(),
            progress: self.watch.progress.clone(),
        };
        // The command holds this thread until it ends: a worker runs one call, and the call's
        // caller stops the command when it gives the call up (see `Plugin::call`).
        let timeout = timeout.unwrap_or(shell.policy().timeout);
        let done = shell.run_for(command, timeout, &hooks);
        self.sandbox = done.layers;
        self.exit = Some(done.status.clone());
        self.blocked.extend(done.blocked);
        // Cut here, where the gap between the two ends is known: the plugin gets one text.
        let (output, omitted_bytes) = output::ends(
            &done.output,
            &done.tail,
            done.omitted_bytes,
            self.max_output,
        );
        Completion {
            output,
            omitted_bytes,
            status: match done.status {
                sandbox::Status::Exited(code) => Status::Exited(code),
                sandbox::Status::Signaled(name) => Status::Signaled(name),
                sandbox::Status::TimedOut(secs) => Status::TimedOut(secs),
                sandbox::Status::OutOfMemory(mib) => Status::OutOfMemory(mib),
                // The capability has one variant for a command with no end of its own.
                unended @ (sandbox::Status::Refused(_)
                | sandbox::Status::Cancelled
                | sandbox::Status::HelperLost(_)) => {
                    Status::Refused(unended.refusal().unwrap_or_default())
                }
            },
        }
    }
}

fn refused(why: String) -> Completion {
    Completion {
        output: String::new(),
        omitted_bytes: 0,
        status: Status::Refused(why),
    }
}
