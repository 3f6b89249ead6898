//! The `bash` tool: runs a shell command through the host's `shell` capability.
//!
//! A shell cannot run inside WebAssembly: the host runs `bash -c <command>` confined (see the
//! `shell` interface of the WIT) and this plugin turns the tool input into that call and the
//! completion into the text the model sees, with the exit status or timeout as a trailer that
//! the host's truncation never cuts.
//!
//! A command that ran did the tool's job, whatever its exit status: its outcome is not failed
//! (an MCP client would take `isError` for a call to retry), and the trailer tells the model
//! how it ended. Only a command that could not run at all is a failed outcome.

use cordon_kit::shell::{self, Completion, Status, TimeoutBounds};
use cordon_kit::{Context, Counter, Declaration, Kind, Outcome, Tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// The `bash` tool.
pub struct Bash;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The shell command to run.
    command: String,
    /// Seconds before the command is killed, for one that needs more than the usual timeout.
    #[schemars(range(min = 1))]
    timeout: Option<u32>,
}

/// What holds whatever the settings; the host's `shell.describe` follows with what they are.
const DESCRIPTION: &str = "Run a shell command with `bash -c` and return its output (stdout and \
stderr merged, in the order written). Every call starts a new shell: nothing (variables, \
`cd`, background jobs) carries over to the next call. The working directory is the workspace \
root. There is no stdin: a command that waits for input reads end-of-file at once, so pass \
input through files, arguments or heredocs, and use non-interactive flags. At its timeout a \
command is killed together with everything it started: run long jobs in smaller steps, and do \
not leave servers or watchers running. A non-zero exit status is reported after the output. \
Long output keeps its start and its end with a notice between them: filter it (grep, head, \
tail, wc) rather than printing everything.";

impl Tool for Bash {
    type Input = Input;
    const NAME: &'static str = "bash";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Execute,
                format!("{DESCRIPTION}\n\n{}", shell::describe()),
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("🛠️", Some("command"))
            .counted_as(Counter::new("commands", "⚙", "command", "commands")),
        )
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        if context.dry_run {
            // A command cannot be previewed without running it: say what would run.
            return Ok(Outcome::success(format!("would run: {}", input.command)));
        }
        let done = match input.timeout {
            Some(secs) => shell::run_for(&input.command, secs),
            None => shell::run(&input.command),
        };
        Ok(outcome(done, shell::timeouts))
    }
}

/// The model-facing outcome of a completion; `timeouts` tells, after a timeout, how much more
/// time the command could be given.
fn outcome(done: Completion, timeouts: impl FnOnce() -> TimeoutBounds) -> Outcome {
    let Completion {
        output,
        omitted_bytes,
        status,
    } = done;
    let trailer = match status {
        Status::Exited(0) => None,
        Status::Exited(code) => Some(format!("[exit code: exit status {code}]")),
        Status::Signaled(signal) => Some(format!("[exit code: killed by signal {signal}]")),
        Status::TimedOut(secs) => Some(format!(
            "[error: {secs}s timeout exceeded]\n{}",
            more_time(secs, timeouts().most)
        )),
        Status::OutOfMemory(mib) => Some(format!(
            "[error: the command exceeded its memory limit of {mib} MiB and was killed]"
        )),
        Status::Refused(why) => {
            return Outcome::failure(format!("[error: bash could not run: {why}]"));
        }
    };
    let mut outcome = Outcome::success(output);
    outcome.trailer = trailer;
    outcome.omitted_bytes = omitted_bytes;
    outcome
}

/// The line after a timeout's trailer: how to give the command more time, or, when it had
/// the most already, what to do instead.
fn more_time(had: u32, most: u32) -> String {
    if had < most {
        format!(
            "[to give the command more time, call bash again with \"timeout\": SECONDS in its \
             input, at most {most}]"
        )
    } else {
        format!(
            "[{most}s is the most time a command may be given: split the work into shorter \
             commands]"
        )
    }
}

cordon_kit::export_tools!(Bash);

#[cfg(test)]
mod tests {
    use super::*;

    /// The outcome of `done` where commands may have up to 600 s.
    fn outcome_of(done: Completion) -> Outcome {
        outcome(done, || TimeoutBounds {
            usual: 30,
            most: 600,
        })
    }

    fn done(output: &str, status: Status) -> Completion {
        Completion {
            output: output.into(),
            omitted_bytes: 0,
            status,
        }
    }

    #[test]
    fn success_has_no_trailer() {
        let o = outcome_of(done("hi\n", Status::Exited(0)));
        assert!(!o.failed);
        assert_eq!(o.output, "hi\n");
        assert_eq!(o.trailer, None);
    }

    #[test]
    fn statuses_become_trailers_of_outcomes_that_did_not_fail() {
        let o = outcome_of(done("x", Status::Exited(2)));
        assert!(!o.failed);
        assert_eq!(o.trailer.as_deref(), Some("[exit code: exit status 2]"));
        let o = outcome_of(done("", Status::Signaled("SIGKILL".into())));
        assert_eq!(
            o.trailer.as_deref(),
            Some("[exit code: killed by signal SIGKILL]")
        );
        let o = outcome_of(done("big\n", Status::OutOfMemory(4096)));
        assert!(!o.failed);
        assert_eq!(
            o.trailer.as_deref(),
            Some("[error: the command exceeded its memory limit of 4096 MiB and was killed]")
        );
        let o = outcome_of(done("partial", Status::TimedOut(30)));
        assert!(!o.failed);
        assert_eq!(o.output, "partial");
        assert_eq!(
            o.trailer.as_deref(),
            Some(
                "[error: 30s timeout exceeded]\n[to give the command more time, call bash again \
                 with \"timeout\": SECONDS in its input, at most 600]"
            )
        );
        let o = outcome_of(done("", Status::TimedOut(600)));
        assert_eq!(
            o.trailer.as_deref(),
            Some(
                "[error: 600s timeout exceeded]\n[600s is the most time a command may be given: \
                 split the work into shorter commands]"
            )
        );
    }

    #[test]
    fn refusal_is_the_output() {
        let o = outcome_of(done("", Status::Refused("no Landlock".into())));
        assert!(o.failed);
        assert_eq!(o.output, "[error: bash could not run: no Landlock]");
        assert_eq!(o.trailer, None);
    }

    #[test]
    fn omitted_bytes_are_passed_on() {
        let mut d = done("y\n", Status::TimedOut(2));
        d.omitted_bytes = 42;
        assert_eq!(outcome_of(d).omitted_bytes, 42);
    }
}
