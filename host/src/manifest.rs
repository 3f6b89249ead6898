//! Third-party plugins: the manifest a plugin ships, the consent the user gives in cordon's
//! config, and the grants and limits that come of the two.
//!
//! A plugin is `NAME.wasm` with `NAME.toml` beside it. The manifest declares what the plugin
//! needs; the host grants exactly that, and refuses to load a plugin that asks for more than
//! the user allowed: a directory outside the workspace, the shell, or a longer deadline or
//! more memory than the defaults all need the user's explicit consent in the config file.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::ops::RangeInclusive;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::config::{self, Consent};
use crate::grants::{Grants, HttpGrant, SecretHeader};
use crate::resolve::Resolved;
use crate::sandbox::{Allowlist, Pattern};
use crate::spec::{Limits, Source, Spec};

/// The deadline of a plugin call when neither manifest nor config says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The memory of a plugin instance when neither manifest nor config says otherwise.
pub const DEFAULT_MEMORY_MIB: u64 = 256;
/// The deadlines a manifest may ask for and a config may allow, in seconds: a call that needs
/// more than an hour is not a tool call.
pub const TIMEOUT_RANGE_SECS: RangeInclusive<u64> = 1..=3600;
/// The memory a manifest may ask for and a config may allow, in MiB: up to the most an
/// instance's slot in the engine's pool can hold.
pub const MEMORY_RANGE_MIB: RangeInclusive<u64> = 1..=(crate::engine::MAX_MEMORY as u64 >> 20);

/// `NAME.toml`: what a plugin declares about itself.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The tools the component declares; it may declare no others.
    pub tools: Vec<String>,
    /// The SHA-256 of the component (hex); when given, any other component is refused.
    pub sha256: Option<String>,
    #[serde(default)]
    pub grants: ManifestGrants,
    #[serde(default)]
    pub limits: ManifestLimits,
}

/// `[grants]`: what the plugin may touch. Nothing by default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestGrants {
    /// Directories it may read, relative to the workspace or absolute.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Directories it may read and write, relative to the workspace or absolute.
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Whether it may run shell commands through the shell capability.
    #[serde(default)]
    pub shell: bool,
    /// Environment variables passed to it by name (those set in cordon's environment).
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts it may send HTTP requests to (`wasi:http`), as `--allow-domain` patterns.
    #[serde(default)]
    pub http: Vec<String>,
    /// Headers the host adds to its requests for a host, by host name:
    /// `[grants.http_headers."api.example.com"]` with `Authorization = "Bearer ${TOKEN}"`;
    /// `${NAME}` is cordon's environment variable `NAME` at the time of the request.
    #[serde(default)]
    pub http_headers: BTreeMap<String, BTreeMap<String, String>>,
}

/// `[limits]`: bounds on each call.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    /// Wall-clock seconds a call may take.
    pub timeout_secs: Option<u64>,
    /// Linear memory an instance may use, in MiB.
    pub memory_mib: Option<u64>,
}

