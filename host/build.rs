//! Builds the built-in plugins as `wasm32-wasip2` components and embeds them in cordon.
//!
//! The plugins are built by a nested `cargo build` with a target directory of its own
//! (`target/plugins`): sharing the outer one would deadlock on cargo's lock. The result is a
//! generated `builtin_components.rs` that `include_bytes!`s each component. A missing
//! `wasm32-wasip2` target is installed with rustup, or the build says how to install it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The built-in tools; each is the crate `plugins/<name>`.
const PLUGINS: &[&str] = &["read_file", "write_file", "edit_file", "bash", "read_skill"];
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    for watched in ["plugins", "wit", "Cargo.toml", "Cargo.lock", ".cargo"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    require_target();

    let plugins: Vec<&str> = PLUGINS
        .iter()
        .copied()
        .filter(|name| root.join("plugins").join(name).join("Cargo.toml").is_file())
        .collect();
    let target_dir = root.join("target").join("plugins");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(&root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for name in &plugins {
        build.args(["-p", name]);
    }
    // Flags meant for the host build (e.g. from `cargo clippy` or a coverage tool) must not
    // leak into the wasm build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        build.env_remove(var);
    }
    let status = build
        .status()
        .expect("cannot run cargo to build the plugins");
    if !status.success() {
        panic!("building the built-in plugins for {TARGET} failed (see the errors above)");
    }

    let out_dir = target_dir.join(TARGET).join("release");
    // The SHA-256 of each component is computed here, once, rather than at every start: it
    // keys the compile cache, and hashing megabytes would be most of a one-shot call's time.
    let mut generated = String::from(
        "/// The embedded component of the built-in plugin `name`, if it was built, and its \
         SHA-256.\n\
         pub(crate) fn component(name: &str) -> Option<(&'static [u8], [u8; 32])> {\n    match name {\n",
    );
    for name in &plugins {
        let wasm = out_dir.join(format!("{name}.wasm"));
        let bytes = std::fs::read(&wasm)
            .unwrap_or_else(|e| panic!("the plugin build did not produce {}: {e}", wasm.display()));
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        generated.push_str(&format!(
            "        {name:?} => Some((include_bytes!({:?}), {digest:?})),\n",
            wasm.display().to_string()
        ));
    }
    generated.push_str("        _ => None,\n    }\n}\n");
    let dest = Path::new(&env::var_os("OUT_DIR").unwrap()).join("builtin_components.rs");
    std::fs::write(dest, generated).unwrap();
}

/// Makes sure the wasm target is installed: installs it with rustup when it is missing (so a
/// fresh clone builds with one command), and otherwise stops with the command to run.
fn require_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .expect("cannot run rustc");
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib").join(TARGET);
    if lib.is_dir() {
        return;
    }
    println!(
        "cargo:warning=installing the {TARGET} target with rustup: cordon's built-in plugins are built for it"
    );
    let installed = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !installed || !lib.is_dir() {
        panic!(
            "\n\nThe {TARGET} target is not installed, and cordon's built-in plugins are built for it.\n\
             Run:\n\n    rustup target add {TARGET}\n\nthen build again.\n"
        );
    }
}
