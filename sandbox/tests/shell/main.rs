//! The confined shell on its own: commands run through [`cordon_sandbox`] as cordon's `bash`
//! tool runs them, with no plugin, host or CLI around it (`cargo test -p cordon-sandbox` builds
//! no wasmtime). What the tool adds (its trailers, the output's truncation, the timeout's
//! text) is tested through the `cordon` binary, in tests/integration. `.ci/run` runs these as
//! root and again as an unprivileged user.
//!
//! The test binary is its own sandbox helper (the default [`cordon_sandbox::Policy::helper`],
//! `/proc/self/exe`): the helper must start before any thread does, and the test harness's
//! `main` is not this file's, so the entry point runs as an ELF constructor, before `main`.

mod commands;
mod host;
mod namespaces;
mod util;
mod workspace;

/// Runs `cordon_sandbox::run_helper_if_asked` before the test harness starts: in the helper
/// (`__sandbox` first), which never returns, with `SIGPIPE` ignored as Rust's runtime would
/// have ignored it by `main` (the helper counts on `EPIPE` when the host has gone). It runs
/// after the standard library's own constructor, which records the arguments.
#[used]
#[unsafe(link_section = ".init_array")]
static HELPER: extern "C" fn() = {
    extern "C" fn helper() {
        let first = std::env::args_os().nth(1);
        if first.as_deref() == Some(cordon_sandbox::SANDBOX_ARG.as_ref()) {
            // SAFETY: a plain change of one signal's disposition, before any thread exists.
            unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        }
        cordon_sandbox::run_helper_if_asked();
    }
    helper
};
