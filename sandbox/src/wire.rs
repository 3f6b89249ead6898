//! What the host, the sandbox helper and the zygote tell each other.
//!
//! A confined shell is one helper for many commands: the host sends it the [`Setup`] once,
//! then a [`ToHelper::Run`] per command, each with the command's own pipes attached (`SCM_RIGHTS`); the
//! helper asks the zygote to start each command ([`ToZygote`]) and hears back when it ended
//! ([`FromZygote`]). Messages are JSON frames (a 4-byte length, then the text) on Unix stream
//! sockets, descriptors riding on a frame's first byte ([`send`], [`recv`]).
//!
//! On a command's own report pipe the helper writes the proxy's questions ([`ask_line`]) and,
//! last, the [`Report`] ([`report_line`]). An unconfined command still gets a helper of its own,
//! which reads a [`Request`] on its standard input and reports on its standard error.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::cgroup::NotEntered;
use super::{Blocked, CannotRun, Layer, Policy, Status};

/// What the host sends a shell's helper first: the policy of every command, as itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Setup {
    pub policy: Policy,
    /// Whether commands may follow one another: the next command's init is then readied
    /// while one runs.
    #[serde(default)]
    pub many: bool,
}

/// An unconfined command, on its own helper's standard input: the policy's timeout is the
/// command's.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Request {
    pub policy: Policy,
    pub command: String,
}

/// `duration` in whole milliseconds, as the messages carry a timeout.
pub(super) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// What the host sends a confined shell's helper, after the [`Setup`].
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum ToHelper {
    /// Run `command`. Attached: the output pipe's write end, the report pipe's write end and,
    /// when `ask`, the read end of the pipe of the host's answers to the proxy's questions.
    /// The command is killed after `timeout_ms`.
    Run {
        id: u64,
        command: String,
        ask: bool,
        timeout_ms: u64,
    },
    /// Kill the command of call `id` at once (cancelled, or its host gave up on it).
    Stop { id: u64 },
}

/// What the helper sends the zygote.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum ToZygote {
    /// Move into a memory cgroup. Attached: its file to write `0` to.
    Enter,
    /// Start call `id`. Attached: the output pipe's write end; when `proxy`, the end of the
    /// socket pair over which the call's init hands the proxy's listening socket back; when
    /// `then_enter`, the file of the memory cgroup to move into once the call's init is
    /// started (it is born in the cgroup the zygote was in).
    Fork {
        id: u64,
        command: String,
        /// The protected paths to mount read-only, relative to the workspace.
        protected: Vec<String>,
        /// The hidden paths that exist now (absolute), to cover.
        hidden: Vec<Vec<u8>>,
        /// The generation of the protected paths ([`super::shield::Raised`]): when the
        /// zygote has covered a ready init for it already, it does not again.
        generation: u64,
        /// The address-space limit of each process, where no memory cgroup bounds the call.
        address_space: Option<u64>,
        proxy: bool,
        then_enter: bool,
        /// When to kill the command, from its start.
        timeout_ms: u64,
    },
    /// Call `id` was handed to the ready init the zygote offered ([`FromZygote::Offer`]) by
    /// the helper itself: follow it as a started call. Attached, when `then_enter`: as with
    /// [`ToZygote::Fork`].
    Took {
        id: u64,
        then_enter: bool,
        timeout_ms: u64,
    },
    /// Kill call `id` now.
    Kill { id: u64 },
}

/// What the zygote sends the helper.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum FromZygote {
    /// The view is built: commands may come.
    Ready,
    /// The sandbox cannot be set up, for this reason.
    Refused { why: CannotRun },
    /// The zygote moved into the memory cgroup it was given, or could not, for this reason.
    Entered { failed: Option<NotEntered> },
    /// Call `id` has its init (in the memory cgroup the zygote was in); the zygote then moved
    /// into the next one, when given one, or could not, for this reason. In a shell of many
    /// commands it comes with the read end of the pipe the init writes bash's status to, for
    /// the helper to hear it first-hand (unless the helper took the init offered, whose pipe
    /// it holds).
    Started { id: u64, failed: Option<NotEntered> },
    /// The ready init, covered for `generation`, which the helper may hand the next command to
    /// itself (one hop fewer on the command's way in) when it covers the same and the zygote
    /// has been sent `serial` calls so far ([`ToZygote::Fork`] or [`ToZygote::Took`]): an
    /// offer that a later call overtook is stale. Attached: the zygote's end of the init's
    /// socket pair and the read end of the pipe the init writes bash's status to.
    Offer { serial: u64, generation: u64 },
    /// Call `id` ended so: its init exited (how the command ended, if the init did not say it
    /// on the pipe the helper holds), or could not be started.
    Exited { id: u64, status: Status },
}

