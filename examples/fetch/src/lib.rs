//! An example third-party plugin that speaks HTTP: the `fetch` tool GETs a URL and answers with
//! its text, HTML reduced to readable text.
//!
//! It imports `wasi:http/outgoing-handler` (through the `wasi` crate's bindings) and nothing
//! else of the host: no file, no shell. The host links that interface only because the
//! manifest, `fetch.toml`, grants hosts and the user consented to them; it sends a request only
//! to those hosts, adds the secret headers the manifest names (the plugin never sees their
//! values), and redacts those values from the output.

use cordon_kit::{Context, Counter, Declaration, Kind, Outcome, Tool};
use schemars::JsonSchema;
use serde::Deserialize;
use wasi::http::outgoing_handler;
use wasi::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingRequest, Scheme};
use wasi::io::streams::StreamError;

/// The most bytes of a body read; the host bounds it too.
const MAX_BODY: usize = 4 << 20;
/// The most redirects followed for one call.
const MAX_REDIRECTS: usize = 5;

/// The `fetch` tool.
pub struct Fetch;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The URL to GET, `http://` or `https://`.
    #[schemars(length(min = 1))]
    url: String,
    /// Return an HTML page as it is instead of as readable text.
    #[serde(default)]
    raw: bool,
}

const DESCRIPTION: &str = "GET a URL (http or https) on a host this plugin is allowed to \
reach and return its body as text (redirects followed, at most 5): HTML is reduced to readable text (scripts, styles and tags \
dropped, headings and list items on lines of their own) unless `raw` is set; other text and JSON \
are returned as they are; binary content is described, not shown. A status other than 2xx is a \
failure that shows the status and the body. A host outside the plugin's grant is refused by \
cordon.";

impl Tool for Fetch {
    type Input = Input;
    const NAME: &'static str = "fetch";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Fetch,
                DESCRIPTION,
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("🌐", Some("url"))
            .counted_as(Counter::new("fetches", "🌐", "fetch", "fetches")),
        )
    }

    fn call(input: Input, _context: &Context) -> Result<Outcome, String> {
        let mut url = input.url.clone();
        let mut page = get(&url)?;
        for _ in 0..MAX_REDIRECTS {
            let Some(next) = page.location.as_deref().map(|l| join(&url, l)) else {
                break;
            };
            url = next;
            page = get(&url)?;
        }
        let text = match page.content_type.split(';').next().map(str::trim) {
            Some("text/html" | "application/xhtml+xml") if !input.raw => {
                readable(&String::from_utf8_lossy(&page.body))
            }
            Some(t) if t.starts_with("text/") || t.ends_with("json") || t.ends_with("xml") => {
                String::from_utf8_lossy(&page.body).into_owned()
            }
            _ if std::str::from_utf8(&page.body).is_ok() => {
                String::from_utf8_lossy(&page.body).into_owned()
            }
            _ => format!(
                "[{} bytes of {} content, not shown]",
                page.body.len(),
                page.content_type
            ),
        };
        if (200..300).contains(&page.status) {
            Ok(Outcome::success(text))
        } else {
            Ok(Outcome::failure(format!(
                "{url} answered HTTP {}:\n{text}",
                page.status
            )))
        }
    }
}

cordon_kit::export_tools!(Fetch);

/// What a GET returned.
struct Page {
    status: u16,
    content_type: String,
    body: Vec<u8>,
    /// Where a redirect points.
    location: Option<String>,
}

/// `location` (absolute, or relative to the host or the path of `base`) as an absolute URL.
fn join(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(base.len(), |i| scheme_end + i);
    if let Some(path) = location.strip_prefix("//") {
        return format!("{}{path}", &base[..scheme_end]);
    }
    if location.starts_with('/') {
        return format!("{}{location}", &base[..host_end]);
    }
    let dir_end = base[host_end..]
        .split(['?', '#'])
        .next()
        .and_then(|path| path.rfind('/'))
        .map_or(host_end, |i| host_end + i);
    format!("{}/{location}", &base[..dir_end])
}

fn get(url: &str) -> Result<Page, String> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Http, rest)
    } else {
        return Err(format!("{url:?} is not an http:// or https:// URL"));
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = path.split('#').next().unwrap_or_default();
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    if authority.is_empty() {
        return Err(format!("{url:?} names no host"));
    }
    let headers = Fields::from_list(&[
        ("user-agent".to_string(), b"cordon-fetch/0.1".to_vec()),
        (
            "accept".to_string(),
            b"text/html, text/plain;q=0.9, */*;q=0.5".to_vec(),
        ),
    ])
    .map_err(|e| format!("cannot build the request headers: {e:?}"))?;
    let request = OutgoingRequest::new(headers);
    let invalid = |what: &str| format!("{url:?} has an invalid {what}");
    request
        .set_method(&Method::Get)
        .map_err(|()| invalid("method"))?;
    request
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("scheme"))?;
    request
        .set_authority(Some(authority))
        .map_err(|()| invalid("host"))?;
    request
        .set_path_with_query(Some(&path))
        .map_err(|()| invalid("path"))?;
    let pending = outgoing_handler::handle(request, None).map_err(|e| failure(url, &e))?;
    let response = loop {
        match pending.get() {
            Some(response) => break response,
            None => pending.subscribe().block(),
        }
    };
    let response = response
        .map_err(|()| format!("cannot fetch {url}: the response was already taken"))?
        .map_err(|e| failure(url, &e))?;
    let status = response.status();
    let header = |name: &str| {
        (response.headers().get(name).first()).map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let content_type = header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let location = header("location").filter(|_| matches!(status, 301..=303 | 307 | 308));
    let incoming = response
        .consume()
        .map_err(|()| format!("cannot read the body of {url}"))?;
    let stream = incoming
        .stream()
        .map_err(|()| format!("cannot read the body of {url}"))?;
    let mut body = Vec::new();
    loop {
        match stream.blocking_read(64 << 10) {
            Ok(chunk) => {
                body.extend_from_slice(&chunk);
                if body.len() > MAX_BODY {
                    return Err(format!(
                        "the body of {url} is larger than {} MiB; fetch something smaller",
                        MAX_BODY >> 20
                    ));
                }
            }
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(format!(
                    "cannot read the body of {url}: {}",
                    e.to_debug_string()
                ));
            }
        }
    }
    drop(stream);
    IncomingBody::finish(incoming);
    Ok(Page {
        status,
        content_type,
        body,
        location,
    })
}

