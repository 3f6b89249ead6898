//! Section 2, `session`: the in-process per-call overhead of `read_file` on a 4 KiB file
//! through a [`Session`](cordon::session::Session) (and through the bare runtime) above
//! `std::fs::read_to_string` (target: at most 60 µs); then 10 000 consecutive session calls,
//! whose resident set must stay flat.

use std::time::{Duration, Instant};

use crate::fixture::Dirs;
use crate::harness::{MIB, fmt, interleaved, median, mib, print_samples, ratio, rss_of, samples};
use crate::in_process::Lib;
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
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
