//! The host side of a command: drain its output within its bound, put the proxy's questions
//! to the user, read the helper's report, and give the command up at its deadline or when
//! stopped. Confined commands are sent to a [`super::Shell`]'s helper; an unconfined one gets a
//! helper of its own, started here.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::helper::HelperError;
use super::process::pipe;
use super::protect;
use super::setting::Setting;
use super::wire::{self, Report, Request};
use super::{Asker, Completion, Hooks, Policy, Progress, Status, Stop, helper};

/// How long the host keeps reading output after the helper has reported (the tree is dead by
/// then; this only covers a writer that escaped it).
const AFTER_REPORT: Duration = Duration::from_millis(200);

/// How many times the cap the tail may grow to before its front is dropped.
const TAIL_SLACK: usize = 2;

/// The most bytes of helper diagnostics kept.
const REPORT_CAP: usize = 64 << 10;

/// The workspace of `policy`, canonical, and its identity as (device, inode).
pub(super) fn workspace(policy: &Policy) -> Result<(PathBuf, (u64, u64)), HelperError> {
    let unusable = |source: io::Error| HelperError::Workspace {
        path: policy.workspace.clone(),
        source,
    };
    let path = policy.workspace.canonicalize().map_err(unusable)?;
    let meta = std::fs::metadata(&path).map_err(unusable)?;
    Ok((path, (meta.dev(), meta.ino())))
}

/// `policy` as the helper gets it: its workspace canonical.
pub(super) fn sent(policy: &Policy) -> Policy {
    let workspace = workspace(policy).map_or_else(|_| policy.workspace.clone(), |(p, _)| p);
    Policy {
        workspace,
        ..policy.clone()
    }
}

/// Runs an unconfined command in a helper of its own (see [`super::helper`]).
pub(super) fn once(policy: &Policy, command: &str, timeout: Duration, hooks: &Hooks) -> Completion {
    match spawn(policy, command, timeout) {
        Ok((mut helper, pipes)) => {
            let pipes = Pipes {
                stop: hooks.stop.clone(),
                progress: hooks.progress.clone(),
                ..pipes
            };
            // Given up, the report pipe closes: the helper takes that for the host gone, kills
            // the command and exits.
            let done = collect(policy, timeout, pipes, None, drop);
            end(&mut helper);
            done
        }
        Err(why) => Completion::refused(why.into()),
    }
}

/// Starts the helper of one unconfined command: the helper and the host's ends of its pipes.
fn spawn(policy: &Policy, command: &str, timeout: Duration) -> Result<(Child, Pipes), HelperError> {
    let request = Request {
        policy: Policy {
            timeout,
            ..sent(policy)
        },
        command: command.to_string(),
    };
    workspace(policy)?;
    let request = request_file(&request).map_err(HelperError::Request)?;
    let (out_read, out_write) = pipe().map_err(HelperError::Pipe)?;
    let (report_read, report_write) = pipe().map_err(HelperError::Pipe)?;
    // The Command (and with it the parent's copies of the write ends) is dropped right after
    // the spawn, so the pipes reach end-of-file once the helper side is done.
    let helper = helper::command(policy)?
        .stdin(Stdio::from(request))
        .stdout(Stdio::from(out_write))
        .stderr(Stdio::from(report_write))
        .spawn()
        .map_err(|source| HelperError::Start {
            helper: policy.helper.clone(),
            source,
        })?;
    let pipes = Pipes {
        out: File::from(out_read),
        report: File::from(report_read),
        stop: None,
        progress: None,
    };
    Ok((helper, pipes))
}

