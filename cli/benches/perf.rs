//! cordon's performance targets (issue 7), each measured side by side with its baseline in one
//! run: medians, ratios, and the target next to each.
//!
//! `cargo bench -p cordon --bench perf` runs every section; name sections to run only those:
//! `cargo bench -p cordon --bench perf -- oneshot session large edit diff mcp rss`; `-- breakdown`
//! adds where the start-up time goes.
//! `CORDON_PERF_SCALE=0.2` runs fewer samples (quicker, noisier).
//!
//! - `oneshot`: a one-shot `cordon call read_file` of a small file (warm compile cache) against
//!   `cat`, whole-process time; and a cold start (empty cache directory).
//! - `session`: the per-call overhead of `read_file` on a 4 KiB file in a [`Session`] against
//!   `std::fs::read_to_string`; then 10 000 consecutive calls with the resident set before and
//!   after.
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
//!
//! The data (a 1 GiB text file among them) is generated once under `target/perf/` and reused.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cordon::session::{Mode, NoAsk, Session};
use cordon::{Options, Outcome, Runtime};
use serde_json::{Value, json};

const CORDON: &str = env!("CARGO_BIN_EXE_cordon");
const MIB: u64 = 1 << 20;

fn main() {
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let selected = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);
    let dirs = Dirs::prepare();
    let mut report = Report::default();

    if selected("oneshot") {
        oneshot(&dirs, &mut report);
    }
    if ["session", "large", "edit", "diff"]
        .iter()
        .any(|s| selected(s))
    {
        let async_runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let runtime = async_runtime
            .block_on(Runtime::new(dirs.options()))
            .expect("the runtime starts");
        let mut lib = Lib {
            async_runtime: &async_runtime,
            runtime: &runtime,
            session: Session::new(&runtime, Mode::Allow, 5),
        };
        if selected("session") {
            session(&dirs, &mut lib, &mut report);
        }
        if selected("large") {
            large(&dirs, &mut lib, &mut report);
        }
        if selected("edit") {
            edit(&dirs, &mut lib, &mut report);
        }
        if selected("diff") {
            pathological_diff(&dirs, &mut lib, &mut report);
        }
    }
    if wanted.iter().any(|w| w == "breakdown") {
        breakdown(&dirs);
    }
    if selected("mcp") {
        mcp(&dirs, &mut report);
    }
    if selected("rss") {
        rss(&dirs, &mut report);
    }
    report.print();
}

/// Scales a sample count by `CORDON_PERF_SCALE`.
fn samples(n: usize) -> usize {
    let scale: f64 = std::env::var("CORDON_PERF_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * scale) as usize).max(3)
}

// ---------------------------------------------------------------------------------------------
// The data.

struct Dirs {
    /// `target/perf`.
    root: PathBuf,
    /// The workspace the tools see.
    ws: PathBuf,
    /// The warm compile cache.
    cache: PathBuf,
    /// A skills directory, so that `read_skill` is loaded too.
    skills: PathBuf,
}

impl Dirs {
    fn prepare() -> Self {
        // target/release/cordon → target/perf.
        let target = Path::new(CORDON).parent().unwrap().parent().unwrap();
        let root = target.join("perf");
        let dirs = Dirs {
            ws: root.join("ws"),
            cache: root.join("cache"),
            skills: root.join("skills"),
            root,
        };
        for dir in [&dirs.ws, &dirs.cache, &dirs.skills] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            dirs.skills.join("perf.md"),
            "---\ndescription: A skill for the benchmark.\n---\n# Perf\nNothing to do.\n",
        )
        .unwrap();
        std::fs::write(dirs.ws.join("small.txt"), text_lines(0, 200)).unwrap();
        let mut four = text_lines(0, 4096);
        four.truncate(4095);
        four.push('\n');
        std::fs::write(dirs.ws.join("4k.txt"), four).unwrap();
        generate(&dirs.ws.join("1m.txt"), MIB);
        generate(&dirs.ws.join("1g.txt"), 1 << 30);
        // Compile the plugins into the cache in a process of their own, so that no measurement
        // (the resident set above all) includes a compilation.
        let warm = dirs
            .cordon(&dirs.cache)
            .arg("--skills")
            .arg(&dirs.skills)
            .arg("tools")
            .output()
            .expect("cordon runs");
        assert!(warm.status.success(), "{warm:?}");
        dirs
    }

    /// The library runtime's options: the workspace, the warm cache, nothing from the user's
    /// configuration.
    fn options(&self) -> Options {
        let mut options = Options::new(&self.ws);
        options.cache_dir = Some(self.cache.clone());
        options.plugin_dirs.clear();
        options.config = None;
        options
    }

    /// `cordon` on the workspace with the compile cache `cache`, logging at its default level.
    fn cordon(&self, cache: &Path) -> Command {
        let mut command = Command::new(CORDON);
        command
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--cache-dir")
            .arg(cache)
            .env_remove("RUST_LOG");
        command
    }

    fn path(&self, name: &str) -> String {
        self.ws.join(name).to_string_lossy().into_owned()
    }
}

