//! Workspaces in layers (`--layer`) against the same work without one.
//!
//! `cargo bench -p cordon-cli --profile dist --bench layers` (`CORDON_BENCH_RUNS` runs of each
//! side, 9 by default). The two sides of a row take turns, run by run, so that the machine's
//! drift touches both alike; each row prints their medians, the difference or ratio, and its
//! target:
//!
//! - `ready`: a `cordon session` over the large workspace (100,000 files) answering its first
//!   call (`bash true`), the whole process, with a fresh layer against none: at most 10 ms more;
//! - `diff` and `accept` of a layer holding 10 new files, in the large workspace against an
//!   empty one: their time follows the files changed, not the workspace (at most 1.5×, room for
//!   the noise of a whole process's start);
//! - `checkpoint`: `cordon layer checkpoint` from another terminal of a layer no cordon runs in
//!   against one a running session holds, which does it between its calls: a figure;
//! - `build`: `cargo build` of a small crate (150 modules, no dependencies) as one call of a
//!   session (`--toolchains`), with a fresh layer against none: within 10 %. Skipped, with the
//!   reason, when cargo is not installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/driven.rs"]
#[allow(
    dead_code,
    reason = "shared by the bench targets; this one checks exit codes itself"
)]
mod driven;
#[path = "common/large.rs"]
mod large;

/// The files each layer of the `diff` and `accept` rows holds.
const CHANGED: usize = 10;
/// The modules of the crate the `build` row builds.
const MODULES: usize = 150;

