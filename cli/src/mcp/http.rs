//! `cordon mcp --http`: the same server over Streamable HTTP, for agents on another machine or
//! in a container, and for tools that test servers by URL.
//!
//! rmcp's [`StreamableHttpService`] is the transport: it keeps one MCP session per
//! `Mcp-Session-Id` (each a [`Server`] with its own cordon session), serves the 2026-07-28
//! lifecycle's requests, which have no session, one [`Server`] each, checks `Host` and
//! `Origin` against allowlists (DNS rebinding), bounds request bodies, and closes sessions
//! left idle. It brings no listener, so this module runs hyper under it, and adds what rmcp
//! leaves to the server:
//!
//! - a bearer token on every request (401 without it), unless `--http-no-auth`, which only a
//!   loopback address accepts;
//! - listening beyond loopback only with `--http-allow-remote`;
//! - `ping` answered in the 2026-07-28 lifecycle too ([`answer_ping`]), and a session's end
//!   (DELETE) answered 204, as clients expect;
//! - on SIGTERM or SIGINT, an end that cancels the running calls (their commands killed),
//!   closes the sessions and waits for both, briefly.

use std::convert::Infallible;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::model::ErrorCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use super::{Server, Shared};
use crate::args::McpArgs;

/// The path MCP is served at; any other is 404.
const PATH: &str = "/mcp";

/// The largest request body taken (413 beyond): a tool call's input, a file's new content
/// included.
const MAX_BODY: usize = 4 << 20;

/// The largest body looked at for a `ping` ([`answer_ping`]); a ping is a few hundred bytes.
const MAX_PING: usize = 16 << 10;

/// The shortest token taken from `--http-token-file`.
const MIN_TOKEN: usize = 16;

/// How long shutting down waits for the calls to be dropped and the connections to close.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The hosts a request may name in `Host` on any address: loopback's.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

type Body = BoxBody<Bytes, Infallible>;

/// `cordon mcp --http`, checked: where to listen, and how requests are let in.
pub struct Http {
    addr: SocketAddr,
    auth: Auth,
    /// `--http-allow-host`, `--http-allow-origin`.
    hosts: Vec<String>,
    origins: Vec<String>,
    idle: Duration,
}

impl Http {
    /// The HTTP server `args` ask for, if any; an error that says what to do when they ask
    /// for one that would be open to more than they may mean.
    pub fn new(args: &McpArgs) -> anyhow::Result<Option<Http>> {
        let Some(addr) = args.http else {
            return Ok(None);
        };
        let loopback = addr.ip().is_loopback();
        if !loopback && !args.http_allow_remote {
            bail!(
                "--http {addr} is not a loopback address: other machines could connect, and \
                 anyone with the token could run commands here. Listen on 127.0.0.1:{port} \
                 (reach it through an SSH tunnel or a proxy), or add --http-allow-remote to \
                 mean it",
                port = addr.port()
            );
        }
        if args.http_no_auth && !loopback {
            bail!(
                "--http-no-auth is accepted only on a loopback address (127.0.0.1 or ::1), not \
                 {addr}: anyone who reaches it could run commands here. Drop --http-no-auth \
                 and give clients the token"
            );
        }
        for origin in &args.http_allow_origin {
            ensure!(
                is_origin(origin),
                "--http-allow-origin {origin:?} is not an origin: write scheme://host:port, \
                 for example https://app.example.com:443"
            );
        }
        let auth = match (&args.http_token_file, args.http_no_auth) {
            (_, true) => Auth::None,
            (Some(file), false) => Auth::File(file.clone(), read_token(file)?),
            (None, false) => Auth::Made(new_token()?),
        };
        Ok(Some(Http {
            addr,
            auth,
            hosts: args.http_allow_host.clone(),
            origins: args.http_allow_origin.clone(),
            idle: Duration::from_secs(args.http_session_idle),
        }))
    }
}

/// How requests prove they may come in.
enum Auth {
    /// The token cordon made, printed once when it starts.
    Made(String),
    /// The token of `--http-token-file`.
    File(PathBuf, String),
    /// None: `--http-no-auth`.
    None,
}

impl Auth {
    /// The token every request must carry, if any.
    fn token(&self) -> Option<String> {
        match self {
            Auth::Made(token) | Auth::File(_, token) => Some(token.clone()),
            Auth::None => None,
        }
    }
}

