//! Section 3, `large`: `read_file` of lines 1–100, and a default read (cut at the output
//! limit), of a 1 GiB file against the same on a 1 MiB file; a read must not cost more for
//! the size of the file it reads only the start of (target: about the same, at most 1.5×).

use crate::fixture::Dirs;
use crate::harness::{interleaved, print_samples, samples};
use crate::in_process::Lib;
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, lib: &mut Lib, report: &mut Report) {
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