/// Line `i` of the generated text files: ordinary text, 80 bytes.
fn line(i: u64) -> String {
    format!("{i:>10} the quick brown fox jumps over the lazy dog; lorem ipsum dolor sit amet.\n")
}

/// The lines from `from` on, at least `bytes` of them.
fn text_lines(from: u64, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 100);
    let mut i = from;
    while text.len() < bytes {
        i += 1;
        text.push_str(&line(i));
    }
    text
}

/// Writes the file of at least `size` bytes of lines at `path`, unless it is already there.
fn generate(path: &Path, size: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= size) {
        return;
    }
    let started = Instant::now();
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::with_capacity(MIB as usize, std::fs::File::create(&tmp).unwrap());
    let (mut written, mut i) = (0u64, 0u64);
    while written < size {
        i += 1;
        let line = line(i);
        out.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
    }
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
    eprintln!(
        "generated {} ({} bytes) in {:.1} s",
        path.display(),
        written,
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Timing and the report.

/// Runs each of `runs` `n` times, interleaved so that machine noise hits all alike, and returns
/// each one's samples, sorted.
fn interleaved(n: usize, runs: &mut [&mut dyn FnMut()]) -> Vec<Vec<Duration>> {
    let mut samples = vec![Vec::with_capacity(n); runs.len()];
    for _ in 0..n {
        for (run, samples) in runs.iter_mut().zip(&mut samples) {
            let started = Instant::now();
            run();
            samples.push(started.elapsed());
        }
    }
    for s in &mut samples {
        s.sort();
    }
    samples
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn p95(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 95 / 100).min(sorted.len() - 1)]
}

