//! The host side of a command: start the sandbox helper, drain the output within its bound,
//! read the helper's report, and kill the helper if it overstays.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::process::pipe;
use super::protect;
use super::wire::{self, Report, Request};
use super::{Asker, Completion, Network, Policy, Progress, SANDBOX_ARG, Status, Stop};

/// How long the host keeps reading output after the helper has reported (the tree is dead by
/// then; this only covers a writer that escaped it).
const AFTER_REPORT: Duration = Duration::from_millis(200);

/// The most bytes of helper diagnostics kept.
const REPORT_CAP: usize = 64 << 10;

pub(super) fn run(policy: &Policy, command: &str) -> Completion {
    match start(policy, command) {
        Ok(completion) => completion,
        Err(why) => Completion::refused(why),
    }
}

fn start(policy: &Policy, command: &str) -> Result<Completion, String> {
    let workspace = policy.workspace.canonicalize().map_err(|e| {
        format!(
            "the workspace {} is unusable: {e}",
            policy.workspace.display()
        )
    })?;
    let request = Request {
        command: command.to_string(),
        workspace: wire::to_bytes(&workspace),
        extra_read: policy
            .extra_read
            .iter()
            .map(|p| wire::to_bytes(p))
            .collect(),
        extra_write: policy
            .extra_write
            .iter()
            .map(|p| wire::to_bytes(p))
            .collect(),
        network: policy.network.clone(),
        unconfined: policy.unconfined,
        timeout_ms: u64::try_from(policy.timeout.as_millis()).unwrap_or(u64::MAX),
        memory_limit: policy.memory_limit,
        max_processes: policy.max_processes,
        allow_missing: policy.allow_missing.clone(),
        unprotect: policy.unprotect.iter().map(|p| wire::to_bytes(p)).collect(),
        home: policy.home.as_deref().map(wire::to_bytes),
        env: policy.env.clone(),
        path: policy.path.iter().map(|p| wire::to_bytes(p)).collect(),
        hidden: policy.hidden.iter().map(|p| wire::to_bytes(p)).collect(),
        ask: policy.ask.is_some() && matches!(policy.network, Network::Allow(_)),
    };
    let request_asks = request.ask;
    let request = request_file(&request).map_err(|e| format!("cannot pass the command on: {e}"))?;
    let (out_read, out_write) = pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let (report_read, report_write) = pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let (answers_read, answers_write) = match (&policy.ask, request_asks) {
        (Some(asker), true) => {
            let (read, write) = pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
            (Some(read), Some((asker.clone(), File::from(write))))
        }
        _ => (None, None),
    };
    let started = Instant::now();
    // The Command (and with it the parent's copies of the write ends) is dropped right after
    // the spawn, so the pipes reach end-of-file once the helper side is done.
    let mut helper = Command::new(&policy.helper);
    helper
        .arg0("cordon")
        .arg(SANDBOX_ARG)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(request))
        .stdout(Stdio::from(out_write))
        .stderr(Stdio::from(report_write));
    if let Some(read) = &answers_read {
        let fd = read.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            helper.pre_exec(move || {
                // dup2 onto itself would leave the descriptor close-on-exec.
                let done = match fd == ANSWERS_FD {
                    true => libc::fcntl(fd, libc::F_SETFD, 0),
                    false => libc::dup2(fd, ANSWERS_FD),
                };
                match done < 0 {
                    true => Err(io::Error::last_os_error()),
                    false => Ok(()),
                }
            });
        }
    }
    let spawned = helper.spawn();
    drop((helper, answers_read));
    let mut helper = spawned.map_err(|e| {
        format!(
            "cannot start the sandbox helper {}: {e}",
            policy.helper.display()
        )
    })?;

    let deadline = started + policy.timeout + super::BACKSTOP_GRACE;
    let drained = drain(
        Pipes {
            out: File::from(out_read),
            report: File::from(report_read),
            stop: policy.stop.as_ref(),
            progress: policy.progress.as_ref(),
        },
        policy.output_cap,
        deadline,
        answers_write,
    );
    let cut = drained.as_ref().err().map(|(_, cut)| *cut);
    let exit = match cut {
        // Too late or stopped: the pipes are closed, which the helper takes for the host gone:
        // it kills the command's init, and with it the PID namespace, then exits.
        Some(_) => end(&mut helper),
        None => wait(&mut helper),
    };
    let Drained {
        mut kept,
        mut omitted,
        report,
    } = drained.unwrap_or_else(|(d, _)| d);
    omitted += trim_partial_char(&mut kept, omitted > 0);
    let mut output = String::from_utf8_lossy(&kept).into_owned();
    let text = String::from_utf8_lossy(&report);
    let (report, diagnostics) = wire::parse_report(&text);
    let (status, layers, blocked) = match report {
        _ if cut == Some(Cut::Deadline) => (
            Status::TimedOut(policy.timeout_secs()),
            Vec::new(),
            Vec::new(),
        ),
        _ if cut == Some(Cut::Stopped) => (
            Status::Refused("the command was stopped: its call was cancelled".into()),
            Vec::new(),
            Vec::new(),
        ),
        Some(Report {
            status,
            layers,
            protected,
            blocked,
        }) => {
            if let Some(hint) = protect::hint(&output, &protected) {
                output.push_str(&hint);
            }
            // Once: a client may have printed the proxy's refusal (its body) already.
            let unseen: Vec<&str> = (blocked.iter())
                .map(|b| b.line.as_str())
                .filter(|line| !output.contains(line))
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
        None => (
            Status::Refused(format!(
                "the sandbox helper ended without a report ({exit}){}{diagnostics}",
                if diagnostics.is_empty() { "" } else { ": " }
            )),
            Vec::new(),
            Vec::new(),
        ),
    };
    Ok(Completion {
        output,
        omitted_bytes: omitted,
        status,
        layers,
        blocked,
    })
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
    kept: Vec<u8>,
    omitted: u64,
    report: Vec<u8>,
}

