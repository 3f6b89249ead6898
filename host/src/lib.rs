//! cordon: run an AI agent's tool calls confined, bounded and observed.
//!
//! Every tool is a WebAssembly component implementing the `cordon:tool` WIT package
//! (`wit/cordon.wit`; plugins built against an earlier version are served too, [`contract`]).
//! The host loads components ([`plugin`]), compiling each once and keeping the result in an
//! authenticated on-disk cache ([`engine`]), refuses to start when one of its own files lies
//! where a tool could write it ([`own`]), grants each plugin only the directories and host
//! capabilities it needs ([`grants`], [`caps`]), and runs every call through one pipeline
//! ([`runtime`]): input validation against the tool's schema ([`schema`]), a fresh instance,
//! and output truncation ([`output`]). The built-in tools are embedded in the binary
//! ([`builtin`]).

pub mod bindings;
pub mod builtin;
pub mod caps;
pub mod config;
pub mod contract;
pub mod engine;
pub mod error;
pub mod grants;
pub mod layer;
pub mod manifest;
pub mod options;
pub mod output;
pub mod own;
pub mod plugin;
pub mod resolve;
pub mod runtime;
pub mod schema;
pub mod session;
pub mod settings;
pub mod spec;
mod state;
pub mod toolchains;
pub mod watch;
mod workers;

/// The confined shell behind the `shell` capability, re-exported so that an embedder needs
/// one dependency (and calls [`sandbox::run_helper_if_asked`] at the top of its `main`).
pub use cordon_sandbox as sandbox;
pub use error::Error;
pub use options::Options;
pub use resolve::Resolved;
pub use runtime::{CallError, CallOutcome, Runtime};
pub use settings::Settings;
