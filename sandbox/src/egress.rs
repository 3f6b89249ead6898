//! Egress by name: which hosts and ports a command may reach, and the checks an address
//! passes before anything connects to it.
//!
//! A command with an [`Allowlist`] keeps its empty network namespace; its only way out is
//! cordon's proxy (the `proxy` module), which asks [`Allowlist::decide`] about every
//! connection. A name is matched as the client asked for it, then resolved by cordon, and the
//! proxy connects to the very addresses that were checked: an answer that changes between the
//! check and the connect (DNS rebinding) cannot move the connection. An allowed name that
//! resolves to a loopback, link-local (the cloud metadata address), private or unspecified
//! address is refused unless the user named that address, or the name is `localhost`.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::setting::Setting;

/// The ports a pattern without `:PORT` allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// How commands may use the network.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Network {
    /// Nothing outside the command is reachable: its own network namespace with only its
    /// loopback, where cordon's proxy refuses every host at once.
    #[default]
    Off,
    /// The names of the allowlist, through cordon's proxy; nothing else.
    Allow(Allowlist),
    /// The host's network, every address and port (`--bash-network`).
    Open,
}

impl Network {
    /// The allowlist commands reach the network through cordon's proxy with: none on the
    /// host's network; an empty one when the network is off, so that a client that honours
    /// the proxy variables is refused at once, told the host it asked for and the option that
    /// allows it, instead of failing a lookup and retrying.
    pub fn proxied(&self) -> Option<Allowlist> {
        match self {
            Network::Off => Some(Allowlist::default()),
            Network::Allow(allowlist) => Some(allowlist.clone()),
            Network::Open => None,
        }
    }
}

/// The hosts and ports commands may reach, and the addresses the user gave for names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowlist {
    /// What may be reached (`--allow-domain`).
    pub patterns: Vec<Pattern>,
    /// Names the user mapped to an address (`--add-host NAME=ADDR`): cordon connects there
    /// without asking a resolver, even when the address is a loopback or private one.
    pub hosts: Vec<(String, IpAddr)>,
}

/// One allowed host (a name, every subdomain of a name, or an address) and its port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    host: Host,
    /// None: [`DEFAULT_PORTS`].
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Host {
    /// Exactly this name.
    Name(String),
    /// Any name below this one (`*.example.org`), not the name itself.
    Below(String),
    Address(IpAddr),
}

/// Why a pattern or a host mapping is not valid.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error(
        "{0:?} is not a host pattern: give a name (pypi.org), a wildcard of subdomains \
         (*.githubusercontent.com) or an address, optionally with :PORT"
    )]
    Malformed(String),
    #[error(
        "{0:?} would allow every host; use {open} to give commands the whole network",
        open = Setting::BashNetwork
    )]
    Everything(String),
    #[error("{0:?} is not NAME=ADDRESS (for example pkg.test=127.0.0.1)")]
    Mapping(String),
}

