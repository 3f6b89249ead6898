//! The per-call overhead of the bash tool, against spawning `bash -c true` directly.
//!
//! `cargo bench -p cordon-cli --bench bash_overhead` (set `CORDON_BENCH_CALLS` for more or fewer
//! calls; 200 by default). Each round runs, interleaved so that machine noise hits all alike:
//!
//! - `bash -c true`: spawned directly with `std::process::Command` (the baseline);
//! - `shell::run`: the shell capability alone, confined (helper exec, Landlock, seccomp,
//!   cgroup, private directory, process-tree sweep);
//! - `shell::run --unconfined-bash`: the same without the kernel confinement;
//! - `bash tool`: the whole tool path of a running host (`Runtime::call`: schema validation,
//!   a fresh instance of the bash plugin, the capability, output bounding).
//!
//! It prints the median, mean and 95th percentile of each, and each median as a ratio to the
//! baseline's.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::{Options, Runtime, shell};

fn main() {
    let calls: usize = std::env::var("CORDON_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    let helper = PathBuf::from(env!("CARGO_BIN_EXE_cordon"));
    let mut confined = shell::Policy::new(workspace.path().canonicalize().unwrap());
    confined.helper = helper.clone();
    let mut unconfined = confined.clone();
    unconfined.unconfined = true;

    let mut options = Options::new(workspace.path());
    options.shell = confined.clone();
    options.cache_dir = Some(std::env::temp_dir().join("cordon-bench-cache"));
    let async_runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let runtime = async_runtime
        .block_on(Runtime::new(options))
        .expect("the runtime starts");

    let direct = || {
        let status = Command::new("bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("bash runs");
        assert!(status.status.success());
    };
    let capability = |policy: &shell::Policy| {
        let done = shell::run(policy, "true");
        assert_eq!(done.status, shell::Status::Exited(0), "{done:?}");
    };
    let tool = || {
        let outcome = async_runtime.block_on(runtime.call("bash", r#"{"command":"true"}"#, false));
        assert!(!outcome.failed, "{}", outcome.output);
    };

    // Warm-up: page cache, compiled plugin, first cgroup.
    for _ in 0..5 {
        direct();
        capability(&confined);
        capability(&unconfined);
        tool();
    }

    let names = [
        "bash -c true",
        "shell::run",
        "shell::run --unconfined-bash",
        "bash tool (Runtime::call)",
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(calls); names.len()];
    for _ in 0..calls {
        for (i, samples) in samples.iter_mut().enumerate() {
            let started = Instant::now();
            match i {
                0 => direct(),
                1 => capability(&confined),
                2 => capability(&unconfined),
                _ => tool(),
            }
            samples.push(started.elapsed());
        }
    }

    println!("{calls} calls each, interleaved");
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>8}",
        "", "median", "mean", "p95", "ratio"
    );
    let mut baseline = None;
    for (name, mut samples) in names.iter().zip(samples) {
        samples.sort();
        let median = samples[samples.len() / 2];
        let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
        let p95 = samples[samples.len() * 95 / 100];
        let base = *baseline.get_or_insert(median);
        println!(
            "{name:<30} {:>10} {:>10} {:>10} {:>7.1}x",
            ms(median),
            ms(mean),
            ms(p95),
            median.as_secs_f64() / base.as_secs_f64()
        );
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
