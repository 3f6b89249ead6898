//! What the host and the sandbox helper tell each other: the request (on the helper's standard
//! input) and the report (the last line of the helper's standard error).

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Blocked, Layer, Network, Status};

/// One command and the confinement to run it under. Paths travel as bytes: they need not be
/// UTF-8.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub command: String,
    pub workspace: Vec<u8>,
    pub extra_read: Vec<Vec<u8>>,
    pub extra_write: Vec<Vec<u8>>,
    pub network: Network,
    pub unconfined: bool,
    pub timeout_ms: u64,
    pub memory_limit: Option<u64>,
    pub max_processes: u32,
    /// The layers the command may run without, when the kernel cannot enforce them.
    pub allow_missing: Vec<String>,
    /// Protected paths the user relaxed.
    pub unprotect: Vec<Vec<u8>>,
    /// The home directory that lasts between calls; none: a private one per call.
    pub home: Option<Vec<u8>>,
    /// Variables set on top of the fixed environment.
    pub env: Vec<(String, String)>,
    /// Directories put before the fixed `PATH`.
    pub path: Vec<Vec<u8>>,
    /// Paths covered even inside a granted tree.
    pub hidden: Vec<Vec<u8>>,
    /// Whether the proxy may ask about hosts off the allowlist (answers on descriptor 3).
    #[serde(default)]
    pub ask: bool,
}

pub(super) fn to_bytes(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

pub(super) fn to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes.to_vec()))
}

/// The marker that starts the report line.
const PREFIX: &str = "cordon-sandbox-report:";

/// The marker that starts a question of the proxy to the host: may a command reach a host
/// that is not on its allowlist? The host answers `y` or `n`, and a newline, on the helper's
/// descriptor 3.
const ASK_PREFIX: &str = "cordon-sandbox-ask:";

#[derive(Serialize, Deserialize)]
struct Question {
    host: String,
    port: u16,
}

/// The question whether `host:port` may be reached, as one line.
pub(super) fn ask_line(host: &str, port: u16) -> String {
    let question = Question {
        host: host.to_string(),
        port,
    };
    let json = serde_json::to_string(&question).expect("a question serializes");
    format!("\n{ASK_PREFIX} {json}\n")
}

/// The host and port a line of the helper asks about, if it is a question.
pub(super) fn parse_ask(line: &[u8]) -> Option<(String, u16)> {
    let json = std::str::from_utf8(line).ok()?.strip_prefix(ASK_PREFIX)?;
    let question: Question = serde_json::from_str(json.trim()).ok()?;
    Some((question.host, question.port))
}

/// How the command ended, and under which layers of confinement.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Report {
    pub status: Status,
    pub layers: Vec<Layer>,
    /// The protected paths the command saw read-only, relative to the workspace.
    #[serde(default)]
    pub protected: Vec<String>,
    /// The connections the proxy refused.
    #[serde(default)]
    pub blocked: Vec<Blocked>,
}

/// The report as one line (newline included): the marker, then the [`Report`] as JSON.
pub(super) fn report_line(report: &Report) -> String {
    let json = serde_json::to_string(report).expect("a report serializes");
    format!("\n{PREFIX} {json}\n")
}

/// The report in what the helper wrote, and everything else it wrote (diagnostics such as a
/// panic message).
pub(super) fn parse_report(text: &str) -> (Option<Report>, String) {
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
            Status::OutOfMemory(4096),
            Status::Refused("no Landlock\nat all".into()),
        ] {
            let layers = vec![Layer::new("pid", crate::Enforcement::Enforced, "its own")];
            let protected = vec![".git/hooks".to_string()];
            let report = Report {
                status,
                layers,
                protected,
                blocked: Vec::new(),
            };
            let line = report_line(&report);
            let (parsed, other) = parse_report(&format!("thread panicked\n{line}"));
            assert_eq!(parsed, Some(report));
            assert_eq!(other, "thread panicked");
        }
    }
}
