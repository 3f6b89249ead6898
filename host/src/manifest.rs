//! Third-party plugins: the manifest a plugin ships, the consent the user gives in cordon's
//! config, and the grants and limits that come of the two.
//!
//! A plugin is `NAME.wasm` with `NAME.toml` beside it. The manifest declares what the plugin
//! needs; the host grants exactly that, and refuses to load a plugin that asks for more than
//! the user allowed: a directory outside the workspace, the shell, or a longer deadline or
//! more memory than the defaults all need the user's explicit consent in the config file.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::grants::Grants;
use crate::own::config_dir;
use crate::plugin::{Source, Spec};
use crate::runtime::Options;

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

/// cordon's own config file: the user's consent, per plugin.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[plugins.NAME]` tables.
    #[serde(default)]
    pub plugins: BTreeMap<String, Consent>,
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
    /// The longest deadline the manifest may ask for, in seconds (default 10).
    pub max_timeout_secs: Option<u64>,
    /// The most memory the manifest may ask for, in MiB (default 256).
    pub max_memory_mib: Option<u64>,
}

impl Config {
    /// Reads the config file at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| format!("{} is not a valid cordon config: {e}", path.display()))
    }
}

/// Bounds on each call of a plugin.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Wall-clock time a call may take.
    pub timeout: Duration,
    /// Linear memory an instance may use, in bytes.
    pub memory: usize,
}

/// What loading a third-party plugin grants it.
#[derive(Debug)]
pub struct Decision {
    pub grants: Grants,
    pub limits: Limits,
}

impl Manifest {
    /// Reads `NAME.toml` at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the manifest {}: {e}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| format!("the manifest {} is invalid: {e}", path.display()))
    }

    /// The grants and limits of plugin `name` in `workspace`, given the user's `consent`
    /// (found in `config_path`, named in messages); the error says what was refused and which
    /// setting would allow it.
    pub fn decide(
        &self,
        name: &str,
        workspace: &Path,
        consent: &Consent,
        shell: &crate::shell::Policy,
        config_path: &str,
    ) -> Result<Decision, String> {
        let setting = |key: &str, value: &str| {
            format!("add `{key} = {value}` under [plugins.{name}] in {config_path}")
        };
        let ranged =
            |setting: String, value: Option<u64>, range: &RangeInclusive<u64>, unit| match value {
                Some(v) if !range.contains(&v) => Err(format!(
                    "{setting} = {v} is out of range: it must be {} to {} {unit}",
                    range.start(),
                    range.end()
                )),
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
                    return Err(format!(
                        "it asks for {} outside the workspace; to allow it, {}",
                        dir.display(),
                        setting("allow_outside_workspace", "true")
                    ));
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
                return Err(format!(
                    "it asks for the shell capability; to allow it, {}",
                    setting("allow_shell", "true")
                ));
            }
            grants = grants.shell(Arc::new(shell.clone()));
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
            return Err(format!(
                "it asks for a {} s deadline, more than the {} s allowed; to allow it, {}",
                timeout.as_secs(),
                max_timeout.as_secs(),
                setting("max_timeout_secs", &timeout.as_secs().to_string())
            ));
        }
        let max_memory = consent.max_memory_mib.unwrap_or(DEFAULT_MEMORY_MIB);
        let memory = self
            .limits
            .memory_mib
            .unwrap_or(max_memory.min(DEFAULT_MEMORY_MIB));
        if memory > max_memory {
            return Err(format!(
                "it asks for {memory} MiB of memory, more than the {max_memory} MiB allowed; to allow it, {}",
                setting("max_memory_mib", &memory.to_string())
            ));
        }
        Ok(Decision {
            grants,
            limits: Limits {
                timeout,
                // In range, so it fits.
                memory: (memory << 20) as usize,
            },
        })
    }
}

/// A grant path: relative to the workspace or absolute, existing, canonical.
fn resolve(workspace: &Path, path: &Path) -> Result<PathBuf, String> {
    if path.components().next() == Some(Component::Normal("~".as_ref())) {
        return Err(format!(
            "grant path {} uses ~, which is not expanded; give an absolute path",
            path.display()
        ));
    }
    let joined = workspace.join(path);
    let dir = joined
        .canonicalize()
        .map_err(|e| format!("grant path {} cannot be used: {e}", joined.display()))?;
    if !dir.is_dir() {
        return Err(format!("grant path {} is not a directory", dir.display()));
    }
    Ok(dir)
}

/// The default plugin directory, `~/.config/cordon/plugins`, when it exists.
pub fn default_plugin_dir() -> Option<PathBuf> {
    config_dir()
        .map(|d| d.join("plugins"))
        .filter(|d| d.is_dir())
}

/// The default config file, `~/.config/cordon/config.toml`, when it exists.
pub fn default_config_file() -> Option<PathBuf> {
    config_dir()
        .map(|d| d.join("config.toml"))
        .filter(|f| f.is_file())
}

/// The manifest of the component file `component`: `NAME.toml` beside `NAME.wasm`.
pub fn manifest_path(component: &Path) -> PathBuf {
    component.with_extension("toml")
}

/// The plugins of directory `dir`: every `NAME.wasm` in it, in name order.
pub fn specs_in(dir: &Path, options: &Options, config: &Config) -> Result<Vec<Spec>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::Config(format!(
            "cannot read the plugin directory {}: {e}. Pass an existing directory with --plugins",
            dir.display()
        ))
    })?;
    let mut components: Vec<PathBuf> = entries
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "wasm") && path.is_file())
        .collect();
    components.sort();
    components
        .iter()
        .map(|path| spec(path, options, config))
        .collect()
}

/// The plugin whose component is the file `path`, with its manifest beside it: read, checked
/// against its pin, and granted what the manifest asks and the user allows.
pub fn spec(path: &Path, options: &Options, config: &Config) -> Result<Spec, Error> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let refuse = |reason: String| Error::Plugin {
        plugin: name.clone(),
        reason,
    };
    let manifest_path = manifest_path(path);
    if !manifest_path.is_file() {
        return Err(refuse(format!(
            "{} has no manifest: write {} beside it (see the README, \"Writing a plugin\")",
            path.display(),
            manifest_path.display()
        )));
    }
    let manifest = Manifest::read(&manifest_path).map_err(refuse)?;
    let bytes =
        std::fs::read(path).map_err(|e| refuse(format!("cannot read {}: {e}", path.display())))?;
    let digest: [u8; 32] = Sha256::digest(&bytes).into();
    if let Some(pin) = &manifest.sha256 {
        let actual = hex(&digest);
        if !pin.eq_ignore_ascii_case(&actual) {
            return Err(refuse(format!(
                "{} has SHA-256 {actual}, but its manifest pins {pin}; the component was changed \
                 or replaced. Reinstall the plugin, or update the pin if you trust the new file",
                path.display()
            )));
        }
    }
    let consent = config.plugins.get(&name).cloned().unwrap_or_default();
    let config_path = options
        .config
        .clone()
        .or_else(|| config_dir().map(|d| d.join("config.toml")))
        .map_or_else(
            || "cordon's config file (--config)".to_string(),
            |p| p.display().to_string(),
        );
    let decision = manifest
        .decide(
            &name,
            &options.workspace,
            &consent,
            &options.shell,
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