/// `scheme://host` or `scheme://host:port`, nothing after: what a browser sends as `Origin`.
fn is_origin(text: &str) -> bool {
    let Some((scheme, authority)) = text.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https")
        && !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@'])
}

/// The token on the first line of `file`.
fn read_token(file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the token file {}", file.display()))?;
    let token = text.lines().next().unwrap_or_default().trim();
    ensure!(
        token.len() >= MIN_TOKEN && token.bytes().all(|b| b.is_ascii_graphic()),
        "the token file {} must hold a token of at least {MIN_TOKEN} visible ASCII characters \
         (no spaces) on its first line; make one with: head -c 32 /dev/urandom | base64 > {}",
        file.display(),
        file.display()
    );
    Ok(token.to_string())
}

/// A new token: 32 random bytes, in hex.
fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("cannot read /dev/urandom to make a token; give one with --http-token-file")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Serves `shared`'s tools as `http` says until SIGTERM or SIGINT, then ends the calls.
pub(super) async fn serve(shared: Arc<Shared>, http: Http) -> anyhow::Result<()> {
    let listener = TcpListener::bind(http.addr)
        .await
        .with_context(|| format!("cannot listen on {}", http.addr))?;
    let addr = listener
        .local_addr()
        .context("cannot read the address listened on")?;
    let mut stop = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;

    let front = Arc::new(Front {
        mcp: service(&shared, &http, addr),
        token: http.auth.token(),
    });
    eprintln!("cordon mcp: serving MCP at http://{addr}{PATH}");
    match &http.auth {
        Auth::Made(token) => eprintln!(
            "cordon mcp: clients must send \"Authorization: Bearer {token}\" (a token made for \
             this run; --http-token-file gives a lasting one)"
        ),
        Auth::File(file, _) => eprintln!(
            "cordon mcp: clients must send the token of {} as \"Authorization: Bearer TOKEN\"",
            file.display()
        ),
        Auth::None => eprintln!(
            "cordon mcp: no authentication (--http-no-auth): any process of this machine can \
             call the tools"
        ),
    }

    let connections = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, most likely: let connections end first.
                    tracing::warn!("cannot accept an HTTP connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.recv() => break,
            _ = interrupt.recv() => break,
        };
        let front = front.clone();
        let handle = hyper::service::service_fn(move |request| {
            let front = front.clone();
            async move { Ok::<_, Infallible>(front.handle(request).await) }
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), handle);
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("HTTP connection ended: {e}");
            }
        });
    }
    drop(listener);

    // Every running call is dropped (its command killed), rmcp closes every session and ends
    // every response stream; then the connections can close.
    tracing::info!("shutting down: cancelling the running calls");
    shared.stopping.cancel();
    shared.calls.close();
    let ended = async {
        shared.calls.wait().await;
        connections.shutdown().await;
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, ended).await.is_err() {
        tracing::warn!(
            "some HTTP connections were still open {} s after shutdown began; exiting anyway",
            SHUTDOWN_GRACE.as_secs()
        );
    }
    Ok(())
}

/// rmcp's service for `shared`'s tools, with the allowlists for a server at `addr`.
fn service(
    shared: &Arc<Shared>,
    http: &Http,
    addr: SocketAddr,
) -> StreamableHttpService<Server, LocalSessionManager> {
    let port = addr.port();
    // The address listened on, as `Host` and `Origin` name it ([::1] for IPv6).
    let listened = match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    };
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
    let mut origins: Vec<String> = LOOPBACK_HOSTS
        .iter()
        .map(|h| format!("http://{h}:{port}"))
        .collect();
    if !addr.ip().is_unspecified() && !addr.ip().is_loopback() {
        hosts.push(listened.clone());
        origins.push(format!("http://{listened}:{port}"));
    }
    hosts.extend(http.hosts.iter().cloned());
    origins.extend(http.origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY)
        .with_cancellation_token(shared.stopping.clone());
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(http.idle);
    let shared = shared.clone();
    StreamableHttpService::new(
        move || Ok(Server::new(shared.clone())),
        Arc::new(sessions),
        config,
    )
}

/// What every HTTP request goes through before rmcp's service.
struct Front {
    mcp: StreamableHttpService<Server, LocalSessionManager>,
    token: Option<String>,
}

