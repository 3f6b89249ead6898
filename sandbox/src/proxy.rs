//! cordon's egress proxy for one command: HTTP `CONNECT` (HTTPS and any other TCP) and
//! absolute-form plain HTTP, to the hosts of the command's [`Allowlist`] only.
//!
//! The command's init makes the listening socket inside the command's network namespace
//! (`127.0.0.1:`[`PORT`] there, on a loopback it brings up) and hands it over to the helper
//! ([`hand_over`], [`receive`]). The helper stays in the host's network namespace and serves
//! the socket from there, on threads of the command's own, until the command ends
//! ([`Proxy::close`]): a command reaches the proxy and nothing else, and the proxy connects
//! only to the addresses [`Allowlist::decide`] checked. A refusal is an immediate `403` whose
//! body says what to allow, and is remembered for the call's output. With an asker
//! (`--permissions ask`), a host off the list is first asked about: the helper writes the
//! question on the command's report pipe ([`wire::ask_line`]) and reads the answer on the
//! command's answer pipe, one question at a time.
//!
//! Hand-written over [`httparse`] rather than hyper: the proxy reads one request head and then
//! relays bytes, in a helper that has no async runtime.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use super::egress::{self, Allowlist, Blocked, NoConnection};
use super::wire;

/// The proxy's port on the loopback of every command's network namespace.
pub const PORT: u16 = 3128;

/// The variables that point clients at the proxy, set in every command with an allowlist.
/// `NO_PROXY` keeps the command's own loopback direct, so a test suite's local server works.
pub const VARIABLES: [(&str, &str); 8] = [
    ("HTTP_PROXY", URL),
    ("HTTPS_PROXY", URL),
    ("ALL_PROXY", URL),
    ("http_proxy", URL),
    ("https_proxy", URL),
    ("all_proxy", URL),
    ("NO_PROXY", LOCAL),
    ("no_proxy", LOCAL),
];

/// With the network off, the settings that make package managers take the proxy's refusal as
/// final: pip, npm and cargo would otherwise try again for seconds.
pub const NO_RETRIES: [(&str, &str); 3] = [
    ("PIP_RETRIES", "0"),
    ("npm_config_fetch_retries", "0"),
    ("CARGO_NET_RETRY", "0"),
];

const URL: &str = "http://127.0.0.1:3128";
const LOCAL: &str = "localhost,127.0.0.1,::1";

/// The longest request head read, and how long a client may take to send it.
const MAX_HEAD: usize = 64 << 10;
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long connecting to one address of an allowed host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more get `503` at once.
const MAX_CONNECTIONS: usize = 256;

/// The proxy of one command.
pub(super) struct Proxy {
    /// The allowlist, grown by the hosts the user allowed when asked.
    allowlist: Mutex<Allowlist>,
    blocked: Mutex<Vec<Blocked>>,
    open: AtomicUsize,
    /// Where the host's answers arrive, when the user may be asked; held while asking.
    answers: Option<Mutex<std::fs::File>>,
    /// The command's report pipe, where the questions go.
    report: Arc<Mutex<std::fs::File>>,
    /// The socket being served, once received: shut down when the command ends.
    listening: Mutex<Option<TcpListener>>,
    closed: AtomicBool,
}

impl Proxy {
    pub fn new(
        allowlist: Allowlist,
        answers: Option<std::fs::File>,
        report: Arc<Mutex<std::fs::File>>,
    ) -> Arc<Proxy> {
        Arc::new(Proxy {
            allowlist: Mutex::new(allowlist),
            blocked: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            answers: answers.map(Mutex::new),
            report,
            listening: Mutex::new(None),
            closed: AtomicBool::new(false),
        })
    }

