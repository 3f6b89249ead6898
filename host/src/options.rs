//! How a [`crate::Runtime`] is set up: the workspace, which tools, their output bound, the
//! shell policy and where cordon's own files are.

use std::path::PathBuf;

use crate::{config, shell};

/// How the runtime is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The directory the tools work in; relative paths resolve against it.
    pub workspace: PathBuf,
    /// The most characters of output the model sees from one call.
    pub max_output: usize,
    /// Whether `read_file`, `write_file` and `edit_file` are declared.
    pub edit_tools: bool,
    /// The skills directory for `read_skill`, if any.
    pub skills: Option<PathBuf>,
    /// How shell commands run (timeout, confinement).
    pub shell: shell::Policy,
    /// More for bash commands (paths, variables, home, protected paths relaxed), as the
    /// command line gives it; at start the config file's `[bash]` table comes first and the
    /// result is applied to [`Options::shell`]. Its `unprotect` relaxes the protected paths
    /// for every tool.
    pub bash: config::BashSettings,
    /// The hosts bash commands may reach, as the command line gives them; at start the config
    /// file's `[network]` table comes first and the result sets [`Options::shell`]'s network
    /// (unless that is already the whole network).
    pub network: config::NetworkSettings,
    /// Where compiled components are cached; none: compile at every start.
    pub cache_dir: Option<PathBuf>,
    /// The key file that authenticates the cached components (created when missing); none:
    /// no cache.
    pub cache_key: Option<PathBuf>,
    /// Directories of third-party plugins (`NAME.wasm` with `NAME.toml`).
    pub plugin_dirs: Vec<PathBuf>,
    /// cordon's config file (the user's consent for plugins); none: no consent given.
    pub config: Option<PathBuf>,
    /// Whether an outcome carries the whole old and new text of the change it made
    /// ([`crate::CallOutcome::diff`], the content of an ACP diff). Copying them out of the plugin is most
    /// of the cost of editing a large file, so a front door that never shows them turns this
    /// off.
    pub diffs: bool,
    /// The layer the workspace is seen through (a name, or a path with a `/`,
    /// [`crate::layer`]); none: the workspace itself.
    pub layer: Option<String>,
}

/// The default for [`Options::max_output`].
pub const DEFAULT_MAX_OUTPUT: usize = 30_000;

impl Options {
    /// The defaults for a workspace: edit tools on, no skills, output cut at 30 000 characters,
    /// the default shell policy, cache directory, plugin directory and config file (the last
    /// two only when they exist), diffs on.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        let workspace = workspace.into();
        Options {
            shell: shell::Policy::new(workspace.clone()),
            bash: config::BashSettings::default(),
            network: config::NetworkSettings::default(),
            workspace,
            max_output: DEFAULT_MAX_OUTPUT,
            edit_tools: true,
            skills: None,
            cache_dir: config::default_cache_dir(),
            cache_key: config::default_cache_key(),
            plugin_dirs: config::default_plugin_dir().into_iter().collect(),
            config: config::default_config_file(),
            diffs: true,
            layer: None,
        }
    }
}