impl FromStr for Pattern {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Self, PatternError> {
        let malformed = || PatternError::Malformed(text.to_string());
        if matches!(text, "*" | "*:*") || text.starts_with("*:") {
            return Err(PatternError::Everything(text.to_string()));
        }
        let (host, port) = split_port(text).ok_or_else(malformed)?;
        let host = if let Some(below) = host.strip_prefix("*.") {
            Host::Below(name(below).ok_or_else(malformed)?)
        } else if let Ok(address) = host.parse::<IpAddr>() {
            Host::Address(address)
        } else {
            Host::Name(name(host).ok_or_else(malformed)?)
        };
        Ok(Pattern { host, port })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(name) => write!(f, "{name}")?,
            Host::Below(name) => write!(f, "*.{name}")?,
            Host::Address(IpAddr::V6(v6)) => write!(f, "[{v6}]")?,
            Host::Address(v4) => write!(f, "{v4}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

impl Pattern {
    fn allows_port(&self, port: u16) -> bool {
        self.port
            .map_or(DEFAULT_PORTS.contains(&port), |p| p == port)
    }

    /// Whether the client's `host` (a normalized name or an address) and `port` fit.
    fn matches(&self, host: &Asked, port: u16) -> bool {
        self.allows_port(port) && self.fits(host)
    }

    fn fits(&self, host: &Asked) -> bool {
        match (&self.host, host) {
            (Host::Name(n), Asked::Name(asked)) => n == asked,
            (Host::Below(n), Asked::Name(asked)) => asked
                .strip_suffix(n.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Host::Address(a), Asked::Address(asked)) => a == asked,
            _ => false,
        }
    }

    /// Whether it allows `host` (a name, or an address, an IPv6 one in brackets or not) on
    /// some port.
    pub fn allows_host(&self, host: &str) -> bool {
        Asked::parse(host).is_some_and(|asked| self.fits(&asked))
    }
}

/// A `NAME=ADDRESS` mapping (`--add-host`).
pub fn parse_host(text: &str) -> Result<(String, IpAddr), PatternError> {
    let mapping = || PatternError::Mapping(text.to_string());
    let (host, address) = text.split_once('=').ok_or_else(mapping)?;
    let address = address
        .trim_matches(['[', ']'])
        .parse()
        .map_err(|_| mapping())?;
    Ok((name(host).ok_or_else(mapping)?, address))
}

/// `host[:port]` or `[v6][:port]`: the host and its port, if one is given.
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match text.rsplit_once(':') {
        // More than one colon: a bare IPv6 address.
        Some((host, _)) if host.contains(':') => Some((text, None)),
        Some((host, port)) => Some((host, Some(port.parse().ok().filter(|&p| p != 0)?))),
        None => Some((text, None)),
    }
}

/// `text` as a host name in canonical form (lower case, no final dot), if it is one.
fn name(text: &str) -> Option<String> {
    let lower = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
    let valid = !lower.is_empty()
        && lower.len() <= 253
        && lower.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    valid.then_some(lower)
}

/// The host as the client asked for it.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Name(String),
    Address(IpAddr),
}

impl Asked {
    fn parse(host: &str) -> Option<Asked> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse() {
            Ok(address) => Some(Asked::Address(address)),
            Err(_) => name(host).map(Asked::Name),
        }
    }
}

/// A connection the proxy refused, for the command's output and the session's response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocked {
    /// `host:port` as the client asked for it.
    pub target: String,
    /// The line the command's output gets, which says what to do.
    pub line: String,
}

/// Why a connection cannot be made: the host is not on the list, its address is refused, or
/// it cannot be reached.
#[derive(Debug)]
pub enum NoConnection {
    /// No pattern allows the name and port (the user may be asked).
    Unlisted(Blocked),
    Blocked(Blocked),
    Unreachable(String),
}

