//! The measuring: sample counts, timing runs side by side (interleaved, so that machine noise
//! hits all alike), medians and percentiles, the units printed, and the resident set and CPU
//! time read from the kernel.

use std::time::{Duration, Instant};

pub(crate) const MIB: u64 = 1 << 20;

/// Scales a sample count by `CORDON_PERF_SCALE`.
pub(crate) fn samples(n: usize) -> usize {
    let scale: f64 = std::env::var("CORDON_PERF_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    ((n as f64 * scale) as usize).max(3)
}

/// Runs each of `runs` `n` times, interleaved so that machine noise hits all alike, and returns
/// each one's samples, sorted.
pub(crate) fn interleaved(n: usize, runs: &mut [&mut dyn FnMut()]) -> Vec<Vec<Duration>> {
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

/// Runs `run` `n` times and returns its samples, sorted.
pub(crate) fn repeated(n: usize, run: &mut dyn FnMut()) -> Vec<Duration> {
    interleaved(n, &mut [run]).remove(0)
}

pub(crate) fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

fn p95(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 95 / 100).min(sorted.len() - 1)]
}

pub(crate) fn fmt(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

pub(crate) fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

pub(crate) fn print_samples(name: &str, sorted: &[Duration]) {
    println!(
        "  {name:<44} median {:>10}  p95 {:>10}  (n={})",
        fmt(median(sorted)),
        fmt(p95(sorted)),
        sorted.len()
    );
}

/// The resident set of process `pid` ("self" for this one), in bytes.
pub(crate) fn rss_of(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}

/// The CPU time (user + system) of this process's waited-for children so far.
pub(crate) fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
