//! cordon's performance targets, each measured side by side with its baseline in one
//! run: medians, ratios, and the target next to each.
//!
//! `cargo bench -p cordon-cli --profile dist --bench perf` (the profile of releases, with thin LTO)
//! runs every section; name sections to run only those: `cargo bench -p cordon-cli --profile dist
//! --bench perf -- oneshot session large edit diff pipe mcp rss fork`;
//! `-- breakdown` adds where the start-up time goes.
//! `CORDON_PERF_SCALE=0.2` runs fewer samples (quicker, noisier).
//!
//! - `oneshot`: a one-shot `cordon call read_file` of a small file (warm compile cache) against
//!   `cat`, whole-process time; and a cold start (empty cache directory).
//! - `session`: the per-call overhead of `read_file` on a 4 KiB file in a
//!   [`Session`](cordon::session::Session) against `std::fs::read_to_string`; then 10 000
//!   consecutive calls with the resident set before and after.
//! - `pipe`: the same per-call overhead through `cordon session`'s pipes, one JSON line after
//!   another, against the same read.
//! - `large`: `read_file` of lines 1–100, and a default read (cut at the output limit), of a
//!   1 GiB file against the same on a 1 MiB file.
//! - `edit`: `edit_file` of one line in a 100 000-line file against a native read + replace +
//!   write.
//! - `diff`: the time of a pathological diff through `edit_file` (bounded by the diff's
//!   deadline).
//! - `mcp`: `cordon mcp` against the official `@modelcontextprotocol/server-filesystem` over
//!   stdio: tool calls per second on the same read, and time to the first response. Needs
//!   `node` and the package in `target/bench-npm` (installed with npm when npm is there);
//!   skipped, with the reason, otherwise.
//! - `rss`: the resident set of an idle `cordon mcp` with every built-in loaded.
//! - `fork`: forking a layer with five checkpoints through the library, once and 100 times in
//!   a row.
//!
//! The data (a 1 GiB text file among them) is generated once under `target/perf/` and reused.
//!
//! The modules: [`harness`] (sampling, statistics, units), [`report`] (the rows and the summary
//! table), [`fixture`] (the directories and files under `target/perf/`), [`in_process`] (the
//! library runtime and session the in-process sections share), [`mcp_client`] (a minimal MCP
//! client and how to start `cordon mcp`), [`npm`] (the reference MCP server, installed with
//! npm), and [`sections`], one module per section.

#[path = "../common/driven.rs"]
mod driven;
mod fixture;
mod harness;
mod in_process;
mod mcp_client;
mod npm;
mod report;
mod sections;

use cordon::Runtime;

use fixture::Dirs;
use in_process::Lib;
use report::Report;

fn main() {
    // The in-process runtimes start bash's sandbox helper as this very program, as `cordon` does.
    cordon::sandbox::run_helper_if_asked();
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);
    let dirs = Dirs::prepare();
    let mut report = Report::default();

    if selected("oneshot") {
        sections::oneshot::run(&dirs, &mut report);
    }
    if ["session", "large", "edit", "diff"]
        .iter()
        .any(|s| selected(s))
    {
        let async_runtime = in_process::async_runtime();
        let runtime = async_runtime
            .block_on(Runtime::new(dirs.options()))
            .expect("the runtime starts");
        let mut lib = Lib::new(&async_runtime, &runtime);
        if selected("session") {
            sections::session::run(&dirs, &mut lib, &mut report);
        }
        if selected("large") {
            sections::large::run(&dirs, &mut lib, &mut report);
        }
        if selected("edit") {
            sections::edit::run(&dirs, &mut lib, &mut report);
        }
        if selected("diff") {
            sections::diff::run(&dirs, &mut lib, &mut report);
        }
    }
    if wanted.iter().any(|w| w == "breakdown") {
        sections::breakdown::run(&dirs);
    }
    if selected("pipe") {
        sections::pipe::run(&dirs, &mut report);
    }
    if selected("mcp") {
        sections::mcp::run(&dirs, &mut report);
    }
    if selected("rss") {
        sections::rss::run(&dirs, &mut report);
    }
    if selected("fork") {
        sections::fork::run(&dirs, &mut report);
    }
    report.print();
}