    /// Stops serving: the command ended. Its connections end with its processes.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Ok(listening) = self.listening.lock()
            && let Some(listener) = listening.as_ref()
        {
            // SAFETY: shutting down a socket this proxy holds; accept then fails at once.
            unsafe { libc::shutdown(listener.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }

    /// The connections refused so far, one per `host:port`.
    pub fn blocked(&self) -> Vec<Blocked> {
        self.blocked.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// Serves `listener` until the command ends ([`Proxy::close`]).
    pub fn serve(self: Arc<Self>, listener: TcpListener) {
        match (listener.try_clone(), self.listening.lock()) {
            (Ok(kept), Ok(mut listening)) => *listening = Some(kept),
            _ => return,
        }
        // Closed before the socket was kept, [`Proxy::close`] could not shut it down.
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        for client in listener.incoming() {
            if self.closed.load(Ordering::SeqCst) {
                return;
            }
            let Ok(mut client) = client else { continue };
            if self.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                self.open.fetch_sub(1, Ordering::SeqCst);
                let _ = respond(&mut client, 503, "[network: too many connections at once]");
                continue;
            }
            let proxy = self.clone();
            let spawned = thread::Builder::new().spawn(move || {
                let _ = proxy.handle(client);
                proxy.open.fetch_sub(1, Ordering::SeqCst);
            });
            if spawned.is_err() {
                self.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn handle(&self, mut client: TcpStream) -> io::Result<()> {
        client.set_read_timeout(Some(HEAD_TIMEOUT))?;
        let Some((head, rest)) = read_head(&mut client)? else {
            return respond(&mut client, 431, "[network: the request head is too large]");
        };
        let request = match Request::parse(&head) {
            Ok(request) => request,
            Err(why) => return respond(&mut client, 400, &format!("[network: {why}]")),
        };
        let addresses = match self.decide(&request.host, request.port) {
            Ok(addresses) => addresses,
            Err(NoConnection::Blocked(blocked) | NoConnection::Unlisted(blocked)) => {
                let line = blocked.line.clone();
                self.remember(blocked);
                return respond(&mut client, 403, &line);
            }
            Err(NoConnection::Unreachable(why)) => {
                return respond(&mut client, 502, &format!("[network: {why}]"));
            }
        };
        let mut upstream = match connect(&addresses) {
            Ok(upstream) => upstream,
            Err(e) => {
                let why = format!(
                    "[network: cannot connect to {}:{}: {e}]",
                    request.host, request.port
                );
                return respond(&mut client, 502, &why);
            }
        };
        client.set_read_timeout(None)?;
        match &request.forward {
            None => client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?,
            Some(head) => upstream.write_all(head)?,
        }
        upstream.write_all(&rest)?;
        relay(client, upstream)
    }

    /// [`Allowlist::decide`], asking the user about a host off the list when it may.
    fn decide(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, NoConnection> {
        // A copy: resolving must not hold up the other connections.
        let allowlist = || self.allowlist.lock().map(|a| a.clone()).unwrap_or_default();
        match allowlist().decide(host, port) {
            Err(NoConnection::Unlisted(blocked)) => {
                let Some(answers) = &self.answers else {
                    return Err(NoConnection::Unlisted(blocked));
                };
                // One question at a time; an answer given meanwhile counts.
                let Ok(mut answers) = answers.lock() else {
                    return Err(NoConnection::Unlisted(blocked));
                };
                if let ok @ (Ok(_) | Err(NoConnection::Blocked(_))) = allowlist().decide(host, port)
                {
                    return ok;
                }
                if self.blocked().iter().any(|b| b.target == blocked.target)
                    || !ask(&self.report, &mut answers, host, port)
                {
                    return Err(NoConnection::Unlisted(blocked));
                }
                if let Ok(mut list) = self.allowlist.lock() {
                    list.allow(host, port);
                }
                allowlist().decide(host, port)
            }
            other => other,
        }
    }

    fn remember(&self, blocked: Blocked) {
        if let Ok(mut list) = self.blocked.lock()
            && !list.iter().any(|b| b.target == blocked.target)
        {
            list.push(blocked);
        }
    }
}

/// Asks the host whether `host:port` may be reached: the question on the `report` pipe, the
/// answer (`y` or `n` and a newline) from `answers`. No answer: no.
fn ask(report: &Mutex<std::fs::File>, answers: &mut std::fs::File, host: &str, port: u16) -> bool {
    let asked = report.lock().is_ok_and(|mut report| {
        report
            .write_all(wire::ask_line(host, port).as_bytes())
            .is_ok()
    });
    if !asked {
        return false;
    }
    let mut answer = [0u8; 2];
    answers.read_exact(&mut answer).is_ok() && &answer == b"y\n"
}

/// Reads up to the end of the request head: the head, and what came after it. None when the
/// head is larger than [`MAX_HEAD`].
fn read_head(client: &mut TcpStream) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let searched = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf[searched..].windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(searched + end + 4);
            return Ok(Some((buf, rest)));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

/// What a client asked the proxy for.
struct Request {
    host: String,
    port: u16,
    /// For plain HTTP, the head to send upstream (origin-form, hop-by-hop headers dropped,
    /// `Connection: close`); none for `CONNECT`.
    forward: Option<Vec<u8>>,
}

/// Headers dropped from a forwarded request: those of the hop to the proxy, and `Host`, which
/// the proxy writes itself from the URL it checked (a server that routes by `Host` would
/// otherwise serve a name that was never allowed).
const DROPPED: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "host",
];

/// What is wrong with a request the proxy was sent, for its `400` answer.
#[derive(Debug, thiserror::Error)]
enum BadRequest {
    #[error("an incomplete request head")]
    Incomplete,
    #[error("a malformed request ({0})")]
    Malformed(httparse::Error),
    #[error("a request without a method or target")]
    NoTarget,
    #[error(
        "cordon's proxy takes CONNECT host:port and http:// URLs, not {0:?}; HTTPS goes through \
         CONNECT (HTTPS_PROXY)"
    )]
    NotHttp(String),
    #[error("{0:?} is not host:port")]
    NotHostPort(String),
}

impl Request {
    fn parse(head: &[u8]) -> Result<Request, BadRequest> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => return Err(BadRequest::Incomplete),
            Err(e) => return Err(BadRequest::Malformed(e)),
        }
        let (Some(method), Some(target)) = (parsed.method, parsed.path) else {
            return Err(BadRequest::NoTarget);
        };
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = authority(target, None)?;
            return Ok(Request {
                host,
                port,
                forward: None,
            });
        }
        let Some(rest) = target
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .map(|_| &target[7..])
        else {
            return Err(BadRequest::NotHttp(target.to_string()));
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (host, port) = authority(&rest[..split], Some(80))?;
        let checked = format!("{}:{port}", egress::bracketed(&host));
        let path = match &rest[split..] {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        let mut forward =
            format!("{method} {path} HTTP/1.{}\r\n", parsed.version.unwrap_or(1)).into_bytes();
        forward.extend_from_slice(format!("Host: {checked}\r\n").as_bytes());
        for header in parsed.headers.iter() {
            if DROPPED.iter().any(|h| header.name.eq_ignore_ascii_case(h)) {
                continue;
            }
            forward.extend_from_slice(header.name.as_bytes());
            forward.extend_from_slice(b": ");
            forward.extend_from_slice(header.value);
            forward.extend_from_slice(b"\r\n");
        }
        // One request per connection: a second one on it could name another host.
        forward.extend_from_slice(b"Connection: close\r\n\r\n");
        Ok(Request {
            host,
            port,
            forward: Some(forward),
        })
    }
}

/// `host:port` or `[v6]:port` (the port may be left out when `default` is given).
fn authority(text: &str, default: Option<u16>) -> Result<(String, u16), BadRequest> {
    let text = text.rsplit_once('@').map_or(text, |(_, host)| host);
    let malformed = || BadRequest::NotHostPort(text.to_string());
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (host, after) = rest.split_once(']').ok_or_else(malformed)?;
            (host, after.strip_prefix(':'))
        }
        None => match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        },
    };
    let port = match (port, default) {
        (Some(port), _) => port.parse().map_err(|_| malformed())?,
        (None, Some(default)) => default,
        (None, None) => return Err(malformed()),
    };
    if host.is_empty() {
        return Err(malformed());
    }
    Ok((host.to_string(), port))
}

