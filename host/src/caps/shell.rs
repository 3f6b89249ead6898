//! The `shell` capability: the WIT face of [`crate::shell`], which runs the command confined.

use crate::bindings::cordon::tool::shell::{Completion, Host, Status};
use crate::shell;
use crate::state::State;

impl Host for State {
    async fn run(&mut self, command: String) -> Completion {
        let Some(shell) = self.grants.shell.clone() else {
            return refused("the shell capability is not granted to this plugin".into());
        };
        let stop = match shell::Stop::new() {
            Ok(stop) => stop,
            Err(e) => return refused(format!("cannot make the command stoppable: {e}")),
        };
        let hooks = shell::Hooks {
            ask: self.watch.asker.clone(),
            stop: Some(stop.clone()),
            progress: self.watch.progress.clone(),
        };
        // Dropped with this future when the call is given up (cancelled, past its deadline):
        // the command's tree dies then, not when it would have ended.
        let _stop = StopOnDrop(stop);
        // The runner blocks on the command for up to the timeout: keep it off the async
        // workers.
        match tokio::task::spawn_blocking(move || shell.run(&command, &hooks)).await {
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