/// Why a third-party plugin is not loaded: its files, its pin, or what it asks for beyond the
/// user's consent. Each message says which file or setting would change that.
#[derive(Debug, thiserror::Error)]
pub enum NotLoaded {
    #[error(
        "{} has no manifest: write {} beside it (see docs/plugins.md)",
        component.display(),
        manifest.display()
    )]
    NoManifest {
        component: PathBuf,
        manifest: PathBuf,
    },
    #[error("cannot read the manifest {}: {source}", path.display())]
    ManifestUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the manifest {} is invalid: {source}", path.display())]
    ManifestInvalid {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("cannot read {}: {source}", path.display())]
    ComponentUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} has SHA-256 {actual}, but its manifest pins {pin}; the component was changed or \
         replaced. Reinstall the plugin, or update the pin if you trust the new file",
        path.display()
    )]
    PinMismatch {
        path: PathBuf,
        actual: String,
        pin: String,
    },
    #[error(
        "{setting} = {value} is out of range: it must be {} to {} {unit}",
        range.start(),
        range.end()
    )]
    OutOfRange {
        setting: String,
        value: u64,
        range: RangeInclusive<u64>,
        unit: &'static str,
    },
    #[error("grant path {} uses ~, which is not expanded; give an absolute path", path.display())]
    Tilde { path: PathBuf },
    #[error("grant path {} cannot be used: {source}", path.display())]
    GrantUnusable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("grant path {} is not a directory", path.display())]
    GrantNotDir { path: PathBuf },
    #[error("it asks for {} outside the workspace; to allow it, {fix}", dir.display())]
    OutsideWorkspace { dir: PathBuf, fix: Setting },
    #[error("it asks for the shell capability; to allow it, {fix}")]
    Shell { fix: Setting },
    #[error("its [grants] http entry {0}")]
    HttpPattern(crate::sandbox::egress::PatternError),
    #[error("it asks to send HTTP requests to {host}; to allow it, {fix}")]
    Http { host: String, fix: Setting },
    #[error("its [grants.http_headers.{host:?}] names {name:?}, which is not a header name")]
    HeaderName { host: String, name: String },
    #[error("its [grants.http_headers.{host:?}] adds its headers to no request: {why}")]
    HeaderUnmatched { host: String, why: String },
    #[error(
        "its [grants] env entry {name:?} passes nothing: a variable's name is not empty and \
         holds no `=` or NUL; fix the name or remove the entry"
    )]
    EnvName { name: String },
    #[error("it asks the host to add the secret {name} to its HTTP requests; to allow it, {fix}")]
    Secret { name: String, fix: Setting },
    #[error(
        "it asks for a {asked} s deadline, more than the {allowed} s allowed; to allow it, {fix}"
    )]
    Timeout {
        asked: u64,
        allowed: u64,
        fix: Setting,
    },
    #[error(
        "it asks for {asked} MiB of memory, more than the {allowed} MiB allowed; to allow it, {fix}"
    )]
    Memory {
        asked: u64,
        allowed: u64,
        fix: Setting,
    },
    #[error(
        "it declares the tools {declared:?} but its manifest lists {listed:?}; list every tool \
         in the manifest's `tools`"
    )]
    Unlisted {
        declared: Vec<String>,
        listed: Vec<String>,
    },
}

/// The line of cordon's config that would allow what a plugin asks for.
#[derive(Debug)]
pub struct Setting {
    pub plugin: String,
    pub key: &'static str,
    pub value: String,
    /// The config file, as the message names it.
    pub config: String,
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Setting {
            plugin,
            key,
            value,
            config,
        } = self;
        write!(
            f,
            "add `{key} = {value}` under [plugins.{plugin}] in {config}"
        )
    }
}

/// What loading a third-party plugin grants it.
#[derive(Debug)]
pub struct Admission {
    pub grants: Grants,
    pub limits: Limits,
}

impl Manifest {
    /// Reads `NAME.toml` at `path`.
    pub fn read(path: &Path) -> Result<Self, NotLoaded> {
        let path_buf = || path.to_path_buf();
        let text =
            std::fs::read_to_string(path).map_err(|source| NotLoaded::ManifestUnreadable {
                path: path_buf(),
                source,
            })?;
        toml::from_str(&text).map_err(|source| NotLoaded::ManifestInvalid {
            path: path_buf(),
            source,
        })
    }

