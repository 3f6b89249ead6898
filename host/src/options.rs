//! How a [`crate::Runtime`] is set up: the workspace, every knob as the caller gives it
//! ([`Settings`]), and where cordon's own files are. [`Options::resolve`] turns it into what
//! the runtime takes.

use std::path::PathBuf;

use crate::config;
use crate::settings::Settings;

/// How the runtime is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The directory the tools work in; relative paths resolve against it.
    pub workspace: PathBuf,
    /// Every knob of the runtime and its sandbox, as the caller gives it (the command line's
    /// flags); the config file's come under them at start, and what neither gives takes its
    /// default.
    pub settings: Settings,
    /// cordon's config file: the user's consent for plugins and their settings; none: no
    /// consent given, no settings but these.
    pub config: Option<PathBuf>,
    /// The key file that authenticates the cached components (created when missing); none:
    /// no cache.
    pub cache_key: Option<PathBuf>,
    /// The user's plugin directory, loaded before those of the settings; none: not used.
    pub user_plugins: Option<PathBuf>,
    /// Whether an outcome carries the whole old and new text of the change it made
    /// ([`crate::CallOutcome::diff`], the content of an ACP diff). Copying them out of the plugin is most
    /// of the cost of editing a large file, so a front door that never shows them turns this
    /// off.
    pub diffs: bool,
    /// The binary re-executed as the sandbox helper ([`crate::sandbox::Policy::helper`]); none:
    /// this very program, which must then call [`crate::sandbox::run_helper_if_asked`] first.
    pub helper: Option<PathBuf>,
}

/// The default for the most characters of output the model sees from one call.
pub const DEFAULT_MAX_OUTPUT: usize = 30_000;

impl Options {
    /// The defaults for a workspace: no settings given (edit tools on, no skills, output cut at
    /// 30 000 characters, the default sandbox and cache directory), the user's plugin
    /// directory and config file when they exist, diffs on.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Options {
            workspace: workspace.into(),
            settings: Settings::default(),
            config: config::default_config_file(),
            cache_key: config::default_cache_key(),
            user_plugins: config::default_plugin_dir(),
            diffs: true,
            helper: None,
        }
    }
}
