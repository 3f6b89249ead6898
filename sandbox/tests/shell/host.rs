//! What a test sees from outside the sandbox: the host's processes, marked to be told apart,
//! and whether it runs as root. The `cordon` binary's tests (tests/integration) use it too.

use std::time::{Duration, Instant};

pub(crate) fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() == 0 }
}

/// A marker no other process of the machine has on its command line.
pub(crate) fn marker(what: &str) -> String {
    format!("cordon-{what}-{}-{:?}", std::process::id(), Instant::now())
        .replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "")
}

/// A command that starts in the background and lives long, with `mark` on its command line.
pub(crate) fn sleeper(mark: &str) -> String {
    format!("sh -c 'sleep 100; : {mark}'")
}

/// The host processes whose command line holds `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// Waits up to `limit` for no host process to hold `marker`; the ones left.
pub(crate) fn wait_until_gone(marker: &str, limit: Duration) -> Vec<u32> {
    let until = Instant::now() + limit;
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