    /// The grants and limits of plugin `name` in `workspace`, given the user's `consent`
    /// (found in `config_path`, named in messages); the error says what was refused and which
    /// setting would allow it.
    pub fn decide(
        &self,
        name: &str,
        workspace: &Path,
        consent: &Consent,
        shell: &crate::sandbox::Policy,
        hosts: &[(String, IpAddr)],
        config_path: &str,
    ) -> Result<Admission, NotLoaded> {
        let setting = |key: &'static str, value: String| Setting {
            plugin: name.to_string(),
            key,
            value,
            config: config_path.to_string(),
        };
        let ranged =
            |setting: String, value: Option<u64>, range: &RangeInclusive<u64>, unit| match value {
                Some(value) if !range.contains(&value) => Err(NotLoaded::OutOfRange {
                    setting,
                    value,
                    range: range.clone(),
                    unit,
                }),
                _ => Ok(()),
            };
        let consent_in = |key| format!("[plugins.{name}] {key} in {config_path}");
        ranged(
            "its [limits] timeout_secs".into(),
            self.limits.timeout_secs,
            &TIMEOUT_RANGE_SECS,
            "seconds",
        )?;
        ranged(
            "its [limits] memory_mib".into(),
            self.limits.memory_mib,
            &MEMORY_RANGE_MIB,
            "MiB",
        )?;
        ranged(
            consent_in("max_timeout_secs"),
            consent.max_timeout_secs,
            &TIMEOUT_RANGE_SECS,
            "seconds",
        )?;
        ranged(
            consent_in("max_memory_mib"),
            consent.max_memory_mib,
            &MEMORY_RANGE_MIB,
            "MiB",
        )?;
        let mut grants = Grants::none(workspace);
        for (paths, writable) in [(&self.grants.read, false), (&self.grants.write, true)] {
            for path in paths {
                let dir = resolve(workspace, path)?;
                if !dir.starts_with(workspace) && !consent.allow_outside_workspace {
                    return Err(NotLoaded::OutsideWorkspace {
                        dir,
                        fix: setting("allow_outside_workspace", "true".into()),
                    });
                }
                grants = if writable {
                    grants.read_write(&dir)
                } else {
                    grants.read(&dir)
                };
            }
        }
        if self.grants.shell {
            if !consent.allow_shell {
                return Err(NotLoaded::Shell {
                    fix: setting("allow_shell", "true".into()),
                });
            }
            grants = grants.shell(Arc::new(crate::sandbox::Shell::new(shell.clone())));
        }
        grants.http = self.http(consent, hosts, &setting)?.map(Arc::new);
        if let Some(name) =
            (self.grants.env.iter()).find(|n| n.is_empty() || n.contains(['=', '\0']))
        {
            return Err(NotLoaded::EnvName { name: name.clone() });
        }
        grants.env = self
            .grants
            .env
            .iter()
            .filter_map(|var| Some((var.clone(), std::env::var(var).ok()?)))
            .collect();

        let max_timeout = consent
            .max_timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        let timeout = self
            .limits
            .timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        if timeout > max_timeout {
            return Err(NotLoaded::Timeout {
                asked: timeout.as_secs(),
                allowed: max_timeout.as_secs(),
                fix: setting("max_timeout_secs", timeout.as_secs().to_string()),
            });
        }
        let max_memory = consent.max_memory_mib.unwrap_or(DEFAULT_MEMORY_MIB);
        let memory = self
            .limits
            .memory_mib
            .unwrap_or(max_memory.min(DEFAULT_MEMORY_MIB));
        if memory > max_memory {
            return Err(NotLoaded::Memory {
                asked: memory,
                allowed: max_memory,
                fix: setting("max_memory_mib", memory.to_string()),
            });
        }
        Ok(Admission {
            grants,
            limits: Limits {
                timeout,
                // In range, so it fits.
                memory: (memory << 20) as usize,
            },
        })
    }
}

