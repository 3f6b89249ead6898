//! The per-call overhead of the bash tool, against spawning `bash -c true` directly.
//!
//! `cargo bench -p cordon-cli --bench bash_overhead` (set `CORDON_BENCH_CALLS` for more or fewer
//! calls; 200 by default). Each round runs, interleaved so that machine noise hits all alike:
//!
//! - `bash -c true`: spawned directly with `std::process::Command` (the baseline);
//! - `shell::run`: the shell capability alone, confined (helper exec, namespaces, the view,
//!   memory cgroup, Landlock, seccomp);
//! - `shell::run --unconfined-bash`: the same without the kernel confinement;
//! - `bash tool`: the whole tool path of a running host (`Runtime::call`: schema validation,
//!   a fresh instance of the bash plugin, the capability, output bounding), as in a
//!   `cordon session`;
//! - `cordon call bash`: the one-shot command line, a whole `cordon` process per call;
//! - `bwrap … bash -c true`: bubblewrap with every namespace, a fresh `/proc`, `/dev` and
//!   `/tmp`, when `bwrap` is installed (`apt-get install bubblewrap`).
//!
//! It prints the median, mean and 95th percentile of each, each median as a ratio to the
//! baseline's, and the two targets: a session call at most 2 ms above `bash -c true`, and the
//! one-shot call no slower than bubblewrap.

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

    let one_shot = || {
        let out = Command::new(&helper)
            .arg("--workspace")
            .arg(workspace.path())
            .arg("--cache-dir")
            .arg(std::env::temp_dir().join("cordon-bench-cache"))
            .args(["call", "bash", r#"{"command":"true"}"#])
            .stdin(Stdio::null())
            .output()
            .expect("cordon runs");
        assert!(out.status.success(), "{out:?}");
    };
    let bwrap = || {
        let out = Command::new("bwrap")
            .args(["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/"])
            .args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            .args(["bash", "-c", "true"])
            .stdin(Stdio::null())
            .output()
            .expect("bwrap runs");
        assert!(out.status.success(), "{out:?}");
    };
    let has_bwrap = Command::new("bwrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());

    let run_confined = || capability(&confined);
    let run_unconfined = || capability(&unconfined);
    let mut rows: Vec<(&str, &dyn Fn())> = vec![
        ("bash -c true", &direct),
        ("shell::run", &run_confined),
        ("shell::run --unconfined-bash", &run_unconfined),
        ("bash tool (Runtime::call)", &tool),
        ("cordon call bash (one-shot)", &one_shot),
    ];
    if has_bwrap {
        rows.push(("bwrap ... bash -c true", &bwrap));
    } else {
        println!("bwrap is not installed: its row is left out (apt-get install bubblewrap)");
    }
    // Warm-up: page cache, compiled plugin, first cgroup.
    for _ in 0..5 {
        for (_, run) in &rows {
            run();
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(calls); rows.len()];
    for _ in 0..calls {
        for ((_, run), samples) in rows.iter().zip(&mut samples) {
            let started = Instant::now();
            run();
            samples.push(started.elapsed());
        }
    }

    println!("{calls} calls each, interleaved");
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>8}",
        "", "median", "mean", "p95", "ratio"
    );
    let mut baseline = None;
    let mut medians = Vec::new();
    for ((name, _), mut samples) in rows.iter().zip(samples) {
        samples.sort();
        let median = samples[samples.len() / 2];
        medians.push(median);
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
    let above = medians[3].as_secs_f64() - medians[0].as_secs_f64();
    println!(
        "session call above bash -c true: {:.2} ms (target: at most 2 ms)",
        above * 1000.0
    );
    if has_bwrap {
        println!(
            "one-shot call against bwrap: {:.2}x (target: at most 1.00x)",
            medians[4].as_secs_f64() / medians[5].as_secs_f64()
        );
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
