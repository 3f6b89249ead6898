//! The user's side of cordon: where its files live, and its config file (the consent given to
//! third-party plugins, the `[bash]` and `[network]` settings).
//!
//! Everything here is the user's, never a tool's or a workspace's: the config is read only
//! from cordon's config directory or `--config`, and [`crate::own`] refuses to start when a tool
//! could write any of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The variable that moves the compile cache ([`default_cache_dir`]).
pub const CACHE_DIR_ENV: &str = "CORDON_CACHE_DIR";

/// The name of the key file that authenticates the compile cache, in the config directory.
pub const CACHE_KEY_FILE: &str = "cache.key";

/// cordon's config file: the user's consent, per plugin.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[plugins.NAME]` tables.
    #[serde(default)]
    pub plugins: BTreeMap<String, Consent>,
    /// The `[bash]` table: more for bash commands than the sandbox's defaults.
    #[serde(default)]
    pub bash: BashSettings,
    /// The `[network]` table: the hosts bash commands may reach.
    #[serde(default)]
    pub network: NetworkSettings,
}

/// The `[network]` table of cordon's config file; each list adds to its command-line option.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSettings {
    /// Host patterns commands may reach through cordon's proxy (`--allow-domain`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// `NAME=ADDRESS` mappings the proxy uses instead of a resolver (`--add-host`).
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl NetworkSettings {
    /// These settings after `more` (the command line's after the config file's).
    pub fn then(&self, more: &NetworkSettings) -> NetworkSettings {
        NetworkSettings {
            allow: [self.allow.as_slice(), &more.allow].concat(),
            hosts: [self.hosts.as_slice(), &more.hosts].concat(),
        }
    }
}

/// The `[bash]` table of cordon's config file; each list adds to its command-line option.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashSettings {
    /// More paths commands may read (`--bash-read`).
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// More paths commands may write (`--bash-write`).
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Variables passed through or set (`--bash-env`).
    #[serde(default)]
    pub env: Vec<String>,
    /// Directories put before `PATH`, readable too (`--bash-path`).
    #[serde(default)]
    pub path: Vec<PathBuf>,
    /// Protected paths relaxed (`--unprotect`).
    #[serde(default)]
    pub unprotect: Vec<PathBuf>,
    /// The home of commands (`--bash-home`): `"workspace"`, `"private"` or a directory.
    pub home: Option<String>,
    /// Grant the user's toolchains that are found (`--toolchains`, [`crate::toolchains`]).
    #[serde(default)]
    pub toolchains: bool,
    /// The most seconds a command may ask for (`--max-timeout`).
    pub max_timeout: Option<u64>,
}

impl BashSettings {
    /// These settings after `more` (the command line's after the config file's): lists
    /// joined, `more`'s home and most timeout chosen when it has them.
    pub fn then(&self, more: &BashSettings) -> BashSettings {
        let join = |a: &[PathBuf], b: &[PathBuf]| [a, b].concat();
        BashSettings {
            read: join(&self.read, &more.read),
            write: join(&self.write, &more.write),
            env: [self.env.as_slice(), &more.env].concat(),
            path: join(&self.path, &more.path),
            unprotect: join(&self.unprotect, &more.unprotect),
            home: more.home.clone().or_else(|| self.home.clone()),
            toolchains: self.toolchains || more.toolchains,
            max_timeout: more.max_timeout.or(self.max_timeout),
        }
    }
}

/// `[plugins.NAME]`: what the user allows one plugin beyond the defaults.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consent {
    /// Allow directory grants outside the workspace.
    #[serde(default)]
    pub allow_outside_workspace: bool,
    /// Allow the shell capability.
    #[serde(default)]
    pub allow_shell: bool,
    /// The HTTP hosts it may reach: each pattern of its manifest's `http` must be here.
    #[serde(default)]
    pub allow_http: Vec<String>,
    /// The environment variables the host may add to its requests as secret headers.
    #[serde(default)]
    pub allow_secrets: Vec<String>,
    /// The longest deadline the manifest may ask for, in seconds (default 10).
    pub max_timeout_secs: Option<u64>,
    /// The most memory the manifest may ask for, in MiB (default 256).
    pub max_memory_mib: Option<u64>,
}

/// Why the config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a valid cordon config: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: toml::de::Error,
    },
}

impl Config {
    /// Reads the config file at `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Invalid {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// cordon's config directory, `$XDG_CONFIG_HOME/cordon` (else `~/.config/cordon`), whether or
/// not it exists.
pub fn config_dir() -> Option<PathBuf> {
    var("XDG_CONFIG_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".config")))
        .map(|dir| dir.join("cordon"))
}

/// The config file cordon reads by default, `<config dir>/config.toml`, whether or not it
/// exists: the file a message tells the user to edit.
pub fn config_file() -> Option<PathBuf> {
    config_dir().map(|d| d.join("config.toml"))
}

/// The default config file, when it exists.
pub fn default_config_file() -> Option<PathBuf> {
    config_file().filter(|f| f.is_file())
}

/// The default plugin directory, `<config dir>/plugins`, when it exists.
pub fn default_plugin_dir() -> Option<PathBuf> {
    config_dir()
        .map(|d| d.join("plugins"))
        .filter(|d| d.is_dir())
}

/// The default key file that authenticates the compile cache, in the config directory.
pub fn default_cache_key() -> Option<PathBuf> {
    config_dir().map(|dir| dir.join(CACHE_KEY_FILE))
}

/// The default cache directory: `$CORDON_CACHE_DIR`, else `$XDG_CACHE_HOME/cordon`, else
/// `~/.cache/cordon`.
pub fn default_cache_dir() -> Option<PathBuf> {
    var(CACHE_DIR_ENV)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("cordon")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("cordon")))
}

/// cordon's data directory, `$XDG_DATA_HOME/cordon` (else `~/.local/share/cordon`), whether
/// or not it exists: where the homes of bash commands are kept.
pub fn data_dir() -> Option<PathBuf> {
    var("XDG_DATA_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".local").join("share")))
        .map(|dir| dir.join("cordon"))
}

/// A path from the environment; an empty value counts as unset.
fn var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