/// Reads a command's output and report (putting the proxy's questions to the asker of
/// `asking`) and makes its [`Completion`]; the command was given `timeout`. When the host
/// gives up on the command (its deadline and grace passed, or it was stopped), `give_up` gets
/// the report pipe, if the helper has not closed it yet, to make the helper kill the command.
pub(super) fn collect(
    policy: &Policy,
    timeout: Duration,
    pipes: Pipes,
    asking: Option<(Asker, File)>,
    give_up: impl FnOnce(Option<File>),
) -> Completion {
    let deadline = Instant::now() + timeout + super::BACKSTOP_GRACE;
    let cap = policy.output_cap;
    let drained = drain(pipes, cap, deadline, asking);
    let cut = drained.as_ref().err().map(|(_, cut)| *cut);
    let Drained {
        mut kept,
        mut tail,
        mut omitted,
        report,
        rest,
    } = drained.unwrap_or_else(|(d, _)| d);
    if cut.is_some() {
        give_up(rest);
    }
    omitted += keep_last(&mut tail, cap);
    let gap = omitted > 0;
    if !gap {
        kept.append(&mut tail);
    }
    omitted += trim_partial_char(&mut kept, gap);
    omitted += trim_partial_lead(&mut tail, gap);
    // What is added below (hints, refused connections) goes at the very end: after the gap,
    // when there is one.
    let (head, mut output) = match gap {
        true => (
            Some(String::from_utf8_lossy(&kept).into_owned()),
            String::from_utf8_lossy(&tail).into_owned(),
        ),
        false => (None, String::from_utf8_lossy(&kept).into_owned()),
    };
    let text = String::from_utf8_lossy(&report);
    let (report, diagnostics) = wire::parse_report(&text);
    let (status, layers, blocked) = match report {
        _ if cut == Some(Cut::Deadline) => (
            Status::TimedOut(super::whole_secs(timeout)),
            Vec::new(),
            Vec::new(),
        ),
        _ if cut == Some(Cut::Stopped) => (Status::Cancelled, Vec::new(), Vec::new()),
        Some(Report {
            status,
            layers,
            protected,
            blocked,
            quarantined,
        }) => {
            if let Some(hint) = protect::hint(&output, &protected) {
                output.push_str(&hint);
            }
            for note in ungranted(&output, &policy.ungranted) {
                if !output.ends_with('\n') {
                    output.push('\n');
                }
                output.push_str(&note);
            }
            // Once: a client may have printed the proxy's refusal (its body) already.
            let unseen: Vec<&str> = (blocked.iter())
                .map(|b| b.line.as_str())
                .filter(|line| !output.contains(line))
                .chain(quarantined.iter().map(String::as_str))
                .collect();
            for line in unseen {
                if !output.is_empty() && !output.ends_with('\n') {
                    output.push('\n');
                }
                output.push_str(line);
                output.push('\n');
            }
            (status, layers, blocked)
        }
        None => (Status::HelperLost(diagnostics), Vec::new(), Vec::new()),
    };
    let (output, tail) = match head {
        Some(head) => (head, output),
        None => (output, String::new()),
    };
    Completion {
        output,
        tail,
        omitted_bytes: omitted,
        status,
        layers,
        blocked,
    }
}

/// The notes for the programs `output` says bash did not find that one of the toolchain
/// directories `dirs` holds: where it is, and the option that grants it.
fn ungranted(output: &str, dirs: &[PathBuf]) -> Vec<String> {
    let mut notes = Vec::new();
    for line in output.lines() {
        let Some(program) = (line.strip_suffix(": command not found"))
            .and_then(|l| l.rsplit(": ").next())
            .filter(|p| !p.is_empty() && !p.contains('/'))
        else {
            continue;
        };
        if let Some(dir) = dirs.iter().find(|d| d.join(program).is_file()) {
            notes.push(format!(
                "[cordon: {program} is in {}, one of your toolchains, which bash commands get \
                 with {}]\n",
                dir.display(),
                Setting::Toolchains
            ));
        }
    }
    notes
}

/// The request, serialized into an anonymous memory file positioned at its start.
fn request_file(request: &Request) -> io::Result<File> {
    let json = serde_json::to_vec(request).map_err(io::Error::other)?;
    // SAFETY: a valid C string and flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"cordon-bash-request".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(&json)?;
    file.rewind()?;
    Ok(file)
}