fn main() {
    let runs: usize = std::env::var("CORDON_BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(9);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let bench = Bench {
        cordon: PathBuf::from(env!("CARGO_BIN_EXE_cordon")),
        scratch: scratch.path().to_path_buf(),
    };
    let large = large::large_workspace();
    let empty = tempfile::tempdir().expect("an empty workspace");
    println!(
        "{runs} runs of each side, taking turns; the large workspace: {} directories, {} files, \
         {} nested repositories",
        large::LARGE_DIRS,
        large::LARGE_DIRS * large::FILES_PER_DIR,
        large::LARGE_DIRS / large::REPO_EVERY
    );

    let request = r#"{"tool":"bash","input":{"command":"true"}}"#;
    let [plain, layered] = turns(
        runs,
        || [bench.session(large.path(), None, request)],
        || [bench.in_fresh_layer(|layer| bench.session(large.path(), Some(layer), request))],
    );
    row("ready: session, first call", plain[0], layered[0]);
    let more = layered[0].as_secs_f64() - plain[0].as_secs_f64();
    println!(
        "a layered session ready for its first call above a plain one: {:.1} ms (target: at most \
         10 ms): {}",
        more * 1000.0,
        met(more <= 0.010)
    );

    let [in_empty, in_large] = turns(
        runs,
        || bench.operations(empty.path()),
        || bench.operations(large.path()),
    );
    for (i, name) in ["diff", "accept"].into_iter().enumerate() {
        row(
            &format!("{name}, {CHANGED} files: empty, large"),
            in_empty[i],
            in_large[i],
        );
        let ratio = in_large[i].as_secs_f64() / in_empty[i].as_secs_f64();
        println!(
            "{name} of {CHANGED} changed files, large workspace against empty: {ratio:.2}x \
             (target: at most 1.50x): {}",
            met(ratio <= 1.5)
        );
    }

    // From another terminal, a checkpoint of a layer a running session holds (that session
    // does it between its calls, remounting the layer) and of one no cordon runs in (done by
    // `cordon layer` itself): a figure, with no target. Each freezes one file written before.
    let workspace = tempfile::tempdir().expect("a workspace");
    let [of_idle, of_held] = bench.in_fresh_layer(|idle| {
        bench.in_fresh_layer(|held| {
            let mut session = Running::start(bench.command(workspace.path(), Some(held)));
            let mut written = 0;
            let times = turns(
                runs,
                || {
                    written += 1;
                    let write = format!(r#"{{"command":"echo {written} > idle{written}.txt"}}"#);
                    bench.run(
                        bench
                            .command(workspace.path(), Some(idle))
                            .args(["call", "bash", &write]),
                    );
                    [bench.layer("checkpoint", idle)]
                },
                || {
                    session.bash("echo > held$RANDOM$RANDOM.txt");
                    [bench.layer("checkpoint", held)]
                },
            );
            session.finish();
            times
        })
    });
    row("checkpoint: idle, in use", of_idle[0], of_held[0]);

    match Command::new("cargo").arg("--version").output() {
        Ok(out) if out.status.success() => {
            let krate = small_crate();
            let build =
                r#"{"tool":"bash","input":{"command":"cargo build -q --offline","timeout":600}}"#;
            let target = krate.path().join("target");
            let [plain, layered] =
                turns(
                    runs,
                    || {
                        let _ = std::fs::remove_dir_all(&target);
                        [bench.session(krate.path(), None, build)]
                    },
                    || {
                        let _ = std::fs::remove_dir_all(&target);
                        [bench.in_fresh_layer(|layer| {
                            bench.session(krate.path(), Some(layer), build)
                        })]
                    },
                );
            row(
                &format!("build: cargo, {MODULES} modules"),
                plain[0],
                layered[0],
            );
            let ratio = layered[0].as_secs_f64() / plain[0].as_secs_f64();
            println!(
                "a build in a layer against the same without: {ratio:.2}x (target: at most \
                 1.10x): {}",
                met(ratio <= 1.1)
            );
        }
        _ => println!("cargo is not installed: the build row is left out"),
    }
}

/// cordon, and a directory for what its runs leave (their homes, the layers).
struct Bench {
    cordon: PathBuf,
    scratch: PathBuf,
}

impl Bench {
    /// `cordon` over `workspace` (with `layer`), its data and cache in the scratch directory.
    fn command(&self, workspace: &Path, layer: Option<&Path>) -> Command {
        let mut command = Command::new(&self.cordon);
        command
            .env("XDG_DATA_HOME", self.scratch.join("data"))
            .arg("--workspace")
            .arg(workspace)
            .arg("--cache-dir")
            .arg(self.scratch.join("cache"))
            .arg("--toolchains");
        if let Some(layer) = layer {
            command.arg("--layer").arg(layer);
        }
        command
    }

    /// The time of a `cordon session` answering `request` once, start to exit; the answer must
    /// report exit code 0.
    fn session(&self, workspace: &Path, layer: Option<&Path>, request: &str) -> Duration {
        let mut command = self.command(workspace, layer);
        command.arg("session");
        driven::round_trips(command, request, 1, |line| {
            assert!(line.contains(r#""exit":{"code":0}"#), "{line}")
        })
    }

    /// Runs `timed` with a new layer, which is discarded after, untimed.
    fn in_fresh_layer<T>(&self, timed: impl FnOnce(&Path) -> T) -> T {
        let layers = self.scratch.join("layers");
        std::fs::create_dir_all(&layers).unwrap();
        let layer = tempfile::tempdir_in(&layers).unwrap().keep();
        let took = timed(&layer);
        self.layer("discard", &layer);
        took
    }

    /// The time of `cordon layer OPERATION LAYER`.
    fn layer(&self, operation: &str, layer: &Path) -> Duration {
        self.run(
            Command::new(&self.cordon)
                .args(["layer", operation])
                .arg(layer),
        )
    }

    /// The times of `cordon layer diff` and `cordon layer accept` of a layer over `workspace`
    /// holding [`CHANGED`] new files; the files are removed from the workspace after.
    fn operations(&self, workspace: &Path) -> [Duration; 2] {
        self.in_fresh_layer(|layer| {
            let make = format!(
                r#"{{"command":"for i in $(seq {CHANGED}); do echo $i > new$i.txt; done"}}"#
            );
            self.run(
                self.command(workspace, Some(layer))
                    .args(["call", "bash", &make]),
            );
            let diff = self.layer("diff", layer);
            let accept = self.layer("accept", layer);
            for i in 1..=CHANGED {
                std::fs::remove_file(workspace.join(format!("new{i}.txt"))).unwrap();
            }
            [diff, accept]
        })
    }

    /// Runs `command` to its end, which must be a success: the time it took.
    fn run(&self, command: &mut Command) -> Duration {
        let started = Instant::now();
        let out = command.stdin(Stdio::null()).output().expect("cordon runs");
        assert!(out.status.success(), "{command:?}: {out:?}");
        started.elapsed()
    }
}

/// A `cordon session` kept running, called one request at a time.
struct Running {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command
            .arg("session")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the session starts");
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        Running {
            child,
            input,
            output,
        }
    }

    /// Runs `command` with the bash tool, which must exit 0.
    fn bash(&mut self, command: &str) {
        use std::io::{BufRead, Write};
        let request = serde_json::json!({"tool": "bash", "input": {"command": command}});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        assert!(line.contains(r#""exit":{"code":0}"#), "{line}");
    }

    fn finish(self) {
        drop(self.input);
        let mut child = self.child;
        assert!(child.wait().unwrap().success());
    }
}

/// Runs `a` and `b` `runs` times each, taking turns after a run of each to warm up: the median
/// of each of their figures.
fn turns<const N: usize>(
    runs: usize,
    mut a: impl FnMut() -> [Duration; N],
    mut b: impl FnMut() -> [Duration; N],
) -> [[Duration; N]; 2] {
    a();
    b();
    let mut samples = [vec![], vec![]];
    for _ in 0..runs.max(1) {
        samples[0].push(a());
        samples[1].push(b());
    }
    samples.map(|mut runs| {
        std::array::from_fn(|i| {
            runs.sort_by_key(|run| run[i]);
            runs[runs.len() / 2][i]
        })
    })
}

/// Prints a row: the name, the medians of its two sides and their ratio.
fn row(name: &str, a: Duration, b: Duration) {
    println!(
        "{name:<34} {:>10} {:>10} {:>7.2}x",
        ms(a),
        ms(b),
        b.as_secs_f64() / a.as_secs_f64()
    );
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "NOT met" }
}

/// A crate of [`MODULES`] modules and no dependencies, its lock file made, that builds in a
/// few seconds.
fn small_crate() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a directory for the crate");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"small\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    let mut lib = String::new();
    for m in 0..MODULES {
        lib.push_str(&format!("pub mod m{m};\n"));
        std::fs::write(
            src.join(format!("m{m}.rs")),
            format!(
                "use std::collections::BTreeMap;\n\
                 pub fn f(x: u64) -> BTreeMap<String, Vec<u64>> {{\n\
                 let mut m = BTreeMap::new();\n\
                 for v in 0..x {{ m.entry(format!(\"k{{}}\", v % {k})).or_insert_with(Vec::new).push(v); }}\n\
                 m\n}}\n\
                 #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]\n\
                 pub struct S{m} {{ pub a: u64, pub b: String, pub c: Vec<u32>, pub d: Option<Box<S{m}>> }}\n",
                k = m + 1
            ),
        )
        .unwrap();
    }
    std::fs::write(src.join("lib.rs"), lib).unwrap();
    let made = Command::new("cargo")
        .args(["generate-lockfile", "--offline"])
        .current_dir(dir.path())
        .status()
        .expect("cargo runs");
    assert!(made.success());
    dir
}
