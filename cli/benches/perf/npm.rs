//! The baseline MCP server of the `mcp` section, the official
//! `@modelcontextprotocol/server-filesystem`: found in `target/bench-npm`, or installed there
//! with npm when npm is there, or the reason it cannot run (the section is then skipped).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::fixture::Dirs;

/// The official filesystem server's entry point, or why it cannot run.
pub(crate) fn npm_server(dirs: &Dirs) -> Result<PathBuf, String> {
    let node_ok = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !node_ok("node") {
        return Err("`node` is not installed".into());
    }
    let prefix = dirs.root.parent().unwrap().join("bench-npm");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.is_file() {
        if !node_ok("npm") {
            return Err(
                "`npm` is not installed to fetch @modelcontextprotocol/server-filesystem".into(),
            );
        }
        eprintln!(
            "installing @modelcontextprotocol/server-filesystem into {}",
            prefix.display()
        );
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("@modelcontextprotocol/server-filesystem")
            .stdin(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) || !entry.is_file() {
            return Err("`npm install @modelcontextprotocol/server-filesystem` failed".into());
        }
    }
    Ok(entry)
}
