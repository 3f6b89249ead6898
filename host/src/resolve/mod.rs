//! [`Options`] resolved once, in one step, into what the runtime takes ([`Resolved`]): the
//! workspace and skills directory canonical, cordon's config file read and its settings joined
//! under the given ones ([`Layers`]), each knob's default applied, the toolchains found, the
//! home made, the user's secrets hidden, the git identity read and the network settled into
//! the sandbox's complete [`Policy`].
//!
//! Nothing after this looks at the environment or the config file for a setting again: the
//! runtime, the built-in tools, the plugins' grants and `cordon doctor` read the result.
//! The bash tool's settings ([`bash`]) and the network ([`network`]) are resolved in modules
//! of their own.

pub mod bash;
pub mod network;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::config::{self, Config, Consent};
use crate::options::{DEFAULT_MAX_OUTPUT, Options};
use crate::sandbox::{self, Policy};
use crate::settings::{Layers, Mib, Processes, Secs};
use crate::toolchains::Toolchain;
use crate::{Error, layer};

/// Everything a runtime needs, looked up once.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The directory the tools work in, canonical.
    pub workspace: PathBuf,
    /// The most characters of output the model sees from one call.
    pub max_output: usize,
    /// Whether `read_file`, `write_file` and `edit_file` are declared.
    pub edit_tools: bool,
    /// The skills directory for `read_skill`, canonical.
    pub skills: Option<PathBuf>,
    /// Directories of third-party plugins.
    pub plugin_dirs: Vec<PathBuf>,
    /// Where compiled components are cached; none: compile at every start.
    pub cache_dir: Option<PathBuf>,
    /// The key file that authenticates the cached components; none: no cache.
    pub cache_key: Option<PathBuf>,
    /// The directory of the layer the workspace is seen through ([`crate::layer::dir`]);
    /// none: the workspace itself. The runtime starts its keeper ([`crate::layer::start`]).
    pub layer: Option<PathBuf>,
    /// cordon's config file, if one was read.
    pub config: Option<PathBuf>,
    /// What the user allows each third-party plugin, by name (`[plugins.NAME]`).
    pub consents: BTreeMap<String, Consent>,
    /// How bash commands run, complete: the limits, paths, variables, home, hidden paths and
    /// network.
    pub shell: Policy,
    /// The user's toolchains granted to bash commands.
    pub toolchains: Vec<Toolchain>,
    /// The addresses the user gave for names (`--add-host`), which plugins' requests use too.
    pub hosts: Vec<(String, IpAddr)>,
    /// Whether an outcome carries the whole old and new text of the change it made.
    pub diffs: bool,
}

impl Options {
    /// The protected paths these options relax (the given ones, then the config file's
    /// `[bash] unprotect`), without resolving the rest: for what acts on a layer, whose
    /// workspace is the layer's.
    pub fn unprotect(&self) -> Result<Vec<PathBuf>, Error> {
        let file = self.config_file()?;
        let s = Layers {
            file: &file.settings,
            given: &self.settings,
        };
        Ok(s.all(|s| &s.bash.unprotect).cloned().collect())
    }

    /// The config file these options name, read; an empty one when they name none.
    fn config_file(&self) -> Result<Config, Error> {
        Ok(match &self.config {
            Some(path) => Config::read(path)?,
            None => Config::default(),
        })
    }

