//! cordon's own files, which no tool may write.
//!
//! What cordon reads at start-up decides what it runs and what it grants: the compile cache
//! (machine code it loads), the config file (the user's consent for plugins), the plugin
//! directories and the key that authenticates the cache. A command that could change one of
//! them would escape every grant at the next start. Landlock can only grant access, never mask
//! a path below a grant, so [`check`] refuses to start when any of these paths lies inside a
//! directory a tool may write, contains one, or (for files) has another name, a hard link, that
//! might lie in one. The cache key must also be out of every tool's sight: whoever reads it can
//! forge cached code that a cordon process with other grants (which could write its cache)
//! would load. Paths are compared resolved through symbolic links, so a link does not hide one
//! from the other.

use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::config::config_dir;
use crate::manifest;
use crate::resolve::Resolved;
use crate::sandbox::Setting;
use crate::spec::{Source, Spec};

/// Which of cordon's files a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `$XDG_CONFIG_HOME/cordon`: the default config file and plugin directory, the cache key.
    ConfigDir,
    /// The config file in use.
    ConfigFile,
    /// The key that authenticates the compile cache.
    CacheKey,
    /// The compile cache.
    CacheDir,
    /// A directory of third-party plugins.
    PluginDir,
    /// A plugin's component or manifest.
    PluginFile,
    /// The layers (`<data dir>/layers`, and a layer named by a path): their stack files name
    /// the directories cordon mounts, their workspace files where an accept writes.
    Layers,
}

impl Role {
    fn what(self) -> &'static str {
        match self {
            Role::ConfigDir => "config directory",
            Role::ConfigFile => "config file",
            Role::CacheKey => "cache key",
            Role::CacheDir => "cache directory",
            Role::PluginDir => "plugin directory",
            Role::PluginFile => "plugin file",
            Role::Layers => "layer directory",
        }
    }

    /// How the user puts a path of this role elsewhere.
    fn way_out(self) -> String {
        match self {
            Role::ConfigDir | Role::CacheKey => "XDG_CONFIG_HOME".into(),
            Role::ConfigFile => Setting::ConfigFile(Some("FILE".into())).to_string(),
            Role::CacheDir => format!(
                "{} or CORDON_CACHE_DIR",
                Setting::CacheDir(Some("DIR".into()))
            ),
            Role::PluginDir | Role::PluginFile => Setting::Plugins(Some("DIR".into())).to_string(),
            Role::Layers => "XDG_DATA_HOME".into(),
        }
    }

    /// Whether a file of this role must have a single name.
    fn single_link(self) -> bool {
        matches!(self, Role::ConfigFile | Role::CacheKey | Role::PluginFile)
    }
}

/// One of cordon's paths, as given and resolved.
#[derive(Clone, Debug)]
pub struct Own {
    /// What it is.
    pub role: Role,
    /// The path as configured.
    pub given: PathBuf,
    /// The path resolved through links ([`resolve`]).
    pub resolved: PathBuf,
}

/// Who may use a directory, and how.
#[derive(Clone, Debug)]
enum Holder {
    Workspace,
    BashWrite,
    BashHome,
    BashRead,
    System,
    Skills,
    PluginWrite(String),
    PluginRead(String),
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Holder::Workspace => f.write_str("bash and the edit tools may write (the workspace)"),
            Holder::BashWrite => write!(f, "bash may write ({})", Setting::BashWrite),
            Holder::BashHome => write!(f, "bash may write (its home, {})", Setting::BashHome(None)),
            Holder::BashRead => write!(f, "bash may read ({})", Setting::BashRead),
            Holder::System => f.write_str("bash may read (a system directory)"),
            Holder::Skills => write!(f, "read_skill may read ({})", Setting::Skills),
            Holder::PluginWrite(name) => {
                write!(f, "plugin {name} may write (a write grant of its manifest)")
            }
            Holder::PluginRead(name) => {
                write!(f, "plugin {name} may read (a read grant of its manifest)")
            }
        }
    }
}

