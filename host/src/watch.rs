//! What a front door hands a call to follow it while it runs, down to its shell commands.

/// What a front door gives a call to follow it while it runs.
#[derive(Clone, Debug, Default)]
pub struct Watch {
    /// Asked whether the call's shell commands may reach a host off their allowlist.
    pub asker: Option<crate::sandbox::Asker>,
    /// Counts the output of the call's shell commands as they print it.
    pub progress: Option<crate::sandbox::Progress>,
}