/// What was read from the helper.
struct Drained {
    /// The output's first bytes, up to the cap.
    kept: Vec<u8>,
    /// What came after them, of which the last cap bytes are kept (a few times that, while
    /// reading, so that dropping the front is rare).
    tail: Vec<u8>,
    /// The bytes read but kept in neither.
    omitted: u64,
    report: Vec<u8>,
    /// The report pipe, when the command was given up before the helper closed it.
    rest: Option<File>,
}

/// What the host reads while a command runs.
pub(super) struct Pipes {
    pub out: File,
    pub report: File,
    /// Polled too: once given, the command is given up.
    pub stop: Option<Stop>,
    pub progress: Option<Progress>,
}

/// Why the host gave up on a command before its helper reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    Deadline,
    Stopped,
}

/// Reads the output (keeping its first `cap` bytes and about its last `cap`) and the report
/// until both reach end-of-file: `Err` with what was read when `deadline` passes or the stop
/// signal comes first. With `asking`, the proxy's questions in the report are put to the asker
/// and answered.
fn drain(
    pipes: Pipes,
    cap: usize,
    deadline: Instant,
    mut asking: Option<(Asker, File)>,
) -> Result<Drained, (Drained, Cut)> {
    let Pipes {
        mut out,
        mut report,
        stop,
        progress,
    } = pipes;
    // The report up to here holds no question.
    let mut scanned = 0;
    let mut drained = Drained {
        kept: Vec::with_capacity(cap.min(64 << 10)),
        tail: Vec::new(),
        omitted: 0,
        report: Vec::new(),
        rest: None,
    };
    let mut buf = vec![0u8; 64 << 10];
    let (mut out_open, mut report_open) = (true, true);
    let mut deadline = deadline;
    while out_open || report_open {
        let now = Instant::now();
        if now >= deadline {
            // Only a failure if the helper has not reported; once it has, the tree is dead
            // and an output writer that is still around is not waited for.
            return if report_open {
                drained.rest = Some(report);
                Err((drained, Cut::Deadline))
            } else {
                Ok(drained)
            };
        }
        let mut fds = [
            libc::pollfd {
                fd: if out_open { out.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if report_open { report.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop.as_ref().map_or(-1, Stop::fd),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let wait = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of three pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 3, wait) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            drained.rest = report_open.then_some(report);
            return Err((drained, Cut::Deadline));
        }
        if fds[2].revents != 0 {
            drained.rest = report_open.then_some(report);
            return Err((drained, Cut::Stopped));
        }
        if fds[0].revents != 0 {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => {
                    if let Some(progress) = &progress {
                        progress.add(&buf[..n]);
                    }
                    let room = cap.saturating_sub(drained.kept.len());
                    let keep = n.min(room);
                    drained.kept.extend_from_slice(&buf[..keep]);
                    drained.tail.extend_from_slice(&buf[keep..n]);
                    if drained.tail.len() > TAIL_SLACK * cap.max(1) {
                        drained.omitted += keep_last(&mut drained.tail, cap);
                    }
                }
            }
        }
        if fds[1].revents != 0 {
            match report.read(&mut buf) {
                Ok(0) | Err(_) => {
                    report_open = false;
                    deadline = deadline.min(Instant::now() + AFTER_REPORT);
                }
                Ok(n) => {
                    let keep = n.min(REPORT_CAP.saturating_sub(drained.report.len()));
                    drained.report.extend_from_slice(&buf[..keep]);
                    if let Some((asker, answers)) = &mut asking {
                        answer(&mut drained.report, &mut scanned, asker, answers);
                    }
                }
            }
        }
    }
    Ok(drained)
}

/// Puts each complete question of `report` after `scanned` to `asker` and writes the answer
/// to `answers`; the questions are taken out of the report.
fn answer(report: &mut Vec<u8>, scanned: &mut usize, asker: &Asker, answers: &mut File) {
    while let Some(end) = report[*scanned..].iter().position(|&b| b == b'\n') {
        let end = *scanned + end;
        match wire::parse_ask(&report[*scanned..end]) {
            Some((host, port)) => {
                report.drain(*scanned..=end);
                let yes = asker.ask(&host, port);
                let _ = answers.write_all(if yes { b"y\n" } else { b"n\n" });
            }
            None => *scanned = end + 1,
        }
    }
}

/// How long a helper whose host has let go of a command may take to kill it and say so.
const LET_GO: Duration = Duration::from_secs(2);

/// Reads the report pipe of a command given up until the helper closes it (the command is
/// dead then), for at most [`LET_GO`].
pub(super) fn linger(mut report: File) {
    let until = Instant::now() + LET_GO;
    let mut buf = [0u8; 4096];
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        let mut fd = libc::pollfd {
            fd: report.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let wait = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut fd, 1, wait) } < 0
            && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted
        {
            return;
        }
        if fd.revents != 0 && matches!(report.read(&mut buf), Ok(0) | Err(_)) {
            return;
        }
    }
}

