//! cordon in process, as an agent embedding it has it: a Tokio runtime, a library
//! [`Runtime`] and a [`Session`] on it, shared by the in-process sections (`session`, `large`,
//! `edit`, `diff`) so that the plugins load once.

use cordon::session::{Mode, NoAsk, Session};
use cordon::{CallOutcome, Runtime};

/// The single-threaded Tokio runtime the library's calls are driven on.
pub(crate) fn async_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub(crate) struct Lib<'r> {
    pub(crate) async_runtime: &'r tokio::runtime::Runtime,
    pub(crate) runtime: &'r Runtime,
    session: Session,
}

impl<'r> Lib<'r> {
    /// A session on `runtime` that allows every call.
    pub(crate) fn new(async_runtime: &'r tokio::runtime::Runtime, runtime: &'r Runtime) -> Self {
        Lib {
            async_runtime,
            runtime,
            session: Session::new(Mode::Allow),
        }
    }

    /// One call through the session (permissions, loop detector, counters).
    pub(crate) fn call(&mut self, tool: &str, input: &str) -> CallOutcome {
        let pending = self.session.prepare_text(self.runtime, tool, input);
        let outcome = self
            .async_runtime
            .block_on(self.session.call(pending, &mut NoAsk))
            .outcome;
        assert!(!outcome.failed, "{tool} {input}: {}", outcome.output);
        outcome
    }

    /// One call through the bare runtime.
    pub(crate) fn runtime_call(&self, tool: &str, input: &str) -> CallOutcome {
        let outcome = self
            .async_runtime
            .block_on(self.runtime.call(tool, input, false));
        assert!(!outcome.failed, "{tool} {input}: {}", outcome.output);
        outcome
    }
}