/// The text of a failed request, for the model.
fn failure(url: &str, error: &ErrorCode) -> String {
    match error {
        ErrorCode::HttpRequestDenied => format!(
            "cannot fetch {url}: cordon refused the request (its host is not one this plugin \
             may reach, or it resolves to a loopback, link-local or private address)"
        ),
        other => format!("cannot fetch {url}: {other:?}"),
    }
}

/// Elements whose content is not text for a reader.
const HIDDEN: [&str; 6] = ["script", "style", "noscript", "template", "svg", "head"];
/// Elements that start a line of their own.
const BLOCKS: [&str; 22] = [
    "p",
    "div",
    "br",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "section",
    "article",
    "header",
    "footer",
    "pre",
    "table",
    "ul",
    "ol",
    "blockquote",
    "title",
    "hr",
];

/// `html` as readable text: tags dropped, the content of `HIDDEN` elements dropped (a
/// page's title kept), a line break at each of `BLOCKS`, entities decoded, runs of blank
/// space collapsed.
pub fn readable(html: &str) -> String {
    let mut text = String::new();
    let mut rest = html;
    let mut hidden: Option<String> = None;
    while let Some(open) = rest.find('<') {
        if hidden.is_none() {
            text.push_str(&decode(&rest[..open]));
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            rest = "";
            break;
        };
        let tag = &after[..close];
        rest = &after[close + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        match &hidden {
            // The title is in the head, which is otherwise hidden.
            _ if name == "title" && !closing => {
                if let Some(end) = rest.to_ascii_lowercase().find("</title>") {
                    text.push_str(&decode(&rest[..end]));
                    text.push('\n');
                    rest = &rest[end..];
                }
            }
            Some(inside) if closing && *inside == name => hidden = None,
            Some(_) => {}
            None if !closing && HIDDEN.contains(&name.as_str()) && !tag.ends_with('/') => {
                hidden = Some(name.clone());
            }
            None if BLOCKS.contains(&name.as_str()) => {
                text.push('\n');
                if name == "li" && !closing {
                    text.push_str("- ");
                }
            }
            None => {}
        }
    }
    if hidden.is_none() {
        text.push_str(&decode(rest));
    }
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if !line.is_empty() || lines.last().is_some_and(|l| !l.is_empty()) {
            lines.push(line);
        }
    }
    let mut out = lines.join("\n").trim().to_string();
    out.push('\n');
    out
}

/// `text` with its character references decoded (the named ones pages use most, and numeric
/// ones); anything else is kept as written.
fn decode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.find(';').filter(|&e| e <= 10);
        let decoded = end.and_then(|end| {
            let name = &rest[1..end];
            let c = match name {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" => '\'',
                "nbsp" => ' ',
                _ => {
                    let code = match name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => name.strip_prefix('#').and_then(|d| d.parse().ok()),
                    };
                    char::from_u32(code?)?
                }
            };
            Some((c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text() {
        let html = "<html><head><title>A &amp; B</title><style>p{}</style></head><body>\
                    <h1>Head</h1><p>One   two<br>three</p><script>x()</script>\
                    <ul><li>first</li><li>second &#8212; &#x41;</li></ul></body></html>";
        assert_eq!(
            readable(html),
            "A & B\n\nHead\n\nOne two\nthree\n\n- first\n\n- second — A\n"
        );
    }

    #[test]
    fn redirects_resolve_against_the_page() {
        let base = "https://docs.rs/serde/1.0/serde/index.html?x";
        assert_eq!(join(base, "https://a.org/b"), "https://a.org/b");
        assert_eq!(join(base, "//cdn.org/x"), "https://cdn.org/x");
        assert_eq!(join(base, "/crate/serde"), "https://docs.rs/crate/serde");
        assert_eq!(
            join(base, "de/index.html"),
            "https://docs.rs/serde/1.0/serde/de/index.html"
        );
        assert_eq!(join("https://docs.rs", "serde"), "https://docs.rs/serde");
    }

    #[test]
    fn stray_ampersands_stay() {
        assert_eq!(
            decode("a & b &unknown; &#99999999;"),
            "a & b &unknown; &#99999999;"
        );
    }
}
