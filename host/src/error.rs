//! Errors that stop cordon from serving tools at all.
//!
//! An ordinary failure of a call (a missing file, a bad input) is never one of these: it is a
//! failed [`crate::CallOutcome`] whose text the model sees; a call that cannot even be
//! prepared is a [`crate::runtime::CallError`].
//!
//! Each message says what happened and what to do, and includes its cause's text; the cause
//! is also kept as the error's source, for a program that wants it.

use std::path::PathBuf;

use crate::sandbox::Setting;

/// Why the runtime or a plugin could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot use {path} as the workspace: {source}. Pass an existing directory with {setting}",
        setting = Setting::Workspace
    )]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "cannot use {path} as the skills directory: {source}. Pass an existing directory with \
         {setting}",
        setting = Setting::Skills
    )]
    Skills {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Layer(#[from] crate::layer::LayerError),
    #[error(transparent)]
    Bash(#[from] crate::resolve::bash::SettingsError),
    #[error(transparent)]
    Network(#[from] crate::resolve::network::NetworkError),
    #[error(
        "cannot read the plugin directory {}: {source}. Pass an existing directory with {}",
        path.display(),
        Setting::Plugins(None)
    )]
    PluginDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// One of cordon's own files lies where a tool could write it.
    #[error(transparent)]
    Exposed(#[from] crate::own::Exposure),
    #[error("plugin {plugin} cannot be loaded: {refusal}")]
    Plugin {
        plugin: String,
        #[source]
        refusal: Box<crate::manifest::NotLoaded>,
    },
    #[error("cannot set up the WebAssembly engine: {0}")]
    Engine(#[source] wasmtime::Error),
    #[error("cannot set up the WebAssembly engine: cannot start the deadline timer: {0}")]
    Timer(#[source] std::io::Error),
    #[error("cannot compile the plugins: a compiling thread stopped: {0}")]
    Compiling(#[from] tokio::task::JoinError),
    #[error("plugin {plugin}: cannot compile the component: {source:#}")]
    Compile {
        plugin: String,
        source: wasmtime::Error,
    },
    #[error("plugin {plugin} cannot be loaded: {mismatch}")]
    Contract {
        plugin: String,
        #[source]
        mismatch: crate::contract::Mismatch,
    },
    #[error(
        "plugin {plugin} imports {interface}, which it was not granted; \
         grant it in the plugin's manifest or remove the import"
    )]
    NotGranted { plugin: String, interface: String },
    #[error("plugin {plugin}: cannot load the component: {source:#}")]
    Load {
        plugin: String,
        source: wasmtime::Error,
    },
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
    #[error("plugin {plugin}, tool {tool}: the input schema is not a valid JSON Schema: {source}")]
    Schema {
        plugin: String,
        tool: String,
        source: crate::schema::SchemaError,
    },
}