    /// Resolves these options: see the [module](self).
    pub fn resolve(self) -> Result<Resolved, Error> {
        let workspace = canonical_dir(&self.workspace).map_err(|source| Error::Workspace {
            path: self.workspace.clone(),
            source,
        })?;
        let file = self.config_file()?;
        let s = Layers {
            file: &file.settings,
            given: &self.settings,
        };
        let skills = match s.last(|s| &s.tools.skills) {
            Some(dir) => Some(canonical_dir(dir).map_err(|source| Error::Skills {
                path: dir.clone(),
                source,
            })?),
            None => None,
        };
        let layer = s.last(|s| &s.tools.layer).map(|name| layer::dir(name));
        let mut shell = Policy::new(workspace.clone());
        shell.helper = self.helper.unwrap_or(shell.helper);
        shell.timeout = s
            .last(|s| &s.bash.timeout)
            .map_or(sandbox::DEFAULT_TIMEOUT, Secs::duration);
        shell.max_timeout =
            (s.last(|s| &s.bash.max_timeout)).map_or(sandbox::DEFAULT_MAX_TIMEOUT, Secs::duration);
        shell.unconfined = s.last(|s| &s.bash.unconfined) == Some(&true);
        shell.memory_limit = Some(
            s.last(|s| &s.bash.memory)
                .map_or(sandbox::DEFAULT_MEMORY_LIMIT, Mib::bytes),
        );
        shell.output_cap =
            (s.last(|s| &s.bash.output_cap)).map_or(sandbox::DEFAULT_OUTPUT_CAP, Mib::size);
        shell.max_processes = (s.last(|s| &s.bash.max_processes))
            .map_or(sandbox::DEFAULT_MAX_PROCESSES, Processes::get);
        shell.allow_missing = s.all(|s| &s.bash.allow_missing).copied().collect();
        shell.unprotect = s.all(|s| &s.bash.unprotect).cloned().collect();
        shell.network = network::resolve(&s, shell.unconfined)?;
        let toolchains = bash::resolve(&s, &mut shell)?;
        let user_plugins = self.user_plugins.into_iter();
        Ok(Resolved {
            max_output: s
                .last(|s| &s.tools.max_output)
                .copied()
                .unwrap_or(DEFAULT_MAX_OUTPUT),
            edit_tools: s.last(|s| &s.tools.edit_tools) != Some(&false),
            skills,
            plugin_dirs: user_plugins
                .chain(s.all(|s| &s.tools.plugin_dirs).cloned())
                .collect(),
            cache_dir: s
                .last(|s| &s.tools.cache_dir)
                .cloned()
                .or_else(config::default_cache_dir),
            cache_key: self.cache_key,
            layer: layer.transpose()?,
            hosts: (s.all(|s| &s.network.hosts))
                .map(|m| (m.name.clone(), m.address))
                .collect(),
            config: self.config,
            consents: file.plugins,
            shell,
            toolchains,
            workspace,
            diffs: self.diffs,
        })
    }
}

/// `path` canonical, when it is a directory.
fn canonical_dir(path: &std::path::Path) -> std::io::Result<PathBuf> {
    let path = path.canonicalize()?;
    match path.is_dir() {
        true => Ok(path),
        false => Err(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A knob given wins over the config file's, which wins over its default.
    #[test]
    fn the_command_line_over_the_file_over_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let (workspace, config) = (dir.path().join("ws"), dir.path().join("config.toml"));
        std::fs::create_dir(&workspace).unwrap();
        let file = "[bash]\nhome = \"private\"\ntimeout = 60\noutput_cap = 2\nallow_missing = [\"seccomp\"]\n";
        std::fs::write(&config, file).unwrap();
        let mut options = Options::new(&workspace);
        options.config = Some(config);
        options.settings.bash.timeout = Some("5".parse().unwrap());
        options.settings.bash.allow_missing = vec!["landlock".parse().unwrap()];
        let resolved = options.resolve().unwrap();
        assert_eq!(resolved.workspace, workspace.canonicalize().unwrap());
        assert_eq!(resolved.shell.timeout, std::time::Duration::from_secs(5));
        assert_eq!(resolved.shell.output_cap, 2 << 20);
        assert_eq!(resolved.shell.max_processes, sandbox::DEFAULT_MAX_PROCESSES);
        assert_eq!(resolved.shell.home, None);
        let both = ["seccomp".parse().unwrap(), "landlock".parse().unwrap()];
        assert_eq!(resolved.shell.allow_missing, both);
        assert_eq!(resolved.max_output, DEFAULT_MAX_OUTPUT);
    }
}
