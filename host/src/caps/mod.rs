//! Host capabilities: what the host does for a plugin that WASI cannot.
//!
//! Each capability is its own WIT interface, linked for a plugin only when its grants allow
//! it, so an ungranted capability is not merely refused at call time: the plugin cannot load.

pub mod files;
mod fs;
pub mod http;
pub mod shell;

use wasmtime::component::{HasSelf, Linker};

use crate::bindings::cordon::tool;
use crate::grants::Grants;
use crate::state::State;

/// Links WASI and the capabilities `grants` allows into `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<State>, grants: &Grants) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    if grants.guard.is_some() && grants.dirs.iter().any(|d| d.writable) {
        fs::add_to_linker(linker)?;
    }
    tool::types::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    if grants.files() {
        files::add_to_linker(linker)?;
    }
    if grants.shell.is_some() {
        tool::shell::add_to_linker::<State, HasSelf<State>>(linker, |s| s)?;
    }
    if grants.http.is_some() {
        http::add_to_linker(linker)?;
    }
    // A plugin built against an earlier version of the contract imports its capabilities by
    // that version's names, which cannot clash with the current ones.
    crate::contract::v0_1::add_to_linker(linker, grants)
}

impl tool::types::Host for State {}
