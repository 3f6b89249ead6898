//! The runtime: the declared tools, and the pipeline every call goes through.
//!
//! Whatever the front door (library, `cordon call`, `cordon session`, `cordon mcp`), a call is:
//! find the tool, parse and validate the input against its schema, run it in a fresh instance
//! of its plugin, and bound the output. Every ordinary failure on the way is a failed
//! [`CallOutcome`] with a text for the model, never an error.
//!
//! Loading the plugins is the concern of `load`; a call's way through the pipeline, of `call`.

mod call;
mod load;

use std::collections::BTreeMap;
use std::path::Path;

use crate::engine::Engine;
use crate::own::Own;
use crate::plugin::{Plugin, Tool};
use crate::resolve::Resolved;
pub use crate::watch::Watch;
pub use call::{Call, CallError, CallOutcome, MAX_INPUT_BYTES, check};

/// The loaded plugins and their tools.
pub struct Runtime {
    engine: Engine,
    resolved: Resolved,
    plugins: Vec<Plugin>,
    /// Tool name → (plugin index, tool index).
    index: BTreeMap<String, (usize, usize)>,
    /// cordon's own files, which no tool may write.
    own: Vec<Own>,
    /// The variables whose values plugins' requests carry as secret headers: redacted from
    /// every output.
    secrets: Vec<String>,
    /// The workspace's layer, whose keeper lives as long as the runtime.
    layer: Option<crate::layer::Live>,
}

impl Runtime {
    /// The layer the workspace is seen through (`--layer`), if any.
    pub fn layer(&self) -> Option<&crate::layer::Live> {
        self.layer.as_ref()
    }

    /// The workspace root (canonical).
    pub fn workspace(&self) -> &Path {
        &self.resolved.workspace
    }

    /// What it was started with, resolved (the config file's settings included).
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// What bash commands may reach on the network, as resolved at start (the config's
    /// `[network]` table included).
    pub fn network(&self) -> &crate::sandbox::Network {
        &self.resolved.shell.network
    }

    /// The loaded plugins.
    pub fn plugins(&self) -> &[Plugin] {
        &self.plugins
    }

    /// The declared tools, in plugin order, each with its plugin.
    pub fn tools(&self) -> impl Iterator<Item = (&Plugin, &Tool)> {
        self.plugins
            .iter()
            .flat_map(|p| p.tools().iter().map(move |t| (p, t)))
    }

    /// The tool called `name`, with its plugin.
    pub fn tool(&self, name: &str) -> Option<(&Plugin, &Tool)> {
        let &(p, t) = self.index.get(name)?;
        let plugin = &self.plugins[p];
        Some((plugin, &plugin.tools()[t]))
    }
}
