//! Builds the built-in plugins as `wasm32-wasip2` components and embeds them in cordon.
//!
//! The plugins are built by the nested build of `cordon-wasm-build` (target directory
//! `target/plugins`). The result is a generated `builtin_components.rs`: the list of built-in
//! plugins, and a function that `include_bytes!`s each component with its SHA-256. A missing
//! `wasm32-wasip2` target is installed with rustup, or the build says how to install it.

use std::env;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The built-in plugins, in the order their tools are listed; each is the crate
/// `plugins/<name>`. The one list: `builtin.rs` gets it from the generated file.
const PLUGINS: &[&str] = &["bash", "read_file", "write_file", "edit_file", "read_skill"];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    for watched in ["plugins", "wit", "Cargo.toml", "Cargo.lock", ".cargo"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    cordon_wasm_build::require_target().unwrap_or_else(|e| panic!("{e}"));

    let plugins: Vec<&str> = PLUGINS
        .iter()
        .copied()
        .filter(|name| root.join("plugins").join(name).join("Cargo.toml").is_file())
        .collect();
    let out_dir = cordon_wasm_build::build(&root, &plugins).unwrap_or_else(|e| panic!("{e}"));

    // The SHA-256 of each component is computed here, once, rather than at every start: it
    // keys the compile cache, and hashing megabytes would be most of a one-shot call's time.
    let mut generated = format!(
        "/// The built-in plugins, in the order their tools are listed.\n\
         pub const NAMES: &[&str] = &{PLUGINS:?};\n\n\
         /// The embedded component of the built-in plugin `name`, if it was built, and its \
         SHA-256.\n\
         pub(crate) fn component(name: &str) -> Option<(&'static [u8], [u8; 32])> {{\n    match name {{\n"
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