impl Front {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.uri().path() != PATH {
            return text(
                StatusCode::NOT_FOUND,
                format!("Not Found: cordon serves MCP at {PATH}"),
            );
        }
        if let Some(token) = &self.token
            && !bearer(&request).is_some_and(|sent| same(sent.as_bytes(), token.as_bytes()))
        {
            let mut refusal = text(
                StatusCode::UNAUTHORIZED,
                "Unauthorized: send the token that cordon printed when it started, or the one \
                 of its --http-token-file, as \"Authorization: Bearer TOKEN\""
                    .into(),
            );
            refusal
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return refusal;
        }
        let (parts, body) = request.into_parts();
        let body = match read(body).await {
            Ok(body) => body,
            Err(refusal) => return refusal,
        };
        let method = parts.method.clone();
        let ping = (method == Method::POST).then(|| ping_id(&body)).flatten();
        let mut response = self
            .mcp
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        // rmcp answers a DELETE that ends a session 202 Accepted, which the Python SDK logs
        // as a failed termination on the user's screen; the session is gone: 204 No Content.
        if method == Method::DELETE && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        match ping {
            Some(id) => answer_ping(response, id).await,
            None => response,
        }
    }
}

/// The whole of a request's `body`, or the answer that refuses it: 413 for one declared or
/// found longer than [`MAX_BODY`] (the first refused before it is read).
async fn read(body: Incoming) -> Result<Bytes, Response<Body>> {
    let too_large = || {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: a request may hold at most {} MiB",
                MAX_BODY >> 20
            ),
        )
    };
    if body.size_hint().lower() > MAX_BODY as u64 {
        return Err(too_large());
    }
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(body) => Ok(body.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(too_large()),
        Err(e) => Err(text(
            StatusCode::BAD_REQUEST,
            format!("Bad Request: cannot read the request body: {e}"),
        )),
    }
}

/// The token of the request's `Authorization: Bearer TOKEN`.
fn bearer(request: &Request<Incoming>) -> Option<&str> {
    let value = request.headers().get(hyper::header::AUTHORIZATION)?;
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether `a` and `b` are equal, in a time that does not tell how much of them is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |differ, (x, y)| differ | (x ^ y)) == 0
}

/// The id of a JSON-RPC `ping` request, when `body` is one.
fn ping_id(body: &[u8]) -> Option<Value> {
    if body.len() > MAX_PING {
        return None;
    }
    let mut message: Value = serde_json::from_slice(body).ok()?;
    (message["method"] == "ping").then(|| message["id"].take())
}

/// The answer to a `ping`: rmcp's, unless it refused it as an unknown method, as it does in
/// the 2026-07-28 lifecycle, which dropped `ping`. Clients still send it there (fastmcp's
/// `client.ping()`), so it is answered, as over stdio ([`super::Pinged`]). Only that refusal
/// is replaced: every check rmcp made before it (Host, Origin, session, protocol version)
/// still stands.
async fn answer_ping(response: Response<Body>, id: Value) -> Response<Body> {
    if response.status() != StatusCode::NOT_FOUND {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes());
    let refused = serde_json::from_slice::<Value>(&body)
        .is_ok_and(|answer| answer["error"]["code"] == ErrorCode::METHOD_NOT_FOUND.0);
    if !refused {
        return Response::from_parts(parts, Full::new(body).boxed());
    }
    let pong = json!({"jsonrpc": "2.0", "id": id, "result": {}});
    let mut response = Response::new(Full::new(Bytes::from(pong.to_string())).boxed());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A plain-text answer.
fn text(status: StatusCode, message: String) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(message)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert!(is_origin("https://app.example.com:443"));
        assert!(is_origin("http://localhost"));
        assert!(!is_origin("app.example.com"));
        assert!(!is_origin("https://app.example.com/path"));
        assert!(!is_origin("ftp://example.com"));
        assert!(!is_origin("https://"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret-token", b"secret-token"));
        assert!(!same(b"secret-token", b"secret-tokeN"));
        assert!(!same(b"secret", b"secret-token"));
    }

    #[test]
    fn only_a_ping_has_a_ping_id() {
        let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{}}"#;
        assert_eq!(ping_id(ping), Some(json!(7)));
        let call = br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{}}"#;
        assert_eq!(ping_id(call), None);
        assert_eq!(ping_id(b"not json"), None);
    }
}