fn connect(addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    let mut last = io::Error::other("no address");
    for address in addresses {
        match TcpStream::connect_timeout(address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Copies each way until each side has finished sending.
fn relay(client: TcpStream, upstream: TcpStream) -> io::Result<()> {
    let (mut client_in, mut upstream_out) = (client.try_clone()?, upstream.try_clone()?);
    let up = thread::Builder::new().spawn(move || {
        let _ = io::copy(&mut client_in, &mut upstream_out);
        let _ = upstream_out.shutdown(Shutdown::Write);
    })?;
    let (mut upstream, mut client) = (upstream, client);
    let _ = io::copy(&mut upstream, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

fn respond(client: &mut TcpStream, code: u16, text: &str) -> io::Result<()> {
    let reason = match code {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let body = format!("{text}\n");
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes())
}

/// Sends the listening socket over `channel` (the init's end of a socket pair).
pub(super) fn hand_over(channel: &OwnedFd, listener: &TcpListener) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        channel,
        &[IoSlice::new(b"L")],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// Receives the listening socket the init sends over `channel` (the helper's end).
pub(super) fn receive(channel: &OwnedFd) -> io::Result<TcpListener> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    rustix::net::recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(TcpListener::from(fd));
        }
    }
    Err(io::ErrorKind::UnexpectedEof.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_and_absolute_form_parse() {
        let connect = Request::parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!((connect.host.as_str(), connect.port), ("pypi.org", 443));
        assert!(connect.forward.is_none());
        let get = Request::parse(
            b"GET http://pkg.test:8080?q=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\
              Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((get.host.as_str(), get.port), ("pkg.test", 8080));
        assert_eq!(
            String::from_utf8(get.forward.unwrap()).unwrap(),
            "GET /?q=1 HTTP/1.1\r\nHost: pkg.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let v6 = Request::parse(b"GET http://[::1]/x HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 80));
        for bad in [
            &b"GET /local HTTP/1.1\r\n\r\n"[..],
            b"CONNECT pypi.org HTTP/1.1\r\n\r\n",
            b"GET https://pypi.org/ HTTP/1.1\r\n\r\n",
            b"NOT A REQUEST\r\n\r\n",
        ] {
            assert!(
                Request::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
