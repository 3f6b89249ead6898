//! What the host and the sandbox helper tell each other: the request (on the helper's standard
//! input) and the report (the last line of the helper's standard error).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One command and the confinement to run it under. Paths travel as bytes: they need not be
/// UTF-8.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub command: String,
    pub workspace: Vec<u8>,
    /// The private directory of the call; `home` and `tmp` exist in it.
    pub private_dir: Vec<u8>,
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

/// How the command ended, as the helper saw it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Report {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Refused(String),
}

impl Report {
    /// The report as one line, newline included.
    pub fn to_line(&self) -> String {
        let body = match self {
            Report::Exited(code) => format!("exited {code}"),
            Report::Signaled(sig) => format!("signaled {sig}"),
            Report::TimedOut => "timedout".to_string(),
            Report::Refused(why) => format!("refused {}", why.replace('\n', " ")),
        };
        format!("\n{PREFIX} {body}\n")
    }

    /// The report in what the helper wrote, and everything else it wrote (diagnostics such
    /// as a panic message).
    pub fn parse(text: &str) -> (Option<Report>, String) {
        let mut report = None;
        let mut other = String::new();
        for line in text.lines() {
            match line.strip_prefix(PREFIX) {
                Some(body) => report = Self::parse_body(body.trim_start()),
                None if line.trim().is_empty() => {}
                None => {
                    other.push_str(line);
                    other.push('\n');
                }
            }
        }
        (report, other.trim_end().to_string())
    }

    fn parse_body(body: &str) -> Option<Report> {
        let (kind, rest) = body.split_once(' ').unwrap_or((body, ""));
        match kind {
            "exited" => rest.parse().ok().map(Report::Exited),
            "signaled" => rest.parse().ok().map(Report::Signaled),
            "timedout" => Some(Report::TimedOut),
            "refused" => Some(Report::Refused(rest.to_string())),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip() {
        for report in [
            Report::Exited(3),
            Report::Signaled(9),
            Report::TimedOut,
            Report::Refused("no Landlock\nat all".into()),
        ] {
            let line = report.to_line();
            let (parsed, other) = Report::parse(&format!("thread panicked\n{line}"));
            let expected = match report {
                Report::Refused(_) => Report::Refused("no Landlock at all".into()),
                r => r,
            };
            assert_eq!(parsed, Some(expected));
            assert_eq!(other, "thread panicked");
        }
    }
}