fn fmt(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn print_samples(name: &str, sorted: &[Duration]) {
    println!(
        "  {name:<44} median {:>10}  p95 {:>10}  (n={})",
        fmt(median(sorted)),
        fmt(p95(sorted)),
        sorted.len()
    );
}

struct Row {
    target: String,
    measured: String,
    ratio: String,
    goal: String,
    met: Option<bool>,
}

#[derive(Default)]
struct Report(Vec<Row>);

impl Report {
    /// A row comparing the medians of `measured` and `baseline`, met when their ratio is at
    /// most `limit` (none: for information).
    fn compare(
        &mut self,
        target: &str,
        measured: &[Duration],
        baseline: &[Duration],
        goal: &str,
        limit: Option<f64>,
    ) {
        let (m, b) = (median(measured), median(baseline));
        let r = ratio(m, b);
        self.row(
            target,
            format!("{} vs {}", fmt(m), fmt(b)),
            format!("{r:.2}×"),
            goal,
            limit.map(|limit| r <= limit),
        );
    }

    fn row(
        &mut self,
        target: &str,
        measured: String,
        ratio: String,
        goal: &str,
        met: Option<bool>,
    ) {
        let mark = match met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!("  => {target}: {measured}, {ratio} (target {goal}): {mark}");
        self.0.push(Row {
            target: target.to_string(),
            measured,
            ratio,
            goal: goal.to_string(),
            met,
        });
    }

    fn print(&self) {
        println!("\n## Summary\n");
        println!("| target | measured | ratio | goal | met |");
        println!("|---|---|---|---|---|");
        for row in &self.0 {
            let met = match row.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            println!(
                "| {} | {} | {} | {} | {met} |",
                row.target, row.measured, row.ratio, row.goal
            );
        }
    }
}

/// The resident set of process `pid` ("self" for this one), in bytes.
fn rss_of(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// The CPU time (user + system) of this process's waited-for children so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

// ---------------------------------------------------------------------------------------------
// 1. One-shot `cordon call`.

fn cordon_call(dirs: &Dirs, cache: &Path, tool: &str, input: &str) -> Output {
    dirs.cordon(cache)
        .args(["call", tool, input])
        .stdin(Stdio::null())
        .output()
        .expect("cordon runs")
}

fn oneshot(dirs: &Dirs, report: &mut Report) {
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
        "≤ 3×",
        Some(3.0),
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

// ---------------------------------------------------------------------------------------------
// 2–4. In-process: a runtime and a session, as an agent embedding cordon has.

struct Lib<'r> {
    async_runtime: &'r tokio::runtime::Runtime,
    runtime: &'r Runtime,
    session: Session<'r>,
}

impl Lib<'_> {
    /// One call through the session (permissions, loop detector, counters, displays).
    fn call(&mut self, tool: &str, input: &str) -> Outcome {
        let session = &mut self.session;
        let outcome = self
            .async_runtime
            .block_on(session.call(tool, input, &mut NoAsk))
            .outcome;
        assert!(!outcome.failed, "{tool} {input}: {}", outcome.output);
        outcome
    }

    /// One call through the bare runtime.
    fn runtime_call(&self, tool: &str, input: &str) -> Outcome {
        let outcome = self
            .async_runtime
            .block_on(self.runtime.call(tool, input, false));
        assert!(!outcome.failed, "{tool} {input}: {}", outcome.output);
        outcome
    }
}

fn session(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
    println!("\n# 2. In-process `read_file` of a 4 KiB file vs `std::fs::read_to_string`");
    let path = dirs.ws.join("4k.txt");
    let input = r#"{"path":"4k.txt"}"#;
    let expected = std::fs::read_to_string(&path).unwrap();
    let at_start = rss_of("self");
    for _ in 0..200 {
        lib.call("read_file", input);
    }
    println!(
        "  resident set: {} with the runtime loaded, {} after 200 calls",
        mib(at_start),
        mib(rss_of("self"))
    );
    let n = samples(3000);
    let lib = std::cell::RefCell::new(lib);
    let mut native = || {
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.len(), 4096);
    };
    let mut session = || {
        let out = lib.borrow_mut().call("read_file", input);
        assert!(out.output.starts_with(&expected));
    };
    let mut bare = || {
        let out = lib.borrow().runtime_call("read_file", input);
        assert_eq!(out.output, expected);
    };
    let s = interleaved(n, &mut [&mut native, &mut session, &mut bare]);
    print_samples("std::fs::read_to_string", &s[0]);
    print_samples("Session::call read_file", &s[1]);
    print_samples("Runtime::call read_file", &s[2]);
    let over = median(&s[1]).saturating_sub(median(&s[0]));
    let bare_over = median(&s[2]).saturating_sub(median(&s[0]));
    println!("  Runtime::call overhead above native: {}", fmt(bare_over));
    report.row(
        "in-process per-call overhead, `read_file` 4 KiB (Session::call) above native",
        format!(
            "{} ({} vs {}; Runtime::call {} above)",
            fmt(over),
            fmt(median(&s[1])),
            fmt(median(&s[0])),
            fmt(bare_over)
        ),
        format!("{:.0}×", ratio(median(&s[1]), median(&s[0]))),
        "≤ 60 µs above native",
        Some(over <= Duration::from_micros(60)),
    );

    let lib = lib.into_inner();
    let calls = 10_000;
    let before = rss_of("self");
    let started = Instant::now();
    for _ in 0..calls {
        lib.call("read_file", input);
    }
    let elapsed = started.elapsed();
    let after = rss_of("self");
    let growth = after.saturating_sub(before);
    println!(
        "  {calls} calls in {} ({} each); RSS {} → {}",
        fmt(elapsed),
        fmt(elapsed / calls),
        mib(before),
        mib(after)
    );
    report.row(
        "10 000 consecutive session calls: resident set",
        format!("{} → {}", mib(before), mib(after)),
        format!("+{}", mib(growth)),
        "flat (≤ +1 MiB)",
        Some(growth <= MIB),
    );
}

