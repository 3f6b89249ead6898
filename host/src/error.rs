//! Errors that stop cordon from serving tools at all.
//!
//! An ordinary failure of a call (a missing file, a bad input) is never one of these: it is a
//! failed [`crate::Outcome`] whose text the model sees.

use std::path::PathBuf;

/// Why the runtime or a plugin could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot use {path} as the workspace: {source}. Pass an existing directory with --workspace"
    )]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot use {path} as the skills directory: {source}. Pass an existing directory with --skills"
    )]
    Skills {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    /// One of cordon's own files lies where a tool could write it.
    #[error(transparent)]
    Exposed(#[from] crate::own::Exposure),
    #[error("plugin {plugin} cannot be loaded: {reason}")]
    Plugin { plugin: String, reason: String },
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("plugin {plugin}: cannot compile the component: {reason}")]
    Compile { plugin: String, reason: String },
    #[error(
        "plugin {plugin} imports {interface}, which it was not granted; \
         grant it in the plugin's manifest or remove the import"
    )]
    NotGranted { plugin: String, interface: String },
    #[error("plugin {plugin}: cannot load the component: {reason}")]
    Load { plugin: String, reason: String },
    #[error("plugin {plugin}: cannot grant {path}: {source}")]
    Grant {
        plugin: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "plugin {plugin} declares the tool {tool:?}, which {existing} already declares; rename one of them"
    )]
    DuplicateTool {
        plugin: String,
        tool: String,
        existing: String,
    },
    #[error("plugin {plugin}, tool {tool}: the input schema is not a valid JSON Schema: {reason}")]
    Schema {
        plugin: String,
        tool: String,
        reason: String,
    },
}
