//! Integration tests: each drives the real `cordon` binary on real components.
//!
//! One test binary (as in ripgrep) with a module per area; `util` holds the harness.

mod bash;
mod cli;
mod examples;
mod file_tools;
mod hooks;
// Shared with the sandbox crate's tests: the host's processes, whether the test is root, and
// a throwaway workspace.
#[path = "../../sandbox/tests/shell/host.rs"]
mod host;
mod index;
mod layer;
mod mcp;
mod mcp_http;
mod network;
mod node;
mod own_files;
mod plugins;
mod protect;
mod python;
mod read_skill;
mod sandbox;
mod session;
mod special_files;
mod terminal;
mod util;
mod workday;
#[path = "../../sandbox/tests/shell/workspace.rs"]
mod workspace;
