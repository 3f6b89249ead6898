//! Node packages from npm, pinned, for tests that drive cordon from node: the official MCP
//! TypeScript SDK, and the MCP conformance suite with the node it needs.
//!
//! As for Python ([`crate::python`]), the harness makes the environment itself: on first use
//! in a test run it installs each list of packages with npm into a directory of its own under
//! the target directory, then reuses it for as long as the list (recorded in a marker file) is
//! the same. It needs `npm` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::python::{pinned, run};

/// The TypeScript SDK, run by the machine's node.
pub const SDK: &[&str] = &["@modelcontextprotocol/sdk@1.32.2"];

/// The conformance suite, and the node it needs (22 or later; machines may have an older one):
/// npm's `node` package installs a node binary from the registry.
pub const CONFORMANCE: &[&str] = &["node@22.23.3", "@modelcontextprotocol/conformance@0.1.16"];

/// The SDK's package directory, installed (or checked) once per test binary. Panics with
/// what to install when npm fails.
pub fn typescript_sdk() -> PathBuf {
    static SDK_DIR: OnceLock<PathBuf> = OnceLock::new();
    SDK_DIR
        .get_or_init(|| ensure("node-packages", SDK).join("node_modules/@modelcontextprotocol/sdk"))
        .clone()
}

/// The directory of node 22's binaries (`node`, `conformance`), installed (or checked) once
/// per test binary with the conformance suite.
pub fn conformance_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| ensure("node-conformance", CONFORMANCE).join("node_modules/.bin"))
        .clone()
}

/// `packages` installed in the directory `name` under the target directory.
fn ensure(name: &str, packages: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    pinned(
        &dir,
        packages,
        || true,
        || {
            std::fs::create_dir_all(&dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                    .arg(&dir)
                    .args(packages),
                &format!(
                    "install {} from npm (install node and npm, e.g. `apt-get install nodejs npm`)",
                    packages.join(" ")
                ),
            );
        },
    );
    dir
}
