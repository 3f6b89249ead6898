//! Section `pipe`: `cordon session` as an agent drives it, one JSON line in and its answer out
//! through pipes, display and ACP view included: the per-call overhead of `read_file` on a
//! 4 KiB file above `std::fs::read_to_string` (a figure, no longer a target). A run of N calls and a
//! run of one are timed whole, process start to exit, so (N-call run − 1-call run) / (N − 1)
//! is the cost of one more call, start-up excluded. `cat`, echoing the same line through the
//! same pipes, is timed the same way beside it: the floor of any process that answers a line.

use std::process::Command;
use std::time::Duration;

use crate::fixture::Dirs;
use crate::harness::{fmt, median, ratio, repeated, samples};
use crate::report::Report;

const REQUEST: &str = r#"{"tool":"read_file","input":{"path":"4k.txt"}}"#;

pub(crate) fn run(dirs: &Dirs, report: &mut Report) {
    println!(
        "\n# `cordon session` through pipes: `read_file` of a 4 KiB file, one call after another"
    );
    let n = samples(3000).max(2);
    let path = dirs.ws.join("4k.txt");
    let native = repeated(samples(3000), &mut || {
        assert_eq!(std::fs::read_to_string(&path).unwrap().len(), 4096);
    });
    let (mut one, mut many) = (Vec::new(), Vec::new());
    let (mut cat_one, mut cat_many) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        one.push(session(dirs, 1));
        many.push(session(dirs, n));
        cat_one.push(cat(1));
        cat_many.push(cat(n));
    }
    let native = median(&native);
    let (one, many, per_call) = added(one, many, n);
    let over = per_call.saturating_sub(native);
    let (_, _, floor) = added(cat_one, cat_many, n);
    println!(
        "  {n} calls: {}; 1 call: {}; per call: {}; std::fs::read_to_string: {}; `cat` echoing \
         the line: {} a round trip",
        fmt(many),
        fmt(one),
        fmt(per_call),
        fmt(native),
        fmt(floor)
    );
    report.row(
        "`cordon session` per-call overhead, `read_file` 4 KiB, through pipes, above native",
        format!(
            "{} ({} per call vs {})",
            fmt(over),
            fmt(per_call),
            fmt(native)
        ),
        format!("{:.0}×", per_call.as_secs_f64() / native.as_secs_f64()),
        "(a figure: two processes handing a line to each other cost most of it)",
        None,
    );
    report.row(
        "`cat` echoing the request line through the same pipes (the floor of any answer)",
        format!("{} a round trip", fmt(floor)),
        format!("cordon's call {:.1}× it", ratio(per_call, floor)),
        "(information)",
        None,
    );
}

/// One `cordon session` process answering `calls` requests, each sent once the one before
/// it was answered; the time from its start to its exit.
fn session(dirs: &Dirs, calls: usize) -> Duration {
    let mut command = dirs.cordon(&dirs.cache);
    command.arg("session");
    crate::driven::session(command, REQUEST, calls)
}

/// `cat` echoing `calls` request lines, each sent once the one before it came back; the time
/// from its start to its exit.
fn cat(calls: usize) -> Duration {
    crate::driven::round_trips(Command::new("cat"), REQUEST, calls, |line| {
        assert_eq!(line.trim_end(), REQUEST)
    })
}

/// The medians of runs of one call and of `n` calls, and what each call past the first added.
fn added(
    mut one: Vec<Duration>,
    mut many: Vec<Duration>,
    n: usize,
) -> (Duration, Duration, Duration) {
    one.sort();
    many.sort();
    let (one, many) = (median(&one), median(&many));
    (one, many, many.saturating_sub(one) / (n as u32 - 1))
}
