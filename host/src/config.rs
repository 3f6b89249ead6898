//! The user's side of cordon: where its files live, and its config file (the consent given to
//! third-party plugins, the `[bash]` and `[network]` settings).
//!
//! Everything here is the user's, never a tool's or a workspace's: the config is read only
//! from cordon's config directory or `--config`, and [`crate::own`] refuses to start when a tool
//! could write any of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::settings::Settings;

/// The variable that moves the compile cache ([`default_cache_dir`]).
pub const CACHE_DIR_ENV: &str = "CORDON_CACHE_DIR";

/// The name of the key file that authenticates the compile cache, in the config directory.
pub const CACHE_KEY_FILE: &str = "cache.key";

/// cordon's config file: the user's consent, per plugin, and every knob of the runtime and
/// its sandbox ([`Settings`]: the `[tools]`, `[bash]` and `[network]` tables).
#[derive(Debug, Default)]
pub struct Config {
    /// `[plugins.NAME]` tables.
    pub plugins: BTreeMap<String, Consent>,
    /// The settings, which the command line's join ([`crate::settings::Layers`]).
    pub settings: Settings,
}

/// The file as written: its tables, each refusing a key it does not know.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    plugins: BTreeMap<String, Consent>,
    #[serde(default)]
    tools: crate::settings::Tools,
    #[serde(default)]
    bash: crate::settings::Bash,
    #[serde(default)]
    network: crate::settings::Network,
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
    /// A value its setting refuses (or of the wrong type), named by its key and table.
    #[error("{key} = {value} in [{table}]: {why}")]
    Value {
        key: String,
        value: String,
        table: String,
        why: String,
    },
}

impl Config {
    /// Reads the config file at `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |source| ConfigError::Invalid {
            path: path.to_path_buf(),
            source,
        };
        let document = toml::Deserializer::parse(&text).map_err(invalid)?;
        // A bad value is named by its key and table; anything else (an unknown key, a value
        // in a list) is shown where it is in the file.
        let file: File = serde_path_to_error::deserialize(document).map_err(|e| {
            let path = e.path().iter().map(|s| s.to_string()).collect::<Vec<_>>();
            let source = e.into_inner();
            let value = source.span().map(|span| text[span].trim().to_string());
            match (value, path.split_last()) {
                (Some(value), Some((key, table)))
                    if !table.is_empty() && !key.starts_with('[') && value != *key =>
                {
                    ConfigError::Value {
                        key: key.clone(),
                        value,
                        table: table.join("."),
                        why: source.message().to_string(),
                    }
                }
                _ => invalid(source),
            }
        })?;
        Ok(Config {
            plugins: file.plugins,
            settings: Settings {
                tools: file.tools,
                bash: file.bash,
                network: file.network,
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        Config::read(&path)
    }

    #[test]
    fn every_knob_is_a_key_read_by_its_type() {
        let config = read(
            "[tools]\nmax_output = 100\nedit_tools = false\n\
             [bash]\ntimeout = \"60\"\nmemory = 512\nallow_missing = [\"seccomp\"]\n\
             env = [\"A=1\"]\n[network]\nopen = true\nallow = [\"@pypi\"]\n",
        )
        .unwrap();
        let s = &config.settings;
        assert_eq!(s.tools.max_output, Some(100));
        assert_eq!(s.tools.edit_tools, Some(false));
        assert_eq!(s.bash.timeout, Some("60".parse().unwrap()));
        assert_eq!(s.bash.memory.map(|m| m.bytes()), Some(512 << 20));
        assert_eq!(s.bash.env, ["A=1".parse().unwrap()]);
        assert_eq!(s.network.allow[0].patterns().len(), 2);
    }

    #[test]
    fn a_bad_value_is_named_by_its_key_and_table() {
        let error = read("[bash]\nmax_timeout = 0\n").unwrap_err().to_string();
        assert_eq!(
            error,
            "max_timeout = 0 in [bash]: commands may not be given no time; use 1 or more seconds"
        );
        let error = read("[plugins.x]\nmax_memory_mib = \"a\"\n").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("max_memory_mib = \"a\" in [plugins.x]: ")
        );
        // An unknown key, or a bad entry of a list, is shown where it is in the file.
        for text in ["[bash]\ntmeout = 3\n", "[network]\nallow = [\"*\"]\n"] {
            let error = read(text).unwrap_err();
            assert!(matches!(error, ConfigError::Invalid { .. }), "{error}");
        }
    }
}