/// The helper's descriptor on which the host answers the proxy's questions.
const ANSWERS_FD: i32 = 3;

/// What the host reads while a command runs.
struct Pipes<'a> {
    out: File,
    report: File,
    /// Polled too: once given, the command is given up.
    stop: Option<&'a Stop>,
    progress: Option<&'a Progress>,
}

/// Why the host gave up on a command before its helper reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    Deadline,
    Stopped,
}

/// Reads the output (keeping `cap` bytes) and the report until both reach end-of-file: `Err`
/// with what was read when `deadline` passes or the stop signal comes first. With `asking`,
/// the proxy's questions in the report are put to the asker and answered.
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
        omitted: 0,
        report: Vec::new(),
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
                fd: stop.map_or(-1, Stop::fd),
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
            return Err((drained, Cut::Deadline));
        }
        if fds[2].revents != 0 {
            return Err((drained, Cut::Stopped));
        }
        if fds[0].revents != 0 {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => {
                    if let Some(progress) = progress {
                        progress.add(n);
                    }
                    let room = cap.saturating_sub(drained.kept.len());
                    let keep = n.min(room);
                    drained.kept.extend_from_slice(&buf[..keep]);
                    drained.omitted += (n - keep) as u64;
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

/// How long a helper whose host has let go may take to kill its command and exit.
const LET_GO: Duration = Duration::from_secs(2);

/// Waits for a helper that the host let go of (its pipes closed) to end, killing it if it
/// outstays [`LET_GO`]: it is not killed at once, since killing it first would leave the
/// command's init behind where the kernel does not deliver the init's parent-death signal
/// (gVisor).
fn end(helper: &mut Child) -> String {
    let until = Instant::now() + LET_GO;
    while Instant::now() < until {
        match helper.try_wait() {
            Ok(Some(status)) => return status.to_string(),
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(_) => break,
        }
    }
    let _ = helper.kill();
    wait(helper)
}

/// Waits for the helper and describes how it ended.
fn wait(helper: &mut Child) -> String {
    match helper.wait() {
        Ok(status) => status.to_string(),
        Err(e) => format!("cannot wait for it: {e}"),
    }
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