impl Manifest {
    /// The HTTP grant, if the manifest asks for one: each host and each secret allowed by
    /// `consent`.
    fn http(
        &self,
        consent: &Consent,
        hosts: &[(String, IpAddr)],
        setting: &dyn Fn(&'static str, String) -> Setting,
    ) -> Result<Option<HttpGrant>, NotLoaded> {
        let asked = &self.grants;
        if asked.http.is_empty() && asked.http_headers.is_empty() {
            return Ok(None);
        }
        let patterns = (asked.http.iter())
            .map(|text| text.parse::<Pattern>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(NotLoaded::HttpPattern)?;
        // Before the user is asked to consent: to a header that would never be sent, no
        // consent would help.
        for (host, fields) in &asked.http_headers {
            if let Some(why) = unmatched(host, fields, &patterns) {
                return Err(NotLoaded::HeaderUnmatched {
                    host: host.clone(),
                    why,
                });
            }
        }
        let allowed: Vec<Pattern> = consent
            .allow_http
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        if let Some(pattern) = patterns.iter().find(|p| !allowed.contains(p)) {
            return Err(NotLoaded::Http {
                host: pattern.to_string(),
                fix: setting("allow_http", format!("[{:?}]", pattern.to_string())),
            });
        }
        let mut headers = Vec::new();
        for (host, fields) in &asked.http_headers {
            for (name, template) in fields {
                let header_name = http::HeaderName::try_from(name.as_str()).map_err(|_| {
                    NotLoaded::HeaderName {
                        host: host.clone(),
                        name: name.clone(),
                    }
                })?;
                for secret in SecretHeader::variables(template) {
                    if !consent.allow_secrets.contains(&secret) {
                        return Err(NotLoaded::Secret {
                            fix: setting("allow_secrets", format!("[{secret:?}]")),
                            name: secret,
                        });
                    }
                }
                headers.push(SecretHeader {
                    host: host.to_ascii_lowercase(),
                    name: header_name,
                    template: template.clone(),
                });
            }
        }
        let allowlist = Allowlist {
            patterns,
            hosts: hosts.to_vec(),
        };
        Ok(Some(HttpGrant { allowlist, headers }))
    }
}

/// Why the `[grants.http_headers]` table `key` can add its `fields` to no request, if it
/// cannot: a request gets the headers of the host its URL names, compared alone (no scheme,
/// port or path), and only a request to a host of the plugin's `http` grant goes out at all.
fn unmatched(key: &str, fields: &BTreeMap<String, String>, patterns: &[Pattern]) -> Option<String> {
    if fields.is_empty() {
        return Some("it names no header; add one, or remove the table".into());
    }
    let host = url_host(key);
    if host != key {
        return Some(format!(
            "a request's headers are chosen by its host as its URL names it, without a scheme, \
             port or path; write [grants.http_headers.{host:?}]"
        ));
    }
    if patterns.iter().any(|p| p.allows_host(key)) {
        return None;
    }
    let granted: Vec<String> = patterns.iter().map(ToString::to_string).collect();
    Some(match granted.as_slice() {
        [] => format!(
            "its [grants] http allows no host, so no request goes out; add {key:?} to it, or \
             remove the table"
        ),
        _ => format!(
            "{key} is not a host its [grants] http allows ({}); add it there, or correct the \
             name",
            granted.join(", ")
        ),
    })
}

/// The host a URL written as `key` names, as a request's host is compared: without a scheme,
/// a path, a port or a final dot, an IPv6 address in brackets.
fn url_host(key: &str) -> String {
    if key.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{key}]");
    }
    let rest = key.split_once("://").map_or(key, |(_, rest)| rest);
    let rest = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host = match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((v6, _)) => &rest[..v6.len() + 2],
        None => rest.split(':').next().unwrap_or(rest),
    };
    host.trim_end_matches('.').to_string()
}

/// A grant path: relative to the workspace or absolute, existing, canonical.
fn resolve(workspace: &Path, path: &Path) -> Result<PathBuf, NotLoaded> {
    if path.components().next() == Some(Component::Normal("~".as_ref())) {
        return Err(NotLoaded::Tilde {
            path: path.to_path_buf(),
        });
    }
    let joined = workspace.join(path);
    let dir = joined
        .canonicalize()
        .map_err(|source| NotLoaded::GrantUnusable {
            path: joined,
            source,
        })?;
    if !dir.is_dir() {
        return Err(NotLoaded::GrantNotDir { path: dir });
    }
    Ok(dir)
}

/// The manifest of the component file `component`: `NAME.toml` beside `NAME.wasm`.
pub fn manifest_path(component: &Path) -> PathBuf {
    component.with_extension("toml")
}

