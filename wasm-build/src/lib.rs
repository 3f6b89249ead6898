//! The nested `cargo build` of the workspace's `wasm32-wasip2` components: the built-in
//! plugins (by `host/build.rs`, which embeds them) and the test plugins (by the integration
//! tests). One function, so both build alike and scrub the same environment.
//!
//! The components get a target directory of their own, `target/plugins`: sharing the outer
//! one would deadlock on cargo's lock, since the outer build (or test run) holds it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target the components are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Variables of the outer build that must not reach the wasm build: flags meant for the host
/// (from `cargo clippy`, a coverage tool, a wrapper) and the outer target settings.
const SCRUBBED: [&str; 7] = [
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
];

/// The directory of the workspace at `root` that holds each built `<package>.wasm`.
pub fn out_dir(root: &Path) -> PathBuf {
    target_dir(root).join(TARGET).join("release")
}

fn target_dir(root: &Path) -> PathBuf {
    root.join("target").join("plugins")
}

/// Builds `packages` (at least one) of the workspace at `root` in release mode for
/// [`TARGET`], and returns [`out_dir`]. The error says what failed.
pub fn build(root: &Path, packages: &[&str]) -> Result<PathBuf, String> {
    assert!(
        !packages.is_empty(),
        "no package to build: cargo would build them all"
    );
    let target_dir = target_dir(root);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for package in packages {
        build.args(["-p", package]);
    }
    for var in SCRUBBED {
        build.env_remove(var);
    }
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo to build {packages:?}: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building {packages:?} for {TARGET} failed (see the errors above)"
        ));
    }
    Ok(out_dir(root))
}

/// Makes sure the wasm target is installed: installs it with rustup when it is missing (so a
/// fresh clone builds with one command), and otherwise says which command to run.
pub fn require_target() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib").join(TARGET);
    if lib.is_dir() {
        return Ok(());
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup: cordon's built-in plugins are built for it"
    );
    let installed = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if installed && lib.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "\n\nThe {TARGET} target is not installed, and cordon's built-in plugins are built for it.\n\
             Run:\n\n    rustup target add {TARGET}\n\nthen build again.\n"
        ))
    }
}
