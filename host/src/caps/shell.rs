//! The `shell` capability: the WIT face of [`crate::shell`], which runs the command confined.

use crate::bindings::cordon::tool::shell::{Completion, Host, Status};
use crate::shell;
use crate::state::State;

impl Host for State {
    async fn run(&mut self, command: String) -> Completion {
        let Some(mut policy) = self.grants.shell.clone() else {
            return refused("the shell capability is not granted to this plugin".into());
        };
        let stop = match shell::Stop::new() {
            Ok(stop) => stop,
            Err(e) => return refused(format!("cannot make the command stoppable: {e}")),
        };
        let command_policy = std::sync::Arc::make_mut(&mut policy);
        command_policy.ask = self.watch.asker.clone();
        command_policy.progress = self.watch.progress.clone();
        command_policy.stop = Some(stop.clone());
        // Dropped with this future when the call is given up (cancelled, past its deadline):
        // the command's tree dies then, not when it would have ended.
        let _stop = StopOnDrop(stop);
        // The runner blocks on a child process for up to the timeout: keep it off the async
        // workers.
        match tokio::task::spawn_blocking(move || shell::run(&policy, &command)).await {
            Ok(done) => {
                self.sandbox = done.layers;
                self.blocked.extend(done.blocked);
                Completion {
                    output: done.output,
                    omitted_bytes: done.omitted_bytes,
                    status: match done.status {
                        shell::Status::Exited(code) => Status::Exited(code),
                        shell::Status::Signaled(name) => Status::Signaled(name),
                        shell::Status::TimedOut(secs) => Status::TimedOut(secs),
                        shell::Status::OutOfMemory(mib) => Status::OutOfMemory(mib),
                        shell::Status::Refused(why) => Status::Refused(why),
                    },
                }
            }
            Err(e) => refused(format!("the shell runner failed: {e}")),
        }
    }
}

/// Stops a command when dropped: after it ended, harmless.
struct StopOnDrop(shell::Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

fn refused(why: String) -> Completion {
    Completion {
        output: String::new(),
        omitted_bytes: 0,
        status: Status::Refused(why),
    }
}