/// The plugins of directory `dir`: every `NAME.wasm` in it, in name order.
pub fn specs_in(dir: &Path, resolved: &Resolved) -> Result<Vec<Spec>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::PluginDir {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut components: Vec<PathBuf> = entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "wasm") && path.is_file())
        .collect();
    components.sort();
    components.iter().map(|path| spec(path, resolved)).collect()
}

/// The plugin whose component is the file `path`, with its manifest beside it: read, checked
/// against its pin, and granted what the manifest asks and the user allows.
pub fn spec(path: &Path, resolved: &Resolved) -> Result<Spec, Error> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let refuse = |refusal: NotLoaded| Error::Plugin {
        plugin: name.clone(),
        refusal: Box::new(refusal),
    };
    let manifest_path = manifest_path(path);
    if !manifest_path.is_file() {
        return Err(refuse(NotLoaded::NoManifest {
            component: path.to_path_buf(),
            manifest: manifest_path,
        }));
    }
    let manifest = Manifest::read(&manifest_path).map_err(refuse)?;
    let bytes = std::fs::read(path).map_err(|source| {
        refuse(NotLoaded::ComponentUnreadable {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    if let Some(pin) = &manifest.sha256 {
        let actual = hex(&digest);
        if !pin.eq_ignore_ascii_case(&actual) {
            return Err(refuse(NotLoaded::PinMismatch {
                path: path.to_path_buf(),
                actual,
                pin: pin.clone(),
            }));
        }
    }
    let consent = resolved.consents.get(&name).cloned().unwrap_or_default();
    let config_path = resolved
        .config
        .clone()
        .or_else(config::config_file)
        .map_or_else(
            || {
                format!(
                    "cordon's config file ({})",
                    crate::sandbox::Setting::ConfigFile(None)
                )
            },
            |p| p.display().to_string(),
        );
    let decision = manifest
        .decide(
            &name,
            &resolved.workspace,
            &consent,
            &resolved.shell,
            &resolved.hosts,
            &config_path,
        )
        .map_err(refuse)?;
    Ok(Spec {
        name: name.clone(),
        source: Source::File(path.to_path_buf()),
        bytes: bytes.into(),
        digest,
        grants: decision.grants,
        limits: decision.limits,
        tools: Some(manifest.tools),
    })
}

/// The SHA-256 of `bytes` as lowercase hex, the form manifests pin.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmatched_key(key: &str, http: &[&str]) -> Option<String> {
        let fields = BTreeMap::from([("Authorization".to_string(), "Bearer ${T}".to_string())]);
        let patterns: Vec<Pattern> = http.iter().map(|p| p.parse().unwrap()).collect();
        unmatched(key, &fields, &patterns)
    }

    #[test]
    fn a_header_key_is_a_granted_host_alone() {
        let http = ["localhost:8080", "*.example.org", "[::1]:80"];
        for key in ["localhost", "LocalHost", "api.example.org", "[::1]"] {
            assert_eq!(unmatched_key(key, &http), None, "{key}");
        }
        for (key, host) in [
            ("localhost:8080", "localhost"),
            ("https://api.example.org/v1", "api.example.org"),
            ("api.example.org.", "api.example.org"),
            ("::1", "[::1]"),
            ("[::1]:80", "[::1]"),
        ] {
            let why = unmatched_key(key, &http).unwrap();
            assert!(
                why.ends_with(&format!("write [grants.http_headers.{host:?}]")),
                "{key}: {why}"
            );
        }
        assert_eq!(
            unmatched_key("example.org", &http).unwrap(),
            "example.org is not a host its [grants] http allows (localhost:8080, \
             *.example.org, [::1]:80); add it there, or correct the name"
        );
        assert!(
            unmatched_key("api.test", &[])
                .unwrap()
                .contains("allows no host")
        );
        assert!(unmatched("localhost", &BTreeMap::new(), &[]).is_some());
    }
}