fn large(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
    println!("\n# 3. `read_file` of a 1 GiB file vs a 1 MiB file");
    let big = std::fs::metadata(dirs.ws.join("1g.txt")).unwrap().len();
    println!("  1g.txt: {big} bytes");
    let range_big = r#"{"path":"1g.txt","start":1,"end":100}"#;
    let range_small = r#"{"path":"1m.txt","start":1,"end":100}"#;
    let whole_big = r#"{"path":"1g.txt"}"#;
    let whole_small = r#"{"path":"1m.txt"}"#;
    // The same lines start both files, so the outputs must be the same.
    for (a, b) in [(range_big, range_small), (whole_big, whole_small)] {
        assert_eq!(
            lib.runtime_call("read_file", a).output,
            lib.runtime_call("read_file", b).output
        );
    }
    let whole = lib.runtime_call("read_file", whole_big).output;
    println!(
        "  default read: {} characters, ends {:?}",
        whole.chars().count(),
        whole.lines().last().unwrap_or_default()
    );
    let n = samples(200);
    let lib = &*lib;
    let read = |input: &str| {
        lib.runtime_call("read_file", input);
    };
    let s = interleaved(
        n,
        &mut [
            &mut || read(range_big),
            &mut || read(range_small),
            &mut || read(whole_big),
            &mut || read(whole_small),
        ],
    );
    print_samples("lines 1-100 of 1g.txt", &s[0]);
    print_samples("lines 1-100 of 1m.txt", &s[1]);
    print_samples("default read of 1g.txt", &s[2]);
    print_samples("default read of 1m.txt", &s[3]);
    for (what, big, small) in [
        ("lines 1–100", &s[0], &s[1]),
        ("default read (cut at max-output)", &s[2], &s[3]),
    ] {
        report.compare(
            &format!("`read_file` {what}: 1 GiB vs 1 MiB file"),
            big,
            small,
            "about the same (≤ 1.5×)",
            Some(1.5),
        );
    }
}

fn edit(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
    println!(
        "\n# 4. `edit_file` of one line in a 100 000-line file vs native read + replace + write"
    );
    let content = hundred_thousand_lines();
    let (tool_path, native_path) = (dirs.ws.join("edit.txt"), dirs.ws.join("edit-native.txt"));
    std::fs::write(&tool_path, &content).unwrap();
    std::fs::write(&native_path, &content).unwrap();
    println!("  edit.txt: 100 000 lines, {} bytes", content.len());
    // `cordon call` and `cordon mcp` run without diffs (the target); `cordon session` and the
    // library's default carry the whole old and new text for ACP, measured alongside.
    let mut options = dirs.options();
    options.diffs = false;
    let without_diffs = lib
        .async_runtime
        .block_on(Runtime::new(options))
        .expect("the runtime starts");
    let (a, b) = (
        "let value_50000 = compute(50000,",
        "let value_50000 = compute(50001,",
    );
    let inputs = [a, b].map(|old| {
        let new = if old == a { b } else { a };
        json!({"path": "edit.txt", "edits": [{"old": old, "new": new}]}).to_string()
    });
    let n = samples(40);
    let mut native_flip = 0usize;
    let mut native = || {
        let (old, new) = if native_flip.is_multiple_of(2) {
            (a, b)
        } else {
            (b, a)
        };
        native_flip += 1;
        let text = std::fs::read_to_string(&native_path).unwrap();
        let edited = text.replacen(old, new, 1);
        assert_ne!(edited, text);
        std::fs::write(&native_path, edited).unwrap();
    };
    let (async_runtime, with_diffs) = (lib.async_runtime, lib.runtime);
    let flip = std::cell::Cell::new(0usize);
    let tool = |diffs: bool| {
        let runtime = if diffs { with_diffs } else { &without_diffs };
        let input = &inputs[flip.get() % 2];
        flip.set(flip.get() + 1);
        let out = async_runtime.block_on(runtime.call("edit_file", input, false));
        assert!(out.output.starts_with("Edited edit.txt"), "{}", out.output);
        assert_eq!(out.diff.is_some(), diffs);
    };
    let s = interleaved(
        n,
        &mut [&mut native, &mut || tool(false), &mut || tool(true)],
    );
    print_samples("native read + replacen + write", &s[0]);
    print_samples("edit_file (Runtime::call, diffs off)", &s[1]);
    print_samples("edit_file (Runtime::call, diffs on)", &s[2]);
    report.compare(
        "`edit_file` one line of a 100 000-line file vs native read + replace + write",
        &s[1],
        &s[0],
        "≤ 3×",
        Some(3.0),
    );
    report.compare(
        "the same with ACP diffs (`cordon session`): both whole texts leave the plugin",
        &s[2],
        &s[0],
        "(information)",
        None,
    );
    let _ = std::fs::remove_file(&native_path);
    let _ = std::fs::remove_file(&tool_path);
}

