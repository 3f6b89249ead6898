//! The resolution of bash's settings beyond the sandbox's defaults (the `[bash]` table of
//! cordon's config file under the command line's): the toolchains, the variables passed
//! through, the user's secrets kept hidden, and the home directory that keeps the commands'
//! caches between calls.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::config;
use crate::sandbox::{Policy, RESERVED, Setting};
use crate::settings::{Home, Layers, Variable};
use crate::toolchains::{self, Toolchain};

/// Why the bash settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(
        "cannot use {} as the home of bash commands: {source}. Pass an existing directory, or \
         `private`, with {}", path.display(), Setting::BashHome(None)
    )]
    Home {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no home for bash commands: cordon's data directory is unknown (neither XDG_DATA_HOME \
         nor HOME is set); pass {} or a directory",
        Setting::BashHome(Some("private".into()))
    )]
    NoDataDir,
}

/// What of the user's home stays hidden from bash commands whatever the grants (an extra
/// path of `~`, a workspace that is the home), unless a path is named exactly in `--bash-read`
/// or `--bash-write`: keys, cloud and cluster credentials, browser profiles, keyrings.
pub const HOME_SECRETS: [&str; 17] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
];

/// Parts of a variable's name that mark it a secret: such a variable passes only when named
/// exactly, never through a pattern.
pub const SECRET_WORDS: [&str; 5] = ["TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL"];

/// The variables `specs` (from `--bash-env`) give commands, read from `environment` (cordon's
/// own): `NAME=VALUE` sets one; `NAME` passes one through when it is set; `PREFIX*` passes
/// every variable that starts with `PREFIX`, except those whose names look like secrets
/// ([`SECRET_WORDS`]).
pub fn variables<'a>(
    specs: impl IntoIterator<Item = &'a Variable>,
    environment: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: &str| {
        out.retain(|(k, _)| k != name);
        out.push((name.to_string(), value.to_string()));
    };
    for spec in specs {
        match spec {
            Variable::Set(name, value) => set(name, value),
            Variable::Pass(name) => {
                if let Some((_, value)) = environment.iter().find(|(k, _)| k == name) {
                    set(name, value);
                }
            }
            Variable::Prefix(stem) => {
                for (k, v) in environment {
                    let reserved = RESERVED.contains(&k.as_str());
                    if k.starts_with(stem.as_str()) && !reserved && !looks_secret(k) {
                        set(k, v);
                    }
                }
            }
        }
    }
    out
}

/// Whether a variable's name looks like that of a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// The home directory of the commands of `workspace` (canonical) under [`Home::Workspace`]:
/// `<data dir>/homes/<name>-<hash of its path>`, whether or not it exists.
pub fn workspace_home(workspace: &Path) -> Option<PathBuf> {
    let hash = blake3::hash(workspace.as_os_str().as_encoded_bytes()).to_hex();
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(
        config::data_dir()?
            .join("homes")
            .join(format!("{name}-{}", &hash[..16])),
    )
}

/// The user's git identity (`user.name`, `user.email` in `~/.gitconfig` or git's XDG config
/// file), as the variables that make commits inside the sandbox carry it; nothing else of
/// that config (no credential helper, no alias) reaches commands. Read without running git:
/// `include` directives are not followed.
pub fn git_identity() -> Vec<(String, String)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let files = [
        xdg.map(|d| d.join("git/config")),
        home.map(|h| h.join(".gitconfig")),
    ];
    let (mut name, mut email) = (None, None);
    for text in files
        .iter()
        .flatten()
        .filter_map(|f| std::fs::read_to_string(f).ok())
    {
        let mut in_user = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_user = line.trim_end_matches(']').trim_start_matches('[').trim() == "user";
            } else if let (true, Some((key, value))) = (in_user, line.split_once('=')) {
                let value = value.trim().trim_matches('"').to_string();
                match key.trim().to_ascii_lowercase().as_str() {
                    "name" => name = Some(value),
                    "email" => email = Some(value),
                    _ => {}
                }
            }
        }
    }
    [("NAME", name), ("EMAIL", email)]
        .into_iter()
        .filter_map(|(who, value)| Some((who, value.filter(|v| !v.is_empty())?)))
        .flat_map(|(who, value)| {
            ["AUTHOR", "COMMITTER"].map(|role| (format!("GIT_{role}_{who}"), value.clone()))
        })
        .collect()
}