/// A directory (or file) some tool may use, resolved.
#[derive(Clone, Debug)]
struct Grant {
    holder: Holder,
    path: PathBuf,
}

/// The tail of every refusal: where each of cordon's paths comes from.
fn move_hint() -> String {
    format!(
        "cordon's cache: {}, CORDON_CACHE_DIR or XDG_CACHE_HOME; config directory and cache key: \
         XDG_CONFIG_HOME; config file: {}; plugins: {}; layers: XDG_DATA_HOME, or a layer \
         named by a path",
        Setting::CacheDir(Some("DIR".into())),
        Setting::ConfigFile(Some("FILE".into())),
        Setting::Plugins(Some("DIR".into()))
    )
}

/// Why cordon refuses to start with its own files where a tool could write them.
#[derive(Debug, thiserror::Error)]
pub enum Exposure {
    #[error(
        "cordon's {what} {shown} {relation} {grant}, which {writer}: a command could change \
         what cordon loads at its next start. Move it out with {}, or narrow the grant ({})",
        role.way_out(),
        move_hint()
    )]
    Inside {
        what: &'static str,
        shown: String,
        /// "lies inside", or "is" when the two are the same.
        relation: &'static str,
        grant: PathBuf,
        writer: String,
        /// What it is, which says how to move it.
        role: Role,
    },
    #[error(
        "{grant}, which {writer}, lies inside cordon's {what} {shown}: a command could change \
         what cordon loads at its next start. Narrow the grant, or move the {what} with {} \
         ({})",
        role.way_out(),
        move_hint()
    )]
    Contains {
        what: &'static str,
        shown: String,
        grant: PathBuf,
        writer: String,
        /// What it is, which says how to move it.
        role: Role,
    },
    #[error(
        "cordon's cache key {shown} lies inside {grant}, which {reader}: a command could read it \
         and forge the compiled code cordon loads from its cache. Move it out with \
         XDG_CONFIG_HOME, or narrow the grant ({})",
        move_hint()
    )]
    Readable {
        shown: String,
        grant: PathBuf,
        reader: String,
    },
    #[error(
        "cordon's {what} {shown} has {links} hard links: another of its names may lie where a \
         command can write it. Give it a single name (copy it, then move the copy over it)"
    )]
    Linked {
        what: &'static str,
        shown: String,
        links: u64,
    },
}

/// cordon's own paths under `options`, with the files of the third-party plugins in `specs`.
/// The config directory is listed even when it does not exist: a command could create it.
pub fn paths(resolved: &Resolved, specs: &[Spec]) -> Vec<Own> {
    let mut paths: Vec<(Role, PathBuf)> = Vec::new();
    paths.extend(config_dir().map(|d| (Role::ConfigDir, d)));
    paths.extend(resolved.config.clone().map(|f| (Role::ConfigFile, f)));
    paths.extend(resolved.cache_key.clone().map(|f| (Role::CacheKey, f)));
    paths.extend(resolved.cache_dir.clone().map(|d| (Role::CacheDir, d)));
    paths.extend(crate::layer::layers_dir().map(|d| (Role::Layers, d)));
    paths.extend(resolved.layer.clone().map(|d| (Role::Layers, d)));
    paths.extend(
        resolved
            .plugin_dirs
            .iter()
            .map(|d| (Role::PluginDir, d.clone())),
    );
    for spec in specs {
        if let Source::File(component) = &spec.source {
            paths.push((Role::PluginFile, component.clone()));
            paths.push((Role::PluginFile, manifest::manifest_path(component)));
        }
    }
    paths
        .into_iter()
        .map(|(role, given)| Own {
            role,
            resolved: resolve(&given),
            given,
        })
        .collect()
}

