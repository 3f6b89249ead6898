//! `cordon:tool` 0.1.0 as first released (`wit/0.1.0/cordon.wit`), served to the plugins built
//! against it: its own bindings, its calls and results adapted to and from the current ones.
//!
//! What changed in 0.2.0, and how a 0.1.0 plugin is served:
//! - `context.want-diff`: a 0.1.0 plugin is not told; it sends its diff as it always did, and
//!   the host leaves the diff out when it was not wanted.
//! - `files.replace-error.protected`: a 0.1.0 plugin gets `io` with the same text. `io` is the
//!   one case whose text plugins pass on to the model (the kit of 0.1.0 did); `not-permitted`
//!   says the path lies outside the grants, which would mislead the model.
//! - `shell.status.out-of-memory`: a 0.1.0 plugin gets `signaled` with `SIGKILL` (the kernel
//!   kills a command over its memory limit with it) followed by why.

use wasmtime::component::{HasSelf, Linker};

use crate::bindings::cordon::tool as now;
use crate::bindings::interface;
use crate::grants::Grants;
use crate::state::State;

wasmtime::component::bindgen!({
    path: "../wit/0.1.0",
    world: "plugin-with-capabilities",
    imports: { default: async },
    exports: { default: async },
});

use self::cordon::tool::{files, shell, types};

/// The version these bindings are of.
pub const VERSION: &str = "0.1.0";

/// Links the 0.1.0 face of the capabilities `grants` allows into `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<State>, grants: &Grants) -> wasmtime::Result<()> {
    types::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    if grants.files() {
        let name = interface::versioned(interface::FILES, VERSION);
        crate::caps::files::link(linker, &name, replace_error)?;
    }
    if grants.shell.is_some() {
        shell::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    }
    Ok(())
}

impl types::Host for State {}

impl shell::Host for State {
    async fn run(&mut self, command: String) -> shell::Completion {
        let done = now::shell::Host::run(self, command).await;
        shell::Completion {
            output: done.output,
            omitted_bytes: done.omitted_bytes,
            status: status(done.status),
        }
    }
}

/// The context of a call as 0.1.0 has it.
pub(crate) fn context(context: &now::types::Context) -> types::Context {
    types::Context {
        cwd: context.cwd.clone(),
        dry_run: context.dry_run,
        max_output: context.max_output,
    }
}

/// A 0.1.0 outcome as the current one, its diff kept only when `want_diff`.
pub(crate) fn outcome(outcome: types::Outcome, want_diff: bool) -> now::types::Outcome {
    let types::Outcome {
        output,
        trailer,
        omitted_bytes,
        failed,
        locations,
        diff,
    } = outcome;
    now::types::Outcome {
        output,
        trailer,
        omitted_bytes,
        failed,
        locations: locations
            .into_iter()
            .map(|l| now::types::Location {
                path: l.path,
                line: l.line,
            })
            .collect(),
        diff: diff.filter(|_| want_diff).map(|d| now::types::Diff {
            path: d.path,
            old_text: d.old_text,
            new_text: d.new_text,
        }),
    }
}

/// A 0.1.0 declaration as the current one (the same fields).
pub(crate) fn declaration(declaration: types::Declaration) -> now::types::Declaration {
    let types::Declaration {
        name,
        description,
        input_schema,
        kind,
        display,
        counter,
    } = declaration;
    now::types::Declaration {
        name,
        description,
        input_schema,
        kind: match kind {
            types::Kind::Read => now::types::Kind::Read,
            types::Kind::Edit => now::types::Kind::Edit,
            types::Kind::Delete => now::types::Kind::Delete,
            types::Kind::Move => now::types::Kind::Move,
            types::Kind::Search => now::types::Kind::Search,
            types::Kind::Execute => now::types::Kind::Execute,
            types::Kind::Think => now::types::Kind::Think,
            types::Kind::Fetch => now::types::Kind::Fetch,
            types::Kind::Other => now::types::Kind::Other,
        },
        display: now::types::Display {
            icon: display.icon,
            key_argument: display.key_argument,
            preview_output: display.preview_output,
        },
        counter: now::types::Counter {
            key: counter.key,
            icon: counter.icon,
            singular: counter.singular,
            plural: counter.plural,
        },
    }
}

/// A replacement's failure as 0.1.0 has it (see the module's docs).
pub(crate) fn replace_error(error: now::files::ReplaceError) -> files::ReplaceError {
    use now::files::ReplaceError as Now;
    match error {
        Now::NotPermitted(why) => files::ReplaceError::NotPermitted(why),
        Now::NoParent(why) => files::ReplaceError::NoParent(why),
        Now::IsDirectory(why) => files::ReplaceError::IsDirectory(why),
        Now::Protected(why) | Now::Io(why) => files::ReplaceError::Io(why),
    }
}

/// How a command ended, as 0.1.0 has it (see the module's docs).
fn status(status: now::shell::Status) -> shell::Status {
    use now::shell::Status as Now;
    match status {
        Now::Exited(code) => shell::Status::Exited(code),
        Now::Signaled(name) => shell::Status::Signaled(name),
        Now::TimedOut(secs) => shell::Status::TimedOut(secs),
        Now::OutOfMemory(mib) => shell::Status::Signaled(format!(
            "SIGKILL (its processes reached the memory limit of {mib} MiB)"
        )),
        Now::Refused(why) => shell::Status::Refused(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_path_keeps_its_text() {
        let why = "a.txt is protected: .git/hooks runs code; set [bash] allow_hooks".to_string();
        match replace_error(now::files::ReplaceError::Protected(why.clone())) {
            files::ReplaceError::Io(text) => assert_eq!(text, why),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn out_of_memory_is_a_kill_that_says_why() {
        match status(now::shell::Status::OutOfMemory(512)) {
            shell::Status::Signaled(text) => assert_eq!(
                text,
                "SIGKILL (its processes reached the memory limit of 512 MiB)"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_diff_is_left_out_when_not_wanted() {
        let old = || types::Outcome {
            output: "done".into(),
            trailer: None,
            omitted_bytes: 0,
            failed: false,
            locations: vec![types::Location {
                path: "/w/a".into(),
                line: Some(3),
            }],
            diff: Some(types::Diff {
                path: "/w/a".into(),
                old_text: None,
                new_text: "x".into(),
            }),
        };
        let wanted = outcome(old(), true);
        assert_eq!(wanted.diff.map(|d| d.new_text).as_deref(), Some("x"));
        assert_eq!(wanted.locations[0].line, Some(3));
        assert!(outcome(old(), false).diff.is_none());
    }
}
