//! The settings a text names when it tells the user what to change ([`Setting`]), and how
//! they are worded ([`Wording`]).
//!
//! A text that says "allow it with …" names a [`Setting`], never a flag: the library does not
//! know how its embedder takes settings. By default a setting is worded as cordon's config
//! file and `cordon::Settings` call it (`[network] allow = ["evil.com"]`); a program with a
//! command line of its own installs its wording once ([`install`]), before
//! [`crate::run_helper_if_asked`], so that the sandbox helper, the same program, words the
//! texts made there alike.

use std::fmt;
use std::sync::OnceLock;

use super::OptionalLayer;

/// A setting of the runtime or its sandbox, with the value a text suggests for it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setting {
    /// Allow a host pattern (`[network] allow`).
    AllowDomain(String),
    /// Allow the hosts of a named set (`[network] allow`, `@NAME`).
    AllowDomainSet(String),
    /// The allowlist of hosts itself (`[network] allow`).
    Allowlist,
    /// The host's whole network for commands (`[network] open`).
    BashNetwork,
    /// Relax a protected path (`[bash] unprotect`).
    Unprotect(String),
    /// Let commands run without an optional layer (`[bash] allow_missing`).
    AllowMissing(OptionalLayer),
    /// Commands without the kernel confinement (`[bash] unconfined`).
    Unconfined,
    /// The user's toolchains for commands (`[bash] toolchains`).
    Toolchains,
    /// The longest timeout a command may ask for (`[bash] max_timeout`).
    MaxTimeout,
    /// More paths commands may read (`[bash] read`).
    BashRead,
    /// More paths commands may write (`[bash] write`).
    BashWrite,
    /// Directories put before commands' `PATH` (`[bash] path`).
    BashPath,
    /// The home of commands (`[bash] home`), with the value suggested, if any.
    BashHome(Option<String>),
    /// The skills directory (`[tools] skills`).
    Skills,
    /// A directory of plugins (`[tools] plugin_dirs`), with the value suggested, if any.
    Plugins(Option<String>),
    /// Where compiled plugins are cached (`[tools] cache_dir`), likewise.
    CacheDir(Option<String>),
    /// The workspace, which is no key of the config file (`cordon::Options::workspace`).
    Workspace,
    /// cordon's config file itself (`cordon::Options::config`), likewise.
    ConfigFile(Option<String>),
}

/// How a program words a [`Setting`] in its texts: its flag, its config key.
pub type Wording = fn(&Setting) -> String;

static WORDING: OnceLock<Wording> = OnceLock::new();

/// Makes `wording` the wording of every text of this process from now on. Call it once, first
/// thing in `main` (before [`crate::run_helper_if_asked`]); false if a wording was installed
/// already, which stays.
pub fn install(wording: Wording) -> bool {
    WORDING.set(wording).is_ok()
}

/// The default wording: the setting as the config file spells it, `[table] key = value`.
pub fn config_key(setting: &Setting) -> String {
    match setting {
        Setting::AllowDomain(host) => format!("[network] allow = [{host:?}]"),
        Setting::AllowDomainSet(set) => format!("[network] allow = [\"@{set}\"]"),
        Setting::Allowlist => "[network] allow".into(),
        Setting::BashNetwork => "[network] open = true".into(),
        Setting::Unprotect(path) => format!("[bash] unprotect = [{path:?}]"),
        Setting::AllowMissing(layer) => format!("[bash] allow_missing = [\"{layer}\"]"),
        Setting::Unconfined => "[bash] unconfined = true".into(),
        Setting::Toolchains => "[bash] toolchains = true".into(),
        Setting::MaxTimeout => "[bash] max_timeout".into(),
        Setting::BashRead => "[bash] read".into(),
        Setting::BashWrite => "[bash] write".into(),
        Setting::BashPath => "[bash] path".into(),
        Setting::BashHome(value) => keyed("[bash] home", value),
        Setting::Skills => "[tools] skills".into(),
        Setting::Plugins(None) => "[tools] plugin_dirs".into(),
        Setting::Plugins(Some(dir)) => format!("[tools] plugin_dirs = [{dir:?}]"),
        Setting::CacheDir(value) => keyed("[tools] cache_dir", value),
        Setting::Workspace => "cordon::Options::workspace".into(),
        Setting::ConfigFile(value) => keyed("cordon::Options::config", value),
    }
}

/// `key`, or `key = "value"` when a value is suggested.
fn keyed(key: &str, value: &Option<String>) -> String {
    match value {
        Some(value) => format!("{key} = {value:?}"),
        None => key.to_string(),
    }
}

impl Setting {
    /// The setting as installed, then its config key when that differs (`--allow-domain,
    /// [network] allow`): for a text about the config file and the command line alike.
    pub fn and_key(&self) -> String {
        let (worded, key) = (self.to_string(), config_key(self));
        match worded == key {
            true => key,
            false => format!("{worded}, {key}"),
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wording = WORDING.get().copied().unwrap_or(config_key);
        f.write_str(&wording(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library names what an embedder can set: the config file's keys, never a flag.
    #[test]
    fn the_default_wording_names_the_config_key() {
        assert_eq!(
            config_key(&Setting::AllowDomain("evil.com".into())),
            "[network] allow = [\"evil.com\"]"
        );
        assert_eq!(
            config_key(&Setting::AllowDomainSet("pypi".into())),
            "[network] allow = [\"@pypi\"]"
        );
        assert_eq!(
            config_key(&Setting::AllowMissing(OptionalLayer::Landlock)),
            "[bash] allow_missing = [\"landlock\"]"
        );
        assert_eq!(
            config_key(&Setting::Unprotect(".idea".into())),
            "[bash] unprotect = [\".idea\"]"
        );
        assert_eq!(config_key(&Setting::Unconfined), "[bash] unconfined = true");
        assert_eq!(
            config_key(&Setting::BashHome(Some("private".into()))),
            "[bash] home = \"private\""
        );
        assert_eq!(config_key(&Setting::BashHome(None)), "[bash] home");
        assert_eq!(
            config_key(&Setting::Workspace),
            "cordon::Options::workspace"
        );
    }
}