/// Resolves the bash settings of `s` into `policy` (whose workspace is canonical): the
/// toolchains found (when asked for), the extra paths, `PATH`, the variables (the user's git
/// identity first, then the toolchains', so `--bash-env` can replace them), the user's secrets
/// hidden, and the home, created when it is the workspace's and missing. Returns the
/// toolchains granted.
pub fn resolve(s: &Layers, policy: &mut Policy) -> Result<Vec<Toolchain>, SettingsError> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let found = match &home {
        Some(home) => toolchains::detect(home, |name| std::env::var(name).ok()),
        None => Vec::new(),
    };
    let toolchains = match s.last(|s| &s.bash.toolchains) == Some(&true) {
        true => found,
        false => {
            policy.ungranted = found.iter().flat_map(|t| t.path.iter().cloned()).collect();
            Vec::new()
        }
    };
    let mut env = git_identity();
    for toolchain in &toolchains {
        policy.extra_read.extend(toolchain.read.iter().cloned());
        // A cache the tool has not made yet is made now: a grant needs a directory.
        let made = |dir: &&PathBuf| std::fs::create_dir_all(dir).is_ok();
        policy
            .extra_write
            .extend(toolchain.write.iter().filter(made).cloned());
        policy.path.extend(toolchain.path.iter().cloned());
        env.extend(toolchain.env.iter().cloned());
    }
    let (read, write): (Vec<&PathBuf>, Vec<&PathBuf>) = (
        s.all(|s| &s.bash.read).collect(),
        s.all(|s| &s.bash.write).collect(),
    );
    policy.extra_read.extend(read.iter().copied().cloned());
    policy.extra_read.extend(s.all(|s| &s.bash.path).cloned());
    policy.extra_write.extend(write.iter().copied().cloned());
    policy.path.extend(s.all(|s| &s.bash.path).cloned());
    let named = |p: &PathBuf| read.contains(&p) || write.contains(&p);
    policy.hidden = home
        .iter()
        .flat_map(|home| HOME_SECRETS.iter().map(|s| home.join(s)))
        .filter(|p| !named(p))
        .collect();
    let environment: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    for (name, value) in variables(s.all(|s| &s.bash.env), &environment) {
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    policy.env = env;
    match s.last(|s| &s.bash.home) {
        Some(home) => set_home(policy, home)?,
        // The default: a home that cannot be made (no writable data directory) must not stop
        // every tool, so commands get a private one, and the log says why.
        None => set_home(policy, &Home::Workspace).or_else(|e| {
            tracing::warn!("{e}; bash commands get an empty home at every call instead");
            set_home(policy, &Home::Private)
        })?,
    }
    Ok(toolchains)
}

/// Applies the home choice to `policy` (whose workspace is canonical), creating the
/// workspace's home when it is missing.
fn set_home(policy: &mut Policy, home: &Home) -> Result<(), SettingsError> {
    policy.home = match home {
        Home::Private => None,
        Home::Dir(dir) => Some(
            dir.canonicalize()
                .and_then(|d| match d.is_dir() {
                    true => Ok(d),
                    false => Err(std::io::Error::from(std::io::ErrorKind::NotADirectory)),
                })
                .map_err(|source| SettingsError::Home {
                    path: dir.clone(),
                    source,
                })?,
        ),
        Home::Workspace => {
            let dir = workspace_home(&policy.workspace).ok_or(SettingsError::NoDataDir)?;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|source| SettingsError::Home {
                    path: dir.clone(),
                    source,
                })?;
            Some(dir)
        }
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The library tells an embedder the setting as its config file and `Settings` call it;
    /// only the cordon binary, which installs its flags, names `--bash-home`.
    #[test]
    fn an_embedder_is_told_the_setting_not_the_flag() {
        assert_eq!(
            SettingsError::NoDataDir.to_string(),
            "no home for bash commands: cordon's data directory is unknown (neither \
             XDG_DATA_HOME nor HOME is set); pass [bash] home = \"private\" or a directory"
        );
        let network = crate::resolve::network::NetworkError::Unconfined.to_string();
        assert!(
            network.starts_with(
                "an allowlist of hosts ([network] allow) cannot be enforced with [bash] \
                 unconfined = true,"
            ),
            "{network}"
        );
    }

    #[test]
    fn secrets_pass_only_when_named_exactly() {
        let host = env(&[
            ("GITHUB_TOKEN", "t"),
            ("GITHUB_USER", "u"),
            ("NPM_CONFIG_REGISTRY", "r"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
        ]);
        let specs =
            |s: &[&str]| -> Vec<Variable> { s.iter().map(|x| x.parse().unwrap()).collect() };
        assert_eq!(
            variables(&specs(&["GITHUB_*", "*"]), &host),
            env(&[("GITHUB_USER", "u"), ("NPM_CONFIG_REGISTRY", "r")])
        );
        assert_eq!(
            variables(&specs(&["GITHUB_TOKEN", "MISSING", "A=1"]), &host),
            env(&[("GITHUB_TOKEN", "t"), ("A", "1")])
        );
    }

    #[test]
    fn each_workspace_has_a_home_of_its_own() {
        let a = workspace_home(Path::new("/src/a")).unwrap();
        let b = workspace_home(Path::new("/other/a")).unwrap();
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with("a-"));
    }
}
