//! What the host and the sandbox helper tell each other: the request (on the helper's standard
//! input) and the report (the last line of the helper's standard error).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Status;

/// One command and the confinement to run it under. Paths travel as bytes: they need not be
/// UTF-8.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub command: String,
    pub workspace: Vec<u8>,
    pub extra_read: Vec<Vec<u8>>,
    pub extra_write: Vec<Vec<u8>>,
    pub network: bool,
    pub unconfined: bool,
    pub timeout_ms: u64,
    pub memory_limit: Option<u64>,
    pub max_processes: u32,
}

pub(super) fn to_bytes(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

pub(super) fn to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes.to_vec()))
}

/// The marker that starts the report line.
const PREFIX: &str = "cordon-sandbox-report:";

/// The report of how the command ended, as one line (newline included): the marker, then the
/// [`Status`] as JSON.
pub(super) fn report_line(status: &Status) -> String {
    let json = serde_json::to_string(status).expect("a status serializes");
    format!("\n{PREFIX} {json}\n")
}

/// The report in what the helper wrote, and everything else it wrote (diagnostics such as a
/// panic message).
pub(super) fn parse_report(text: &str) -> (Option<Status>, String) {
    let mut report = None;
    let mut other = String::new();
    for line in text.lines() {
        match line.strip_prefix(PREFIX) {
            Some(json) => report = serde_json::from_str(json.trim_start()).ok(),
            None if line.trim().is_empty() => {}
            None => {
                other.push_str(line);
                other.push('\n');
            }
        }
    }
    (report, other.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for status in [
            Status::Exited(3),
            Status::Signaled("SIGKILL".into()),
            Status::TimedOut(30),
            Status::Refused("no Landlock\nat all".into()),
        ] {
            let line = report_line(&status);
            let (parsed, other) = parse_report(&format!("thread panicked\n{line}"));
            assert_eq!(parsed, Some(status));
            assert_eq!(other, "thread panicked");
        }
    }
}
