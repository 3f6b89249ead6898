//! The per-call overhead of the bash tool, against spawning `bash -c true` directly.
//!
//! `cargo bench -p cordon-cli --profile dist --bench bash_overhead` (the profile of releases, with
//! thin LTO; set `CORDON_BENCH_CALLS` for more or fewer calls, 200 by default). Each round
//! runs, interleaved so that machine noise hits all alike:
//!
//! - `bash -c true`: spawned directly with `std::process::Command` (the baseline);
//! - `Shell::run`: the confined shell alone, as a runtime keeps it (its helper and zygote set
//!   up once; per command: namespaces, the fresh mounts, the memory cgroup, Landlock,
//!   seccomp);
//! - `sandbox::run`: the same for one command, helper and zygote set up for it;
//! - `sandbox::run --unconfined-bash`: one command without the kernel confinement;
//! - `bash tool`: the whole tool path of a running host (`Runtime::call`: schema validation,
//!   a fresh instance of the bash plugin, the capability, output bounding);
//! - `cordon call bash`: the one-shot command line, a whole `cordon` process per call;
//! - `bwrap … bash -c true`: bubblewrap with every namespace, a fresh `/proc`, `/dev` and
//!   `/tmp`, when `bwrap` is installed (`apt-get install bubblewrap`);
//!
//! and then `cordon session` as an agent drives it, one JSON line in and its answer out
//! through pipes: a session of N bash calls and one of 1, each timed whole, so (N-call
//! session − 1-call session) / (N − 1) is one more call, against N `bash -c true` in a row,
//! each session taking turns with those.
//!
//! The session is timed again in a large workspace (10,000 directories, 100,000 files, nested
//! git repositories), where a call must cost what it costs in an empty one.
//!
//! It prints the median, mean and 95th percentile of each, each median as a ratio to the
//! baseline's, and the targets: a bash call of `true` in `cordon session` at most 2 ms above
//! `bash -c true`, in the large workspace too and at most 1.3× the call in the empty one; the
//! one-shot call against bubblewrap is a figure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cordon::{Options, Runtime, sandbox};

#[path = "common/driven.rs"]
mod driven;
#[path = "common/large.rs"]
mod large;

use large::{FILES_PER_DIR, LARGE_DIRS, REPO_EVERY, large_workspace};

fn main() {
    let calls: usize = std::env::var("CORDON_BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    let helper = PathBuf::from(env!("CARGO_BIN_EXE_cordon"));
    let mut confined = sandbox::Policy::new(workspace.path().canonicalize().unwrap());
    confined.helper = helper.clone();
    let mut unconfined = confined.clone();
    unconfined.unconfined = true;
    let kept = sandbox::Shell::new(confined.clone());

    let mut options = Options::new(workspace.path());
    options.helper = Some(helper.clone());
    options.settings.tools.cache_dir = Some(std::env::temp_dir().join("cordon-bench-cache"));
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
    let capability = |policy: &sandbox::Policy| {
        let done = sandbox::run(policy, "true");
        assert_eq!(done.status, sandbox::Status::Exited(0), "{done:?}");
    };
    let shell_run = || {
        let done = kept.run("true", &sandbox::Hooks::default());
        assert_eq!(done.status, sandbox::Status::Exited(0), "{done:?}");
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
        ("Shell::run", &shell_run),
        ("sandbox::run (one command)", &run_confined),
        ("sandbox::run --unconfined-bash", &run_unconfined),
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
    let (per_call, bash_alone) = session_call(&helper, workspace.path(), calls, &direct);
    println!(
        "{:<30} {:>10}   (a `cordon session` of {calls} bash calls against one of 1, pipes)",
        "cordon session, per call",
        ms(per_call)
    );
    println!(
        "{:<30} {:>10}   ({calls} in a row, taking turns with those sessions)",
        "bash -c true, per call",
        ms(bash_alone)
    );
    let above = per_call.as_secs_f64() - bash_alone.as_secs_f64();
    println!(
        "a bash call in cordon session above bash -c true: {:.2} ms (target: at most 2 ms): {}",
        above * 1000.0,
        met(above <= 0.002)
    );
    let large = large_workspace();
    let (per_call_large, bash_alone_large) = session_call(&helper, large.path(), calls, &direct);
    println!(
        "{:<30} {:>10}   (the same in a workspace of {LARGE_DIRS} directories, {} files and {} \
         nested repositories)",
        "cordon session, large",
        ms(per_call_large),
        LARGE_DIRS * FILES_PER_DIR,
        LARGE_DIRS / REPO_EVERY
    );
    let ratio = per_call_large.as_secs_f64() / per_call.as_secs_f64();
    println!(
        "a session's bash call, large workspace against empty: {ratio:.2}x (target: at most \
         1.30x): {}",
        met(ratio <= 1.3)
    );
    let above = per_call_large.as_secs_f64() - bash_alone_large.as_secs_f64();
    println!(
        "a session's bash call in the large workspace above bash -c true: {:.2} ms (target: at \
         most 2 ms): {}",
        above * 1000.0,
        met(above <= 0.002)
    );
    if has_bwrap {
        let ratio = medians[5].as_secs_f64() / medians[6].as_secs_f64();
        println!(
            "one-shot call against bwrap: {ratio:.2}x (a figure: cordon starts itself and its \
             helper before the first namespace)"
        );
    }
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "NOT met" }
}

/// The cost of one more bash call of `true` in a `cordon session` driven through its pipes,
/// one request after another: the median of 7 sessions of `calls` calls, less the median of
/// 7 sessions of one, over `calls` − 1; and, side by side (each session taking turns with
/// it, so that the machine's drift during the run touches both alike), the median of 7 runs
/// of `calls` × `direct` over `calls`.
fn session_call(
    cordon: &Path,
    workspace: &Path,
    calls: usize,
    direct: &dyn Fn(),
) -> (Duration, Duration) {
    let session = |n: usize| {
        let mut command = Command::new(cordon);
        command
            .arg("--workspace")
            .arg(workspace)
            .arg("--cache-dir")
            .arg(std::env::temp_dir().join("cordon-bench-cache"))
            .arg("session");
        driven::session(command, r#"{"tool":"bash","input":{"command":"true"}}"#, n)
    };
    let calls = calls.max(2);
    let (mut one, mut many, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        one.push(session(1));
        many.push(session(calls));
        let started = Instant::now();
        for _ in 0..calls {
            direct();
        }
        alone.push(started.elapsed());
    }
    let median = |mut runs: Vec<Duration>| {
        runs.sort();
        runs[runs.len() / 2]
    };
    let (one, many, alone) = (median(one), median(many), median(alone));
    (
        many.saturating_sub(one) / (calls as u32 - 1),
        alone / calls as u32,
    )
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}
