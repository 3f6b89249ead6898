//! The official MCP TypeScript SDK, pinned, for tests that drive cordon from node.
//!
//! As for Python ([`crate::python`]), the harness makes the environment itself: on first use
//! in a test run it installs [`PACKAGES`] with npm into a directory under the target
//! directory, then reuses it for as long as the package list (recorded in a marker file) is
//! the same. It needs `node` and `npm` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::python::{pinned, run};

/// Every npm package the node tests need, pinned. Changing the list installs afresh.
pub const PACKAGES: &[&str] = &["@modelcontextprotocol/sdk@1.32.2"];

/// The SDK's package directory, installed (or checked) once per test binary. Panics with
/// what to install when node or npm fails.
pub fn typescript_sdk() -> PathBuf {
    static SDK: OnceLock<PathBuf> = OnceLock::new();
    SDK.get_or_init(|| {
        let dir = Path::new(concat!(env!("CARGO_TARGET_TMPDIR"), "/node-packages"));
        ensure(dir);
        dir.join("node_modules/@modelcontextprotocol/sdk")
    })
    .clone()
}

fn ensure(dir: &Path) {
    pinned(
        dir,
        PACKAGES,
        || true,
        || {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                    .arg(dir)
                    .args(PACKAGES),
                &format!(
                    "install {} from npm (install node and npm, e.g. `apt-get install nodejs npm`)",
                    PACKAGES.join(" ")
                ),
            );
        },
    );
}