/// The most a frame may carry: a command is at most what one `bash -c` argument may be, and
/// the setup a few paths and variables.
const MAX_FRAME: usize = 64 << 20;
/// The most descriptors one frame carries.
const MAX_FDS: usize = 4;

/// Sends `message` on the stream socket `socket`, with `fds` attached.
pub(super) fn send(
    socket: BorrowedFd,
    message: &impl Serialize,
    fds: &[BorrowedFd],
) -> io::Result<()> {
    let body = serde_json::to_vec(message).map_err(io::Error::other)?;
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        control.push(SendAncillaryMessage::ScmRights(fds));
    }
    let sent = rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&frame)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    let mut rest = &frame[sent..];
    while !rest.is_empty() {
        let n = rustix::net::send(socket, rest, SendFlags::NOSIGNAL)?;
        rest = &rest[n..];
    }
    Ok(())
}

/// Receives one message from the stream socket `socket`, with the descriptors attached to it;
/// `None` at end-of-file.
pub(super) fn recv<T: DeserializeOwned>(
    socket: BorrowedFd,
) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut len = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    // The descriptors ride on the first byte; a read of the length alone takes no byte of the
    // frame after it.
    let got = rustix::net::recvmsg(
        socket,
        &mut [IoSliceMut::new(&mut len)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?
    .bytes;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got == 0 {
        return Ok(None);
    }
    let mut stream = Stream(socket);
    stream.read_exact(&mut len[got..])?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    let message = serde_json::from_slice(&body).map_err(io::Error::other)?;
    Ok(Some((message, fds)))
}

/// A borrowed stream socket, read as a stream.
struct Stream<'a>(BorrowedFd<'a>);

impl Read for Stream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(self.0, buf)?)
    }
}

pub(super) fn to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes.to_vec()))
}

/// Paths on the wire, as bytes (`#[serde(with = "wire::bytes")]`): serde's own form of a path
/// is a string, which a path need not be.
pub(crate) mod bytes {
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A value made of paths, and its form made of bytes.
    pub trait Raw: Sized {
        type Bytes: Serialize + for<'de> Deserialize<'de>;
        fn to_raw(&self) -> Self::Bytes;
        fn from_raw(raw: Self::Bytes) -> Self;
    }

    impl Raw for PathBuf {
        type Bytes = Vec<u8>;
        fn to_raw(&self) -> Vec<u8> {
            self.as_os_str().as_bytes().to_vec()
        }
        fn from_raw(raw: Vec<u8>) -> Self {
            super::to_path(&raw)
        }
    }

    impl<T: Raw> Raw for Vec<T> {
        type Bytes = Vec<T::Bytes>;
        fn to_raw(&self) -> Self::Bytes {
            self.iter().map(Raw::to_raw).collect()
        }
        fn from_raw(raw: Self::Bytes) -> Self {
            raw.into_iter().map(T::from_raw).collect()
        }
    }

    impl<T: Raw> Raw for Option<T> {
        type Bytes = Option<T::Bytes>;
        fn to_raw(&self) -> Self::Bytes {
            self.as_ref().map(Raw::to_raw)
        }
        fn from_raw(raw: Self::Bytes) -> Self {
            raw.map(T::from_raw)
        }
    }

    pub fn serialize<T: Raw, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
        value.to_raw().serialize(serializer)
    }

    pub fn deserialize<'de, T: Raw, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
        T::Bytes::deserialize(deserializer).map(T::from_raw)
    }
}

/// The marker that starts the report line.
const PREFIX: &str = "cordon-sandbox-report:";

