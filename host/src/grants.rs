//! What a plugin may touch: its directories and its host capabilities.
//!
//! Deny by default: a plugin with empty grants sees no file, no network, no environment
//! variable and no host capability. Directories are mounted at their real absolute paths, so a
//! path means the same inside the plugin as outside.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::bindings::interface;
use crate::sandbox::Allowlist;
use crate::sandbox::protect::Guard;

/// One directory a plugin may use.
#[derive(Clone, Debug)]
pub struct DirGrant {
    /// The directory, absolute and canonical.
    pub path: PathBuf,
    /// Whether the plugin may create and change files there (else it may only read).
    pub writable: bool,
    /// Where the directory is opened, when not at `path` (a workspace's layer,
    /// [`crate::layer`]); the plugin still sees it at `path`.
    pub source: Option<PathBuf>,
}

impl DirGrant {
    /// Where the directory is opened.
    pub fn opened(&self) -> &Path {
        self.source.as_deref().unwrap_or(&self.path)
    }
}

/// Everything a plugin is granted.
#[derive(Clone, Debug)]
pub struct Grants {
    /// The directories the plugin may use.
    pub dirs: Vec<DirGrant>,
    /// The directory relative paths resolve against (`context.cwd` in the WIT).
    pub cwd: PathBuf,
    /// The shell capability: the shell its commands run in, confined by its policy; none: not
    /// granted.
    pub shell: Option<Arc<crate::sandbox::Shell>>,
    /// The hosts it may send HTTP requests to, and the headers the host adds; none: no HTTP.
    pub http: Option<Arc<HttpGrant>>,
    /// Environment variables the plugin sees (none by default).
    pub env: Vec<(String, String)>,
    /// cordon's own files and directories (resolved, see [`crate::own`]): never written by the
    /// `files` capability, even inside a read-write directory.
    pub own: Arc<[PathBuf]>,
    /// The workspace's protected paths ([`crate::sandbox::protect`]), refused by the `files`
    /// capability as the shell's view makes them read-only; none: nothing protected.
    pub guard: Option<Arc<Guard>>,
}

impl Grants {
    /// No directories and no capabilities; relative paths resolve against `cwd`.
    pub fn none(cwd: &Path) -> Self {
        Grants {
            dirs: Vec::new(),
            cwd: cwd.to_path_buf(),
            shell: None,
            http: None,
            env: Vec::new(),
            own: Arc::new([]),
            guard: None,
        }
    }

    /// Adds a read-only directory.
    pub fn read(mut self, path: &Path) -> Self {
        self.dirs.push(DirGrant {
            path: path.to_path_buf(),
            writable: false,
            source: None,
        });
        self
    }

    /// Adds a read-write directory (and with it the atomic file replacement capability).
    pub fn read_write(mut self, path: &Path) -> Self {
        self.dirs.push(DirGrant {
            path: path.to_path_buf(),
            writable: true,
            source: None,
        });
        self
    }

    /// Grants the shell capability: commands run in `shell`.
    pub fn shell(mut self, shell: Arc<crate::sandbox::Shell>) -> Self {
        self.shell = Some(shell);
        self
    }

    /// Whether the `files` capability is granted: it comes with any read-write directory.
    pub fn files(&self) -> bool {
        self.dirs.iter().any(|d| d.writable)
    }

    /// The WIT interfaces of host capabilities this grant allows a component to import.
    pub fn interfaces(&self) -> Vec<&'static str> {
        let mut granted = Vec::new();
        if self.files() {
            granted.push(interface::FILES);
        }
        if self.shell.is_some() {
            granted.push(interface::SHELL);
        }
        if self.http.is_some() {
            granted.push(interface::HTTP);
        }
        granted
    }
}

/// What a plugin may reach over HTTP, and the headers the host adds for it.
#[derive(Clone, Debug, Default)]
pub struct HttpGrant {
    /// The hosts and ports (the manifest's `http`), with the user's `--add-host` names.
    pub allowlist: Allowlist,
    /// Headers added to requests for one host: (host name, header name, value template).
    pub headers: Vec<SecretHeader>,
}

