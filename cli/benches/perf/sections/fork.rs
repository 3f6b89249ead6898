//! Section 9, `fork`: forking a layer that a session left with five checkpoints, through the
//! library (`cordon layer fork` without the process's start), one fork at a time and 100 in a
//! row (targets: at most 1 ms each, 100 in at most 100 ms). A fork is mounted when it is used,
//! not when it is made.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fixture::Dirs;
use crate::harness::{fmt, median, print_samples, repeated, samples};
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, report: &mut Report) {
    println!("\n# 9. Forking a layer");
    let data = tempfile::tempdir_in(&dirs.root).unwrap();
    let layers = data.path().join("cordon/layers");
    let parent = layers.join("parent");
    // Five turns of a session in the layer, each ending in a checkpoint.
    let turns: String = (0..5)
        .map(|i| {
            let command = format!("mkdir -p fork-bench; echo {i} > fork-bench/f{i}.txt");
            let call = serde_json::json!({"tool": "bash", "input": {"command": command}});
            format!("{call}\n{{\"end_turn\": true}}\n")
        })
        .collect();
    let mut session = dirs
        .cordon(&dirs.cache)
        .args(["--layer", "parent", "session"])
        .env("XDG_DATA_HOME", data.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("start cordon session");
    std::io::Write::write_all(&mut session.stdin.take().unwrap(), turns.as_bytes()).unwrap();
    assert!(session.wait().unwrap().success());
    let levels = cordon::layer::stack::levels(&parent).unwrap().len();
    assert_eq!(levels, 5, "the session's turns each froze a level");

    let mut made = 0;
    let mut fork = |dir: &Path| {
        made += 1;
        cordon::layer::stack::fork(&parent, &dir.join(format!("f{made}"))).unwrap();
    };
    let one = repeated(samples(50), &mut || fork(&layers));
    print_samples("fork of a layer with 5 levels", &one);
    report.row(
        "`fork` of a layer with 5 checkpoints",
        format!("median {}", fmt(median(&one))),
        "-".into(),
        "≤ 1 ms",
        Some(median(&one) <= Duration::from_millis(1)),
    );
    let started = Instant::now();
    for _ in 0..100 {
        fork(&layers);
    }
    let hundred = started.elapsed();
    println!("  100 forks in a row: {}", fmt(hundred));
    report.row(
        "100 forks of that layer",
        fmt(hundred),
        "-".into(),
        "≤ 100 ms",
        Some(hundred <= Duration::from_millis(100)),
    );
}
