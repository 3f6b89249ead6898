//! Host bindings generated from `wit/cordon.wit`, the current version of the contract (those
//! of earlier versions, and what they are served with, are in [`crate::contract`]).
//!
//! One world covers every plugin: it imports all host capabilities, and the linker of each
//! plugin is given only those it was granted, so a component importing anything else fails to
//! load (see [`crate::plugin`]).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin-with-capabilities",
    imports: { default: async },
    exports: { default: async },
});

pub use self::cordon::tool::types::{Counter, Declaration, Display, Kind};

/// The version of `wit/cordon.wit`, which these bindings are of: the current one, which the
/// plugin kit and the built-in plugins are built against.
pub const VERSION: &str = "0.2.0";

/// The WIT package's interface names, as they appear in a component's imports less their
/// version: a capability is granted, or not, whichever version of the contract asks for it.
pub mod interface {
    /// The atomic file replacement capability.
    pub const FILES: &str = "cordon:tool/files";
    /// The shell capability.
    pub const SHELL: &str = "cordon:tool/shell";
    /// WASI HTTP (`wasi:http/outgoing-handler` and `wasi:http/types`, any 0.2 version).
    pub const HTTP: &str = "wasi:http";

    /// The capability a component's import needs a grant for, if it needs one.
    pub fn capability(import: &str) -> Option<&'static str> {
        let name = import.split_once('@').map_or(import, |(name, _)| name);
        match name {
            FILES => Some(FILES),
            SHELL => Some(SHELL),
            _ if import.starts_with("wasi:http/") => Some(HTTP),
            _ => None,
        }
    }

    /// The name of `interface` (one of the above) in `version` of the contract.
    pub fn versioned(interface: &str, version: &str) -> String {
        format!("{interface}@{version}")
    }
}

impl Kind {
    /// The Agent Client Protocol name of the kind, as used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Edit => "edit",
            Kind::Delete => "delete",
            Kind::Move => "move",
            Kind::Search => "search",
            Kind::Execute => "execute",
            Kind::Think => "think",
            Kind::Fetch => "fetch",
            Kind::Other => "other",
        }
    }

    /// Whether a call of this kind changes something and so needs the user's permission.
    pub fn needs_permission(self) -> bool {
        matches!(self, Kind::Edit | Kind::Delete | Kind::Move | Kind::Execute)
    }
}