/// A header the host adds to each request for `host`; `${NAME}` in its value is the value of
/// cordon's environment variable `NAME` at the time of the request.
#[derive(Clone, Debug)]
pub struct SecretHeader {
    pub host: String,
    pub name: http::HeaderName,
    pub template: String,
}

impl SecretHeader {
    /// The variables its value names.
    pub fn variables(template: &str) -> Vec<String> {
        let mut names = Vec::new();
        let mut rest = template;
        while let Some(start) = rest.find("${") {
            let Some(end) = rest[start..].find('}') else {
                break;
            };
            names.push(rest[start + 2..start + end].to_string());
            rest = &rest[start + end + 1..];
        }
        names
    }

    /// Its value now, or the variable that is not set.
    pub(crate) fn value(&self) -> Result<http::HeaderValue, String> {
        let mut value = self.template.clone();
        for name in Self::variables(&self.template) {
            let secret = std::env::var(&name)
                .map_err(|_| format!("the secret {name} of the {} header is not set", self.name))?;
            value = value.replace(&format!("${{{name}}}"), &secret);
        }
        http::HeaderValue::from_str(&value).map_err(|_| {
            format!(
                "the {} header's value is not a valid header value",
                self.name
            )
        })
    }
}

/// Handles on a plugin's read-write directories, opened once when the plugin is loaded, and
/// the workspace's protection.
#[derive(Default)]
pub struct Roots {
    roots: Vec<Root>,
    pub(crate) guard: Option<Arc<Guard>>,
}

/// One read-write directory.
pub(crate) struct Root {
    path: PathBuf,
    pub(crate) dir: Dir,
    /// cordon's own paths inside it, relative to it. Resolution never leaves the directory,
    /// so no other of them can be reached through it.
    own: Vec<PathBuf>,
    /// Whether a file written here takes its directory's owner: in a workspace's layer when
    /// cordon runs as root, whose commands run as the sandbox user and see the layer's files
    /// as they are (an overlay mount cannot be id-mapped), so that they can change what the
    /// file tools wrote.
    pub(crate) owned_by_dir: bool,
}

impl Roots {
    /// Opens every read-write directory of `grants`.
    pub fn open(grants: &Grants) -> io::Result<Self> {
        let mut roots = Vec::new();
        for dir in grants.dirs.iter().filter(|d| d.writable) {
            roots.push(Root {
                path: dir.path.clone(),
                dir: Dir::open_ambient_dir(dir.opened(), ambient_authority())?,
                // SAFETY: no arguments.
                owned_by_dir: dir.source.is_some() && unsafe { libc::geteuid() } == 0,
                own: grants
                    .own
                    .iter()
                    .filter_map(|p| Some(p.strip_prefix(&dir.path).ok()?.to_path_buf()))
                    .collect(),
            });
        }
        Ok(Roots {
            roots,
            guard: grants.guard.clone(),
        })
    }

    /// The grant `path` lies in (the deepest one) and the path relative to it.
    pub(crate) fn locate<'a>(&'a self, path: &Path) -> Option<(&'a Root, PathBuf)> {
        self.roots
            .iter()
            .filter_map(|root| Some((root, path.strip_prefix(&root.path).ok()?.to_path_buf())))
            .max_by_key(|(_, rel)| std::cmp::Reverse(rel.components().count()))
    }
}

impl Root {
    /// `target` (relative, its last component no link) as an absolute path with its parent
    /// resolved.
    pub(crate) fn resolve(&self, target: &Path) -> io::Result<PathBuf> {
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => self.dir.canonicalize(p)?,
            _ => PathBuf::new(),
        };
        Ok(self
            .path
            .join(parent)
            .join(target.file_name().unwrap_or_default()))
    }

    /// Whether `resolved` (from [`Root::resolve`]) is one of cordon's own paths.
    pub(crate) fn is_own(&self, resolved: &Path) -> bool {
        let rel = resolved.strip_prefix(&self.path).unwrap_or(resolved);
        self.own.iter().any(|p| rel.starts_with(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_templates_name_their_variables() {
        assert_eq!(
            SecretHeader::variables("Bearer ${GITHUB_TOKEN} and ${X}"),
            vec!["GITHUB_TOKEN".to_string(), "X".to_string()]
        );
        assert!(SecretHeader::variables("plain").is_empty());
    }
}