/// Waits for the helper of an unconfined command, which ends once its command does (or, let
/// go of, once it has killed it), killing it if it outstays [`LET_GO`].
fn end(helper: &mut Child) {
    let until = Instant::now() + LET_GO;
    while Instant::now() < until {
        match helper.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break,
        }
    }
    let _ = helper.kill();
    let _ = helper.wait();
}

/// Drops the front of `tail` so that it holds at most its last `cap` bytes; returns the bytes
/// dropped.
fn keep_last(tail: &mut Vec<u8>, cap: usize) -> u64 {
    let over = tail.len().saturating_sub(cap);
    tail.drain(..over);
    over as u64
}

/// When the tail starts after a gap, drops the continuation bytes of a UTF-8 sequence whose
/// start the gap took; returns the bytes dropped.
fn trim_partial_lead(tail: &mut Vec<u8>, cut: bool) -> u64 {
    if !cut {
        return 0;
    }
    let lead = tail
        .iter()
        .take(3)
        .take_while(|&&b| b & 0xC0 == 0x80)
        .count();
    tail.drain(..lead);
    lead as u64
}

/// When output was cut at the cap, drops a UTF-8 sequence the cut left incomplete (so the cut
/// does not show as a replacement character); returns the bytes dropped.
fn trim_partial_char(bytes: &mut Vec<u8>, cut: bool) -> u64 {
    if !cut {
        return 0;
    }
    let len = bytes.len();
    // The start of the last character: at most 3 continuation bytes back.
    let Some(start) = (len.saturating_sub(4)..len)
        .rev()
        .find(|&i| bytes[i] & 0xC0 != 0x80)
    else {
        return 0;
    };
    let need = match bytes[start] {
        b if b >= 0xF0 => 4,
        b if b >= 0xE0 => 3,
        b if b >= 0xC0 => 2,
        _ => 1,
    };
    if len - start < need {
        bytes.truncate(start);
        (len - start) as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_bytes_from_a_character_start() {
        let mut tail = b"abcdef".to_vec();
        assert_eq!(keep_last(&mut tail, 4), 2);
        assert_eq!(tail, b"cdef");
        assert_eq!(keep_last(&mut tail, 10), 0);
        let mut cut = "éa".as_bytes()[1..].to_vec();
        assert_eq!(trim_partial_lead(&mut cut, true), 1);
        assert_eq!(cut, b"a");
        let mut whole = "éa".as_bytes().to_vec();
        assert_eq!(trim_partial_lead(&mut whole, true), 0);
        let mut uncut = "éa".as_bytes()[1..].to_vec();
        assert_eq!(trim_partial_lead(&mut uncut, false), 0);
    }

    #[test]
    fn a_cut_character_is_dropped() {
        let mut bytes = "aé".as_bytes()[..2].to_vec();
        assert_eq!(trim_partial_char(&mut bytes, true), 1);
        assert_eq!(bytes, b"a");
        let mut whole = "aé".as_bytes().to_vec();
        assert_eq!(trim_partial_char(&mut whole, true), 0);
        assert_eq!(whole, "aé".as_bytes());
        let mut uncut = vec![b'a', 0xC3];
        assert_eq!(trim_partial_char(&mut uncut, false), 0);
        assert_eq!(uncut.len(), 2);
    }
}
