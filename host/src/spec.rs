//! A plugin before it is loaded: its component, where it came from, what it will be granted
//! and the bounds on its calls. Built-ins and third-party plugins alike become a [`Spec`], which
//! [`crate::plugin::Plugin::load`] turns into a loaded plugin.

use std::time::Duration;

use crate::grants::Grants;

/// Where a plugin came from.
#[derive(Clone, Debug)]
pub enum Source {
    /// Embedded in the cordon binary.
    Builtin,
    /// A component file.
    File(std::path::PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Builtin => f.write_str("built-in"),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A plugin about to be loaded: its component and what it will be granted.
pub struct Spec {
    /// The plugin's name (the component file's stem).
    pub name: String,
    /// Where it comes from.
    pub source: Source,
    /// The component.
    pub bytes: bytes::Bytes,
    /// The SHA-256 of `bytes`: the compile cache's key.
    pub digest: [u8; 32],
    /// What it is granted.
    pub grants: Grants,
    /// The bounds on each call.
    pub limits: Limits,
    /// The tools its manifest lists; it may declare no others. None for built-ins.
    pub tools: Option<Vec<String>>,
}

/// Bounds on each call of a plugin.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Wall-clock time a call may take.
    pub timeout: Duration,
    /// Linear memory an instance may use, in bytes.
    pub memory: usize,
}
