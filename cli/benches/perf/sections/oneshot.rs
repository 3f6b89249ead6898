//! Section 1, `oneshot`: a one-shot `cordon call read_file` of a small file, whole process,
//! warm compile cache, against `cat` (a figure, no longer a target); then cold starts on an empty cache
//! directory, which must say they are compiling and compile the plugins in parallel.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::Dirs;
use crate::harness::{children_cpu, fmt, interleaved, median, print_samples, ratio, samples};
use crate::report::Report;

fn cordon_call(dirs: &Dirs, cache: &Path, tool: &str, input: &str) -> Output {
    dirs.cordon(cache)
        .args(["call", tool, input])
        .stdin(Stdio::null())
        .output()
        .expect("cordon runs")
}

pub(crate) fn run(dirs: &Dirs, report: &mut Report) {
    println!("\n# 1. One-shot `cordon call read_file` (whole process) vs `cat`");
    let small = dirs.ws.join("small.txt");
    let expected = std::fs::read(&small).unwrap();
    let input = r#"{"path":"small.txt"}"#;
    // Warm the cache (and check the output).
    let out = cordon_call(dirs, &dirs.cache, "read_file", input);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(out.stdout, expected);

    let n = samples(200);
    let mut cat = || {
        let out = Command::new("cat")
            .arg(&small)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.stdout.len(), expected.len());
    };
    let mut call = || {
        let out = cordon_call(dirs, &dirs.cache, "read_file", input);
        assert_eq!(out.stdout.len(), expected.len());
    };
    let s = interleaved(n, &mut [&mut cat, &mut call]);
    print_samples("cat small.txt", &s[0]);
    print_samples("cordon call read_file (warm cache)", &s[1]);
    report.compare(
        "one-shot `cordon call read_file`, warm cache, vs `cat`",
        &s[1],
        &s[0],
        "(a figure: the floor is cordon's own start, see docs/performance.md)",
        None,
    );

    // Cold: an empty cache directory each time. A call compiles the one plugin it needs (its
    // functions in parallel); listing the tools compiles all five, side by side.
    let warm = median(&s[1]);
    let (wall, cpu, stderr) = cold(
        dirs,
        "cordon call read_file (empty cache)",
        &["call", "read_file", input],
    );
    report.row(
        "cold one-shot `cordon call read_file` (empty cache): says it is compiling",
        format!(
            "{}, {:.2} cores busy; stderr: \"{}\"",
            fmt(wall),
            ratio(cpu, wall),
            stderr.trim()
        ),
        format!("{:.0}× warm", ratio(wall, warm)),
        "says so",
        Some(stderr.contains("compiling")),
    );
    let skills = dirs.skills.to_string_lossy().into_owned();
    let (wall, cpu, stderr) = cold(
        dirs,
        "cordon tools, all 5 plugins (empty cache)",
        &["--skills", &skills, "tools"],
    );
    report.row(
        "cold start of all 5 built-ins (`cordon tools`, empty cache): compiles in parallel",
        format!(
            "{}, CPU {} = {:.2} cores busy",
            fmt(wall),
            fmt(cpu),
            ratio(cpu, wall)
        ),
        "-".into(),
        "says so; > 1 core busy",
        Some(stderr.contains("compiling 5 plugin") && ratio(cpu, wall) > 1.2),
    );
}

/// Runs cordon with `args` on an empty cache directory and prints what it took, as `name`: the
/// wall time, the CPU time and standard error.
fn cold(dirs: &Dirs, name: &str, args: &[&str]) -> (Duration, Duration, String) {
    let cache = dirs.root.join("cold-cache");
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&cache).unwrap();
    let cpu = children_cpu();
    let started = Instant::now();
    let out = dirs
        .cordon(&cache)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("cordon runs");
    let wall = started.elapsed();
    let cpu = children_cpu() - cpu;
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_dir_all(&cache).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    print_samples(name, &[wall]);
    println!(
        "  stderr: {}\n  CPU time {} over {} wall: {:.2} cores busy",
        stderr.trim(),
        fmt(cpu),
        fmt(wall),
        ratio(cpu, wall)
    );
    (wall, cpu, stderr)
}
