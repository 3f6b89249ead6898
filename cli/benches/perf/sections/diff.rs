//! Section 4b, `diff`: a pathological diff through `edit_file` (every line of 20 000 changed,
//! many short lines shared in another order), whose time the diff's deadline must bound
//! (target: at most 1 s).

use std::time::Duration;

use serde_json::json;

use crate::fixture::Dirs;
use crate::harness::{fmt, median, print_samples, repeated, samples};
use crate::in_process::Lib;
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
    println!("\n# 4b. A pathological diff through `edit_file`");
    // A pathological diff: every line changed, many short lines shared in another order (the
    // worst case of Myers' algorithm). A dry run computes the whole diff and writes nothing.
    let old: String = (0..20_000).map(|i| format!("{}\n", i * 7 % 1013)).collect();
    let new: String = (0..20_000)
        .map(|i| format!("{}\n", i * 11 % 1019))
        .collect();
    std::fs::write(dirs.ws.join("pathological.txt"), &old).unwrap();
    let input = json!({
        "path": "pathological.txt",
        "edits": [{"old": old, "new": new}],
        "dry_run": true,
    })
    .to_string();
    let n = samples(5);
    let times = repeated(n, &mut || {
        let out = lib.runtime_call("edit_file", &input);
        assert!(out.output.starts_with("Dry run"), "{}", out.output);
    });
    print_samples("edit_file, pathological diff (dry run)", &times);
    let worst = *times.last().unwrap();
    report.row(
        "pathological diff (20 000 lines, all changed), `edit_file` dry run",
        format!("median {}, max {}", fmt(median(&times)), fmt(worst)),
        "-".into(),
        "bounded: ≤ 1 s (diff deadline 200 ms)",
        Some(worst <= Duration::from_secs(1)),
    );
    let _ = std::fs::remove_file(dirs.ws.join("pathological.txt"));
}
