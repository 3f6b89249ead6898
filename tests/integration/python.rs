//! A Python virtual environment with pinned packages, for tests that drive cordon from Python
//! (the official MCP client, …).
//!
//! The README's single test command must work on a fresh machine, so the harness makes the
//! environment itself: on first use in a test run it creates a venv under the target directory
//! with `python3 -m venv` and installs [`PACKAGES`] with pip, then reuses it in later runs for
//! as long as the package list (recorded in a marker file) is the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Every package the Python tests need, pinned. Changing the list rebuilds the venv.
pub const PACKAGES: &[&str] = &["mcp==2.3.0", "componentize-py==0.25.1"];

/// The file in a directory of pinned packages that records the list it was made with.
const MARKER: &str = "cordon-packages.txt";

/// The venv's Python interpreter, the venv created (or checked) once per test binary. Panics
/// with what to install when `python3`, `venv` or pip fails.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| ensure(Path::new(concat!(env!("CARGO_TARGET_TMPDIR"), "/py-venv"))))
        .clone()
}

fn ensure(venv: &Path) -> PathBuf {
    let python = venv.join("bin").join("python");
    // Broken when its python3 went away.
    pinned(
        venv,
        PACKAGES,
        || works(&python),
        || {
            run(
                Command::new("python3").arg("-m").arg("venv").arg(venv),
                "create a Python venv with `python3 -m venv` (install python3 and, on Debian or \
             Ubuntu, python3-venv)",
            );
            run(
                Command::new(&python)
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .args(PACKAGES),
                &format!(
                    "install {} from PyPI into the test venv with pip",
                    PACKAGES.join(" ")
                ),
            );
        },
    );
    python
}

/// Makes `dir` hold `packages` with `make` unless it already does: its marker file records
/// the list it was made with, and `works` says it is not broken. Otherwise (missing, made
/// with another list, half made or broken) it is made afresh. The marker is written last, so
/// an interrupted install is redone next time.
pub(crate) fn pinned(dir: &Path, packages: &[&str], works: impl Fn() -> bool, make: impl FnOnce()) {
    let wanted = format!("{}\n", packages.join("\n"));
    let marker = dir.join(MARKER);
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) && works() {
        return;
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot remove {}: {e}", dir.display()));
    }
    make();
    std::fs::write(&marker, wanted)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", marker.display()));
}

fn works(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import sys"])
        .output()
        .is_ok_and(|out| out.status.success())
}

pub(crate) fn run(command: &mut Command, what: &str) {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("cannot {what}: {e}"));
    assert!(
        out.status.success(),
        "cannot {what}: {command:?} failed ({})\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