/// The marker that starts a question of the proxy to the host: may a command reach a host
/// that is not on its allowlist? The host answers `y` or `n`, and a newline, on the
/// command's answer pipe.
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
    /// The notices of what the command made that was quarantined, a line each.
    #[serde(default)]
    pub quarantined: Vec<String>,
}

impl Report {
    /// A command that could not run, for `why`.
    pub fn refused(why: CannotRun) -> Report {
        Report {
            status: Status::Refused(why),
            layers: Vec::new(),
            protected: Vec::new(),
            blocked: Vec::new(),
            quarantined: Vec::new(),
        }
    }
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
    use std::io::Write;
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn reports_round_trip() {
        for status in [
            Status::Exited(3),
            Status::Signaled("SIGKILL".into()),
            Status::TimedOut(30),
            Status::OutOfMemory(4096),
            Status::Refused(CannotRun::Missing {
                layer: crate::OptionalLayer::Landlock,
                why: "no Landlock\nat all".into(),
            }),
        ] {
            let layers = vec![Layer::new("pid", crate::Enforcement::Enforced, "its own")];
            let protected = vec![".git/hooks".to_string()];
            let report = Report {
                status,
                layers,
                protected,
                blocked: Vec::new(),
                quarantined: vec!["[cordon: quarantined .git/hooks/x, …]".to_string()],
            };
            let line = report_line(&report);
            let (parsed, other) = parse_report(&format!("thread panicked\n{line}"));
            assert_eq!(parsed, Some(report));
            assert_eq!(other, "thread panicked");
        }
    }

    /// The policy travels as itself, paths that are not UTF-8 included.
    #[test]
    fn the_policy_round_trips() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;

        let odd = PathBuf::from(OsStr::from_bytes(b"/tmp/caf\xe9"));
        let mut policy = Policy::new(odd.clone());
        policy.extra_read = vec![odd.clone(), "/opt".into()];
        policy.home = Some(odd.clone());
        policy.allow_missing = vec![crate::OptionalLayer::Seccomp];
        policy.ungranted = vec!["/home/u/.cargo/bin".into()];
        let setup = Setup { policy, many: true };
        let json = serde_json::to_string(&setup).unwrap();
        let back: Setup = serde_json::from_str(&json).unwrap();
        assert_eq!(back.policy.workspace, odd);
        assert_eq!(back.policy.extra_read, [odd.clone(), "/opt".into()]);
        assert_eq!(back.policy.home, Some(odd));
        assert_eq!(back.policy.allow_missing, [crate::OptionalLayer::Seccomp]);
        assert_eq!(back.policy.timeout, setup.policy.timeout);
        // Only the host's side reads it.
        assert!(back.policy.ungranted.is_empty());
        assert!(back.many);
    }

    #[test]
    fn frames_carry_messages_and_descriptors() {
        let (a, b) = crate::process::socket_pair().unwrap();
        let (read, write) = crate::process::pipe().unwrap();
        let long = "x".repeat(300 << 10);
        let run = ToHelper::Run {
            id: 7,
            command: long.clone(),
            ask: true,
            timeout_ms: 120_000,
        };
        let sender = std::thread::spawn(move || {
            send(a.as_fd(), &run, &[write.as_fd()]).unwrap();
            send(a.as_fd(), &ToHelper::Stop { id: 7 }, &[]).unwrap();
            drop(a);
        });
        let (first, fds) = recv::<ToHelper>(b.as_fd()).unwrap().unwrap();
        assert!(
            matches!(first, ToHelper::Run { id: 7, ref command, ask: true, timeout_ms: 120_000 }
                if *command == long)
        );
        assert_eq!(fds.len(), 1);
        // The descriptor received is the pipe's write end.
        std::fs::File::from(fds.into_iter().next().unwrap())
            .write_all(b"!")
            .unwrap();
        let mut byte = [0u8];
        std::fs::File::from(read).read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"!");
        let (second, fds) = recv::<ToHelper>(b.as_fd()).unwrap().unwrap();
        assert!(matches!(second, ToHelper::Stop { id: 7 }));
        assert!(fds.is_empty());
        sender.join().unwrap();
        assert!(recv::<ToHelper>(b.as_fd()).unwrap().is_none());
    }
}