/// The 100 000-line file of the `edit_file` measurements (5.8 MB).
fn hundred_thousand_lines() -> String {
    (0..100_000)
        .map(|i| format!("    let value_{i} = compute({i}, \"alpha beta gamma\");\n"))
        .collect()
}

fn pathological_diff(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
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
    let mut times = Vec::new();
    for _ in 0..n {
        let started = Instant::now();
        let out = lib.runtime_call("edit_file", &input);
        times.push(started.elapsed());
        assert!(out.output.starts_with("Dry run"), "{}", out.output);
    }
    times.sort();
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

// ---------------------------------------------------------------------------------------------
// 5–6. MCP servers over stdio.

/// A minimal MCP client: newline-delimited JSON-RPC over a child's stdin and stdout.
struct Client {
    child: Child,
    stdin: Box<dyn Write>,
    stdout: BufReader<Box<dyn Read>>,
    next_id: u64,
}

impl Client {
    /// Starts the server with pipes for its standard input and output, as MCP clients do.
    fn spawn(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP server starts");
        Client {
            stdin: Box::new(child.stdin.take().unwrap()),
            stdout: BufReader::new(Box::new(child.stdout.take().unwrap())),
            child,
            next_id: 1,
        }
    }

    /// Starts the server with a Unix socket for its standard input and output: `cordon mcp`
    /// then falls back to Tokio's blocking standard streams (its transport before it used
    /// non-blocking pipes), which shows what that change bought.
    fn spawn_on_socket(command: &mut Command) -> Self {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let child = command
            .stdin(Stdio::from(OwnedFd::from(theirs.try_clone().unwrap())))
            .stdout(Stdio::from(OwnedFd::from(theirs)))
            .stderr(Stdio::null())
            .spawn()
            .expect("the MCP server starts");
        Client {
            stdin: Box::new(ours.try_clone().unwrap()),
            stdout: BufReader::new(Box::new(ours)),
            child,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap();
        line.push(b'\n');
        self.stdin.write_all(&line).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and waits for its response, answering any request of the server's on
    /// the way with an error.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the server closed its output waiting for {method}");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("method").is_some() {
                if let Some(server_id) = message.get("id") {
                    self.send(&json!({"jsonrpc": "2.0", "id": server_id,
                        "error": {"code": -32601, "message": "not supported"}}));
                }
                continue;
            }
            if message["id"] == json!(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let result = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cordon-perf", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    fn call(&mut self, tool: &str, arguments: &Value) -> String {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_ne!(result["isError"], json!(true), "{tool}: {result}");
        result["content"][0]["text"].as_str().unwrap().to_string()
    }

    fn close(mut self) {
        // End of input: the server's cue to exit. (A socket needs its other half shut too.)
        drop(self.stdin);
        drop(self.stdout);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server under test: how to start it and how to read the 4 KiB file with it.
struct Server<'a> {
    name: &'static str,
    command: Box<dyn Fn() -> Command + 'a>,
    tool: &'static str,
    arguments: Value,
}

fn cordon_mcp(dirs: &Dirs) -> Command {
    let mut command = dirs.cordon(&dirs.cache);
    command.arg("--skills").arg(&dirs.skills).arg("mcp");
    command
}

/// The official filesystem server's entry point, or why it cannot run.
fn npm_server(dirs: &Dirs) -> Result<PathBuf, String> {
    let node_ok = |program: &str| {
        Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !node_ok("node") {
        return Err("`node` is not installed".into());
    }
    let prefix = dirs.root.parent().unwrap().join("bench-npm");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if !entry.is_file() {
        if !node_ok("npm") {
            return Err(
                "`npm` is not installed to fetch @modelcontextprotocol/server-filesystem".into(),
            );
        }
        eprintln!(
            "installing @modelcontextprotocol/server-filesystem into {}",
            prefix.display()
        );
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg("@modelcontextprotocol/server-filesystem")
            .stdin(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) || !entry.is_file() {
            return Err("`npm install @modelcontextprotocol/server-filesystem` failed".into());
        }
    }
    Ok(entry)
}

fn cordon_supports_mcp() -> bool {
    Command::new(CORDON)
        .args(["mcp", "--help"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn mcp(dirs: &Dirs, report: &mut Report) {
    println!("\n# 5. `cordon mcp` vs @modelcontextprotocol/server-filesystem over stdio");
    let skip = |report: &mut Report, why: String| {
        println!("  skipped: {why}");
        report.row(
            "`cordon mcp` vs server-filesystem: calls/s and first response",
            format!("skipped: {why}"),
            "-".into(),
            "≥ 3× calls/s; ≥ 10× sooner",
            None,
        );
    };
    if !cordon_supports_mcp() {
        return skip(report, "this cordon has no `mcp` subcommand".into());
    }
    let entry = match npm_server(dirs) {
        Ok(entry) => entry,
        Err(why) => return skip(report, why),
    };
    let ws = dirs.ws.clone();
    let file = dirs.path("4k.txt");
    let expected = std::fs::read_to_string(&file).unwrap();
    let servers = [
        Server {
            name: "cordon mcp",
            command: Box::new(|| cordon_mcp(dirs)),
            tool: "read_file",
            arguments: json!({"path": "4k.txt"}),
        },
        Server {
            name: "server-filesystem (node)",
            command: Box::new(move || {
                let mut c = Command::new("node");
                c.arg(&entry).arg(&ws);
                c
            }),
            tool: "read_text_file",
            arguments: json!({"path": file}),
        },
    ];

    // Time to the first response: from spawning the server to the `initialize` result.
    let n = samples(20);
    let mut first = vec![Vec::new(); servers.len()];
    for _ in 0..n {
        for (server, first) in servers.iter().zip(&mut first) {
            let started = Instant::now();
            let mut client = Client::spawn(&mut (server.command)());
            client.initialize();
            first.push(started.elapsed());
            client.close();
        }
    }
    for (server, first) in servers.iter().zip(&mut first) {
        first.sort();
        print_samples(&format!("{}: first response", server.name), first);
    }

    // Throughput: sequential calls of the same read, in one connection each.
    let calls = samples(2000);
    let mut rates = Vec::new();
    for server in &servers {
        let mut client = Client::spawn(&mut (server.command)());
        client.initialize();
        for _ in 0..50 {
            let text = client.call(server.tool, &server.arguments);
            assert!(text.starts_with(&expected), "{}: {text}", server.name);
        }
        let started = Instant::now();
        for _ in 0..calls {
            client.call(server.tool, &server.arguments);
        }
        let elapsed = started.elapsed();
        client.close();
        let rate = calls as f64 / elapsed.as_secs_f64();
        println!(
            "  {:<44} {rate:>8.0} calls/s ({} per call, {calls} calls)",
            server.name,
            fmt(elapsed / calls as u32)
        );
        rates.push(rate);
    }
    // The same over a socket: `cordon mcp` with Tokio's blocking standard streams.
    let mut client = Client::spawn_on_socket(&mut cordon_mcp(dirs));
    client.initialize();
    for _ in 0..50 {
        client.call(servers[0].tool, &servers[0].arguments);
    }
    let started = Instant::now();
    for _ in 0..calls {
        client.call(servers[0].tool, &servers[0].arguments);
    }
    let blocking = started.elapsed();
    client.close();
    println!(
        "  {:<44} {:>8.0} calls/s ({} per call)",
        "cordon mcp, blocking stdio (over a socket)",
        calls as f64 / blocking.as_secs_f64(),
        fmt(blocking / calls as u32)
    );
    let blocking_rate = calls as f64 / blocking.as_secs_f64();
    report.row(
        "`cordon mcp` over a socket (Tokio's blocking stdio instead of non-blocking pipes)",
        format!("{blocking_rate:.0} calls/s"),
        format!("{:.1}× server-filesystem", blocking_rate / rates[1]),
        "(information)",
        None,
    );
    let r = rates[0] / rates[1];
    report.row(
        "`cordon mcp` vs server-filesystem: `read` tool calls per second (4 KiB file)",
        format!("{:.0} vs {:.0} calls/s", rates[0], rates[1]),
        format!("{r:.1}×"),
        "≥ 3×",
        Some(r >= 3.0),
    );
    let (c, s) = (median(&first[0]), median(&first[1]));
    let r = ratio(s, c);
    report.row(
        "`cordon mcp` vs server-filesystem: time to first response after start",
        format!("{} vs {}", fmt(c), fmt(s)),
        format!("{r:.1}× sooner"),
        "≥ 10× sooner",
        Some(r >= 10.0),
    );
}

fn rss(dirs: &Dirs, report: &mut Report) {
    println!("\n# 6. Resident set of an idle `cordon mcp` with every built-in loaded");
    if !cordon_supports_mcp() {
        println!("  skipped: this cordon has no `mcp` subcommand");
        report.row(
            "idle `cordon mcp` resident set",
            "skipped: no `mcp` subcommand".into(),
            "-".into(),
            "< 30 MiB",
            None,
        );
        return;
    }
    let mut sizes = Vec::new();
    for _ in 0..3 {
        let mut client = Client::spawn(&mut cordon_mcp(dirs));
        client.initialize();
        let tools = client.request("tools/list", json!({}));
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["bash", "read_file", "write_file", "edit_file", "read_skill"]
        );
        std::thread::sleep(Duration::from_millis(200));
        sizes.push(rss_of(&client.child.id().to_string()));
        client.close();
    }
    sizes.sort();
    let size = sizes[sizes.len() / 2];
    println!(
        "  VmRSS: {}",
        sizes.iter().map(|&s| mib(s)).collect::<Vec<_>>().join(", ")
    );
    report.row(
        "idle `cordon mcp` resident set, all 5 built-ins loaded",
        mib(size),
        "-".into(),
        "< 30 MiB",
        Some(size < 30 * MIB),
    );

    // What stays resident after large calls: each plugin's pooled memory keeps the pages a
    // call dirtied, up to a bound, for the next call.
    let big = dirs.ws.join("rss-edit.txt");
    std::fs::write(&big, hundred_thousand_lines()).unwrap();
    let mut client = Client::spawn(&mut cordon_mcp(dirs));
    client.initialize();
    client.call("read_file", &json!({"path": "1m.txt"}));
    client.call(
        "edit_file",
        &json!({"path": "rss-edit.txt", "dry_run": true,
                "edits": [{"old": "value_50000 =", "new": "value_50001 ="}]}),
    );
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_of(&client.child.id().to_string());
    client.close();
    let _ = std::fs::remove_file(&big);
    println!(
        "  VmRSS after a default read and a 5.8 MB edit_file dry run: {}",
        mib(after)
    );
    report.row(
        "`cordon mcp` resident set after a 1 MiB read and a 5.8 MB edit (dry run)",
        mib(after),
        format!("+{}", mib(after.saturating_sub(size))),
        "(information)",
        None,
    );
}

// ---------------------------------------------------------------------------------------------
// Where start-up time goes (only when asked for: `-- breakdown`).

fn breakdown(dirs: &Dirs) {
    use cordon::engine::{Cache, Engine};
    use cordon::plugin::Plugin;
    println!("\n# Start-up breakdown (in-process, warm cache)");
    let async_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut options = dirs.options();
    options.workspace = dirs.ws.canonicalize().unwrap();
    options.shell.workspace = options.workspace.clone();
    let n = samples(30);
    let time = |what: &str, f: &mut dyn FnMut()| {
        let mut t: Vec<Duration> = (0..n)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed()
            })
            .collect();
        t.sort();
        print_samples(what, &t);
    };
    let cache = || {
        Some(Cache {
            dir: dirs.cache.clone(),
            key: options.cache_key.clone().expect("a config directory"),
        })
    };
    time("Engine::new (pooling allocator, epoch thread)", &mut || {
        drop(Engine::new(cache()).unwrap());
    });
    let engine = Engine::new(cache()).unwrap();
    let specs = cordon::builtin::specs(&options);
    for spec in &specs {
        time(
            &format!("{}: is_cached ({} KiB)", spec.name, spec.bytes.len() >> 10),
            &mut || assert!(engine.is_cached(&spec.digest)),
        );
        time(
            &format!("{}: component (deserialize)", spec.name),
            &mut || {
                drop(
                    engine
                        .component(&spec.name, &spec.bytes, &spec.digest)
                        .unwrap(),
                );
            },
        );
        let compiled = engine
            .component(&spec.name, &spec.bytes, &spec.digest)
            .unwrap();
        time(&format!("{}: Plugin::load", spec.name), &mut || {
            let plugin = async_runtime.block_on(Plugin::load(
                &engine,
                &spec.name,
                spec.source.clone(),
                compiled.clone(),
                spec.grants.clone(),
                spec.limits,
            ));
            drop(plugin.unwrap());
        });
    }
    time("Runtime::new (everything)", &mut || {
        drop(
            async_runtime
                .block_on(Runtime::new(dirs.options()))
                .unwrap(),
        );
    });
}