impl Allowlist {
    /// The addresses to connect to for the client's `host` and `port`, each checked.
    pub fn decide(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, NoConnection> {
        let target = format!("{}:{port}", bracketed(host));
        let Some(asked) = Asked::parse(host).filter(|asked| self.listed(asked, port)) else {
            let set = match Asked::parse(host) {
                Some(Asked::Name(name)) if DEFAULT_PORTS.contains(&port) => super::sets::of(&name),
                _ => None,
            };
            let or_set = set.map_or(String::new(), |set| {
                format!(
                    ", or the hosts of its set with {}",
                    Setting::AllowDomainSet(set.to_string())
                )
            });
            return Err(NoConnection::Unlisted(Blocked {
                line: format!(
                    "[network: blocked {target}; allow it with {}{or_set}]",
                    Setting::AllowDomain(suggestion(host, port))
                ),
                target,
            }));
        };
        let addresses: Vec<SocketAddr> = match &asked {
            Asked::Address(address) => vec![SocketAddr::new(*address, port)],
            Asked::Name(name) => match self.hosts.iter().find(|(n, _)| n == name) {
                // The user's own mapping: the user named the address.
                Some((_, address)) => return Ok(vec![SocketAddr::new(*address, port)]),
                None => (name.as_str(), port)
                    .to_socket_addrs()
                    .map_err(|e| NoConnection::Unreachable(format!("cannot resolve {name}: {e}")))?
                    .collect(),
            },
        };
        let (allowed, inner): (Vec<_>, Vec<_>) = addresses.into_iter().partition(|addr| {
            kind(addr.ip()).is_none()
                || asked == Asked::Name("localhost".into()) && addr.ip().is_loopback()
                || self.listed(&Asked::Address(addr.ip()), port)
        });
        match (allowed.is_empty(), inner.first()) {
            (false, _) => Ok(allowed),
            (true, Some(addr)) => Err(NoConnection::Blocked(Blocked {
                line: format!(
                    "[network: blocked {target}: it resolves to {ip}, a {kind} address; allow \
                     that address with {}]",
                    Setting::AllowDomain(suggestion(&addr.ip().to_string(), port)),
                    ip = addr.ip(),
                    kind = kind(addr.ip()).unwrap_or("private"),
                ),
                target,
            })),
            (true, None) => Err(NoConnection::Unreachable(format!("{host} has no address"))),
        }
    }

    /// Allows exactly `host` (as the client asked for it) on `port` from now on: the user
    /// allowed it when asked.
    pub fn allow(&mut self, host: &str, port: u16) {
        let host = match Asked::parse(host) {
            Some(Asked::Name(name)) => Host::Name(name),
            Some(Asked::Address(address)) => Host::Address(address),
            None => return,
        };
        let port = Some(port);
        self.patterns.push(Pattern { host, port });
    }

    /// The patterns and mappings, for the user: `pypi.org, *.example.org:8443 (pkg.test is
    /// 127.0.0.1)`.
    pub fn describe(&self) -> String {
        let patterns: Vec<String> = self.patterns.iter().map(Pattern::to_string).collect();
        let mut text = patterns.join(", ");
        if text.is_empty() {
            text.push_str("no host");
        }
        if !self.hosts.is_empty() {
            let hosts: Vec<String> = self
                .hosts
                .iter()
                .map(|(name, address)| format!("{name} is {address}"))
                .collect();
            text.push_str(&format!(" ({})", hosts.join(", ")));
        }
        text
    }

    fn listed(&self, asked: &Asked, port: u16) -> bool {
        self.patterns.iter().any(|p| p.matches(asked, port))
    }
}

/// `host` as it is written before `:PORT`: an IPv6 address in brackets.
pub fn bracketed(host: &str) -> String {
    match host.contains(':') {
        true => format!("[{}]", host.trim_matches(['[', ']'])),
        false => host.to_string(),
    }
}

/// The `--allow-domain` value that would allow `host:port`.
fn suggestion(host: &str, port: u16) -> String {
    let host = bracketed(host);
    match DEFAULT_PORTS.contains(&port) {
        true => host,
        false => format!("{host}:{port}"),
    }
}

/// What kind of address outside the public internet `ip` is, if it is one.
fn kind(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            if v4.is_loopback() {
                Some("loopback")
            } else if v4.is_link_local() {
                Some("link-local")
            } else if v4.is_unspecified() || a == 0 {
                Some("unspecified")
            } else if v4.is_private() || a == 100 && (64..128).contains(&b) {
                Some("private")
            } else if v4.is_multicast() || v4.is_broadcast() {
                Some("multicast")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if first & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if first & 0xfe00 == 0xfc00 {
                Some("private")
            } else if v6.is_multicast() {
                Some("multicast")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(patterns: &[&str]) -> Allowlist {
        Allowlist {
            patterns: patterns.iter().map(|p| p.parse().unwrap()).collect(),
            hosts: Vec::new(),
        }
    }

    fn blocked(result: Result<Vec<SocketAddr>, NoConnection>) -> String {
        match result {
            Err(NoConnection::Blocked(blocked) | NoConnection::Unlisted(blocked)) => blocked.line,
            other => panic!("not blocked: {other:?}"),
        }
    }

    #[test]
    fn patterns_parse_and_print() {
        for text in [
            "pypi.org",
            "*.githubusercontent.com:8443",
            "10.0.0.1:22",
            "[::1]:80",
        ] {
            assert_eq!(text.parse::<Pattern>().unwrap().to_string(), text);
        }
        assert_eq!(
            "PyPI.org.".parse::<Pattern>().unwrap().to_string(),
            "pypi.org"
        );
        for bad in [
            "",
            "a..b",
            "-a.org",
            "a.org:0",
            "a.org:http",
            "a b",
            "*.",
            "[::1",
        ] {
            assert!(bad.parse::<Pattern>().is_err(), "{bad}");
        }
        assert!(matches!(
            "*".parse::<Pattern>(),
            Err(PatternError::Everything(_))
        ));
    }

    #[test]
    fn a_host_is_allowed_on_some_port_or_not_at_all() {
        let pattern = |text: &str| text.parse::<Pattern>().unwrap();
        assert!(pattern("localhost:8080").allows_host("LocalHost"));
        assert!(pattern("*.example.org").allows_host("api.example.org"));
        assert!(!pattern("*.example.org").allows_host("example.org"));
        assert!(pattern("[::1]:80").allows_host("[::1]"));
        assert!(!pattern("pypi.org").allows_host("pypi.org:443"));
        assert!(!pattern("pypi.org").allows_host("https://pypi.org"));
    }

    #[test]
    fn names_ports_and_subdomains_match_as_written() {
        let allow = list(&["pypi.org", "*.example.org:8443"]);
        let asked = |h: &str| Asked::parse(h).unwrap();
        assert!(allow.listed(&asked("pypi.org"), 443));
        assert!(allow.listed(&asked("PYPI.ORG."), 80));
        assert!(!allow.listed(&asked("pypi.org"), 8080));
        assert!(!allow.listed(&asked("files.pypi.org"), 443));
        assert!(allow.listed(&asked("a.b.example.org"), 8443));
        assert!(!allow.listed(&asked("example.org"), 8443));
        assert!(!allow.listed(&asked("badexample.org"), 8443));
        assert!(!allow.listed(&asked("a.example.org"), 443));
    }

    #[test]
    fn refusals_say_what_to_allow() {
        let allow = list(&["pypi.org"]);
        assert_eq!(
            blocked(allow.decide("evil.com", 443)),
            "[network: blocked evil.com:443; allow it with [network] allow = [\"evil.com\"]]"
        );
        assert_eq!(
            blocked(allow.decide("files.pythonhosted.org", 443)),
            "[network: blocked files.pythonhosted.org:443; allow it with [network] allow = \
             [\"files.pythonhosted.org\"], or the hosts of its set with [network] allow = \
             [\"@pypi\"]]"
        );
        assert_eq!(
            blocked(allow.decide("pypi.org", 8080)),
            "[network: blocked pypi.org:8080; allow it with [network] allow = \
             [\"pypi.org:8080\"]]"
        );
    }

    #[test]
    fn an_allowed_answer_adds_exactly_that_host_and_port() {
        let mut allow = list(&[]);
        assert!(matches!(
            allow.decide("8.8.8.8", 53),
            Err(NoConnection::Unlisted(_))
        ));
        allow.allow("8.8.8.8", 53);
        assert!(allow.decide("8.8.8.8", 53).is_ok());
        assert!(matches!(
            allow.decide("8.8.8.8", 443),
            Err(NoConnection::Unlisted(_))
        ));
        assert_eq!(allow.describe(), "8.8.8.8:53");
    }

    #[test]
    fn inner_addresses_need_naming() {
        let allow = list(&["169.254.169.254", "localhost:8080", "10.1.2.3:22"]);
        assert!(allow.decide("169.254.169.254", 80).is_ok());
        assert!(allow.decide("10.1.2.3", 22).is_ok());
        assert!(allow.decide("localhost", 8080).is_ok());
        let mapped = Allowlist {
            hosts: vec![("pkg.test".into(), "127.0.0.1".parse().unwrap())],
            ..list(&["pkg.test:9000"])
        };
        assert_eq!(
            mapped.decide("pkg.test", 9000).unwrap(),
            vec!["127.0.0.1:9000".parse().unwrap()]
        );
        let addr = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(kind(addr("127.0.0.5")), Some("loopback"));
        assert_eq!(kind(addr("169.254.169.254")), Some("link-local"));
        assert_eq!(kind(addr("100.100.1.1")), Some("private"));
        assert_eq!(kind(addr("::ffff:192.168.1.1")), Some("private"));
        assert_eq!(kind(addr("fd00::1")), Some("private"));
        assert_eq!(kind(addr("0.0.0.0")), Some("unspecified"));
        assert_eq!(kind(addr("8.8.8.8")), None);
        assert_eq!(kind(addr("2606:4700::1")), None);
    }

    #[test]
    fn host_mappings_parse() {
        assert_eq!(
            parse_host("Pkg.Test=127.0.0.1").unwrap(),
            ("pkg.test".into(), addr("127.0.0.1"))
        );
        assert_eq!(parse_host("v6.test=[::1]").unwrap().1, addr("::1"));
        assert!(parse_host("pkg.test").is_err());
        assert!(parse_host("pkg.test=nowhere").is_err());

        fn addr(s: &str) -> IpAddr {
            s.parse().unwrap()
        }
    }
}