/// Refuses cordon's own paths (`own`, from [`paths`]) where a tool of `specs` under `options`
/// could write them, and the cache key where one could read it.
pub fn check(own: &[Own], resolved: &Resolved, specs: &[Spec]) -> Result<(), Exposure> {
    let (writable, readable) = grants(resolved, specs);
    for path in own {
        let shown = || {
            if path.given == path.resolved {
                path.given.display().to_string()
            } else {
                format!(
                    "{} ({} through a link)",
                    path.given.display(),
                    path.resolved.display()
                )
            }
        };
        for grant in &writable {
            let (what, grant_path, writer, role) = (
                path.role.what(),
                grant.path.clone(),
                grant.holder.to_string(),
                path.role,
            );
            if path.resolved.starts_with(&grant.path) {
                return Err(Exposure::Inside {
                    what,
                    shown: shown(),
                    relation: if path.resolved == grant.path {
                        "is"
                    } else {
                        "lies inside"
                    },
                    grant: grant_path,
                    writer,
                    role,
                });
            }
            if grant.path.starts_with(&path.resolved) {
                return Err(Exposure::Contains {
                    what,
                    shown: shown(),
                    grant: grant_path,
                    writer,
                    role,
                });
            }
        }
        if path.role == Role::CacheKey
            && let Some(grant) = readable.iter().find(|g| path.resolved.starts_with(&g.path))
        {
            return Err(Exposure::Readable {
                shown: shown(),
                grant: grant.path.clone(),
                reader: grant.holder.to_string(),
            });
        }
        if path.role.single_link()
            && let Ok(meta) = std::fs::metadata(&path.resolved)
            && meta.nlink() > 1
        {
            return Err(Exposure::Linked {
                what: path.role.what(),
                shown: shown(),
                links: meta.nlink(),
            });
        }
    }
    Ok(())
}

/// Every directory a tool may write (the workspace, `--bash-write` paths, the home of bash
/// commands, the write grants of third-party plugins), and every other one a tool may read (`--bash-read` paths, the system
/// directories bash reads, the skills directory, the read grants of third-party plugins).
fn grants(resolved: &Resolved, specs: &[Spec]) -> (Vec<Grant>, Vec<Grant>) {
    let grant = |holder: Holder, path: &Path| Grant {
        holder,
        path: resolve(path),
    };
    let mut writable = vec![grant(Holder::Workspace, &resolved.workspace)];
    let mut readable: Vec<Grant> = crate::sandbox::READ_ROOTS
        .iter()
        .map(|root| grant(Holder::System, Path::new(root)))
        .collect();
    let shell = &resolved.shell;
    writable.extend(
        shell
            .extra_write
            .iter()
            .map(|p| grant(Holder::BashWrite, p)),
    );
    writable.extend(shell.home.iter().map(|p| grant(Holder::BashHome, p)));
    readable.extend(shell.extra_read.iter().map(|p| grant(Holder::BashRead, p)));
    readable.extend(resolved.skills.iter().map(|p| grant(Holder::Skills, p)));
    for spec in specs {
        if let Source::File(_) = spec.source {
            for dir in &spec.grants.dirs {
                let name = spec.name.clone();
                if dir.writable {
                    writable.push(grant(Holder::PluginWrite(name), &dir.path));
                } else {
                    readable.push(grant(Holder::PluginRead(name), &dir.path));
                }
            }
        }
    }
    (writable, readable)
}

/// `path` made absolute and resolved through symbolic links: its longest existing ancestor
/// canonicalized, the rest appended (`..` in the rest taken lexically: what does not exist yet
/// is no link).
pub fn resolve(path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let parts: Vec<Component> = path.components().collect();
    for keep in (1..=parts.len()).rev() {
        let head: PathBuf = parts[..keep].iter().collect();
        if let Ok(mut resolved) = head.canonicalize() {
            for part in &parts[keep..] {
                match part {
                    Component::ParentDir => {
                        resolved.pop();
                    }
                    Component::Normal(name) => resolved.push(name),
                    _ => {}
                }
            }
            return resolved;
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_follows_links_and_keeps_what_does_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(resolve(&root.join("link")), root.join("real"));
        assert_eq!(
            resolve(&root.join("link/not/yet")),
            root.join("real/not/yet")
        );
        assert_eq!(resolve(&root.join("link/a/../b")), root.join("real/b"));
    }
}
