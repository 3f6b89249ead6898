//! HTTP for plugins: `wasi:http/outgoing-handler` (wasmtime-wasi-http), linked only for a
//! plugin whose manifest grants hosts and whose user consented to them.
//!
//! wasmtime-wasi-http parses and checks what the plugin builds; this module decides whether it
//! is sent. A request goes out only to a host of the grant, decided as bash's proxy decides
//! ([`cordon_sandbox::Allowlist::decide`]: the name as the plugin gave it, resolved by cordon,
//! loopback, link-local and private addresses refused unless named), and to exactly the
//! address that was checked: wasmtime-wasi-http's own sender resolves the name again, which
//! would let a DNS answer change between the check and the connect, so the connection (TCP,
//! then TLS for `https`, with the name as the TLS server name) is made here. The secret headers of the
//! grant are added on the way out, their values read from cordon's environment at that moment:
//! the plugin never holds them. A response body is cut at [`MAX_BODY`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::uri::Scheme;
use http_body_util::BodyExt;
use tokio::net::TcpStream;
use wasmtime::component::Linker;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::grants::HttpGrant;
use crate::sandbox::egress::NoConnection;
use crate::state::{HttpHooks, State};

/// The largest response body a plugin receives; beyond it the body ends in an error.
pub const MAX_BODY: usize = 16 << 20;

/// How long connecting (TCP and TLS) to a host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Links `wasi:http` for a plugin whose grants include HTTP.
pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = wasmtime_wasi_http::Result<(
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                )>,
            > + Send,
    > {
        let grant = self.grant.clone();
        Box::new(async move {
            let grant = grant.ok_or(Error::HttpRequestDenied)?;
            let response = send(&grant, request).await?;
            let done: Box<dyn Future<Output = Result<(), Error>> + Send> =
                Box::new(async { Ok(()) });
            Ok((response, done))
        })
    }
}

async fn send(
    grant: &HttpGrant,
    mut request: http::Request<WasiBody>,
) -> Result<http::Response<WasiBody>, Error> {
    let uri = request.uri().clone();
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?.to_string();
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let tls = uri.scheme() == Some(&Scheme::HTTPS);
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let allowlist = grant.allowlist.clone();
    let decided = {
        let host = host.clone();
        tokio::task::spawn_blocking(move || allowlist.decide(&host, port))
            .await
            .map_err(|e| Error::InternalError(Some(e.to_string())))?
    };
    let addresses = match decided {
        Ok(addresses) => addresses,
        Err(NoConnection::Blocked(blocked) | NoConnection::Unlisted(blocked)) => {
            tracing::info!(target = %blocked.target, "plugin request refused");
            return Err(Error::HttpRequestDenied);
        }
        Err(NoConnection::Unreachable(why)) => {
            return Err(Error::DnsError {
                rcode: Some(why),
                info_code: None,
            });
        }
    };
    let name = host.to_ascii_lowercase();
    for header in grant.headers.iter().filter(|h| h.host == name) {
        let value = header
            .value()
            .map_err(|why| Error::InternalError(Some(why)))?;
        request.headers_mut().insert(header.name.clone(), value);
    }
    // The connection is to the origin: the request line carries the path only.
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(uri.path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect(&addresses))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let response = if tls {
        let server = rustls::pki_types::ServerName::try_from(host)
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls_connector().connect(server, stream))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
        exchange(TokioIo::new(stream), request).await?
    } else {
        exchange(TokioIo::new(stream), request).await?
    };
    Ok(response.map(|body| {
        http_body_util::Limited::new(body, MAX_BODY)
            .map_err(|e| match e.downcast::<hyper::Error>() {
                Ok(hyper) => Error::from(*hyper),
                Err(_) => Error::HttpResponseBodySize(Some(MAX_BODY as u64)),
            })
            .boxed_unsync()
    }))
}

async fn connect(addresses: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Sends `request` over `io` (HTTP/1.1) and waits for the response head.
async fn exchange<I>(
    io: I,
    request: http::Request<WasiBody>,
) -> Result<http::Response<hyper::body::Incoming>, Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    // It ends when the response body has been read or dropped.
    tokio::spawn(connection);
    Ok(sender.send_request(request).await?)
}

/// One TLS client configuration for every request: the machine's trusted certificates (the
/// ones curl uses, an organization's own CA included) and the web's root certificates.
fn tls_connector() -> tokio_rustls::TlsConnector {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        Arc::new(
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
        )
    });
    tokio_rustls::TlsConnector::from(config.clone())
}
