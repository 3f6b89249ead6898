//! The versions of the plugin contract (the WIT package `cordon:tool`) that cordon serves, and
//! which one a component was built against.
//!
//! An incompatible change to the WIT bumps the package's version. A plugin built against an
//! earlier version keeps loading: it is linked against that version's bindings, whose calls
//! and results the host adapts to the current ones ([`v0_1`]). A component built against a
//! version cordon does not serve (a newer one, most likely) is refused before it is linked,
//! with a text that names its version, the versions served and what to do, instead of
//! wasmtime's type mismatch, which names neither.

pub mod v0_1;

use wasmtime::Store;
use wasmtime::component::{Component, InstancePre};

use crate::bindings::cordon::tool::types::{Context, Declaration, Outcome};
use crate::bindings::{PluginWithCapabilities, PluginWithCapabilitiesIndices};
use crate::state::State;

/// The package, as its interfaces' names begin.
pub const PACKAGE: &str = "cordon:tool";

/// The version of `wit/cordon.wit`: the one the plugin kit and the built-in plugins are built
/// against.
pub const CURRENT: &str = crate::bindings::VERSION;

/// A version of the contract that cordon serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// [`CURRENT`].
    Current,
    /// 0.1.0, as first released ([`v0_1`]).
    V0_1,
}

impl Version {
    /// Every version served, newest first.
    pub const SERVED: [Version; 2] = [Version::Current, Version::V0_1];

    /// The version number, such as `0.2.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Current => CURRENT,
            Version::V0_1 => v0_1::VERSION,
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::SERVED.into_iter().find(|v| v.as_str() == text)
    }
}

/// What cordon serves, as `cordon --version` and `cordon plugins check` print it.
pub fn served() -> String {
    let older: Vec<&str> = Version::SERVED[1..].iter().map(|v| v.as_str()).collect();
    format!("{PACKAGE} {CURRENT} (also serves {})", older.join(", "))
}

/// The versions served, newest first: `0.2.0 and 0.1.0`.
pub fn served_list() -> String {
    let all: Vec<&str> = Version::SERVED.iter().map(|v| v.as_str()).collect();
    all.join(" and ")
}

/// Why a component cannot be served as a plugin, whatever its grants.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    #[error(
        "it was built against {PACKAGE} {built}, a version of the plugin contract this cordon \
         does not serve (it serves {}). Upgrade cordon to a release that serves {PACKAGE} \
         {built}, or rebuild the plugin against {PACKAGE} {CURRENT} (the plugin kit of this \
         release, plugins/kit)",
        served_list()
    )]
    Unserved { built: String },
    #[error(
        "it does not export {PACKAGE}/tool, so it is not a cordon plugin. Build it with the \
         plugin kit (plugins/kit), against {PACKAGE} {CURRENT}"
    )]
    NotAPlugin,
    #[error(
        "it names {PACKAGE} {built}, but its interfaces differ from {built} as released ({cause}): \
         it was built against an unreleased state of the contract. Rebuild the plugin against \
         {PACKAGE} {CURRENT} (the plugin kit of this release, plugins/kit)"
    )]
    Shape { built: &'static str, cause: String },
}

/// The version of the contract `component` was built against: that of the `tool` it exports.
/// Every `cordon:tool` interface it imports or exports must be of a version served.
pub fn version(component: &Component, engine: &wasmtime::Engine) -> Result<Version, Mismatch> {
    let ty = component.component_type();
    let imports = ty.imports(engine).map(|(name, _)| name);
    let mut tool = None;
    for name in imports.chain(ty.exports(engine).map(|(name, _)| name)) {
        let Some(rest) = name.strip_prefix(PACKAGE).and_then(|r| r.strip_prefix('/')) else {
            continue;
        };
        let (interface, built) = rest.split_once('@').unwrap_or((rest, "(unversioned)"));
        let version = Version::parse(built).ok_or_else(|| Mismatch::Unserved {
            built: built.to_string(),
        })?;
        if interface == "tool" {
            tool = Some(version);
        }
    }
    tool.ok_or(Mismatch::NotAPlugin)
}

/// A linked component, ready to instantiate, with where its exports are, by the version it
/// was built against.
pub(crate) enum Pre {
    Current(InstancePre<State>, PluginWithCapabilitiesIndices),
    V0_1(InstancePre<State>, v0_1::PluginWithCapabilitiesIndices),
}

/// The mark of an instance's exports that are not of the types its version defines: wasmtime
/// checks them only once there is an instance, and its message names no version.
#[derive(Debug, thiserror::Error)]
#[error("its exports")]
pub(crate) struct Drift;

/// One instance of a plugin.
pub(crate) enum Instance {
    Current(PluginWithCapabilities),
    V0_1(v0_1::PluginWithCapabilities),
}

impl Pre {
    /// Finds the exports `version` defines in `pre`.
    pub(crate) fn new(version: Version, pre: InstancePre<State>) -> wasmtime::Result<Self> {
        Ok(match version {
            Version::Current => {
                let exports = PluginWithCapabilitiesIndices::new(&pre)?;
                Pre::Current(pre, exports)
            }
            Version::V0_1 => {
                let exports = v0_1::PluginWithCapabilitiesIndices::new(&pre)?;
                Pre::V0_1(pre, exports)
            }
        })
    }

    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        match self {
            Pre::Current(pre, _) => pre.engine(),
            Pre::V0_1(pre, _) => pre.engine(),
        }
    }

    /// A new instance; exports of other types than its version's fail with a [`Drift`].
    pub(crate) async fn instantiate(&self, store: &mut Store<State>) -> wasmtime::Result<Instance> {
        Ok(match self {
            Pre::Current(pre, exports) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                Instance::Current(
                    exports
                        .load(store, &instance)
                        .map_err(|e| e.context(Drift))?,
                )
            }
            Pre::V0_1(pre, exports) => {
                let instance = pre.instantiate_async(&mut *store).await?;
                Instance::V0_1(
                    exports
                        .load(store, &instance)
                        .map_err(|e| e.context(Drift))?,
                )
            }
        })
    }
}

impl Instance {
    /// The tools it declares.
    pub(crate) async fn tools(
        &self,
        store: &mut Store<State>,
        cwd: &str,
    ) -> wasmtime::Result<Vec<Declaration>> {
        match self {
            Instance::Current(i) => i.cordon_tool_tool().call_tools(store, cwd).await,
            Instance::V0_1(i) => {
                let declared = i.cordon_tool_tool().call_tools(store, cwd).await?;
                Ok(declared.into_iter().map(v0_1::declaration).collect())
            }
        }
    }

    /// Runs one call of `tool`.
    pub(crate) async fn call(
        &self,
        store: &mut Store<State>,
        tool: &str,
        input: &str,
        context: &Context,
    ) -> wasmtime::Result<Outcome> {
        match self {
            Instance::Current(i) => {
                i.cordon_tool_tool()
                    .call_call(store, tool, input, context)
                    .await
            }
            Instance::V0_1(i) => {
                let old = v0_1::context(context);
                let outcome = i
                    .cordon_tool_tool()
                    .call_call(store, tool, input, &old)
                    .await?;
                Ok(v0_1::outcome(outcome, context.want_diff))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_versions_served_are_named_newest_first() {
        assert_eq!(served(), "cordon:tool 0.2.0 (also serves 0.1.0)");
        assert_eq!(served_list(), "0.2.0 and 0.1.0");
        assert_eq!(Version::parse("0.1.0"), Some(Version::V0_1));
        assert_eq!(Version::parse("0.9.0"), None);
    }

    #[test]
    fn the_current_version_is_the_wits() {
        let wit = include_str!("../../../wit/cordon.wit");
        assert!(wit.contains(&format!("package {PACKAGE}@{CURRENT};")));
        let old = include_str!("../../../wit/0.1.0/cordon.wit");
        assert!(old.contains(&format!("package {PACKAGE}@{};", v0_1::VERSION)));
    }
}
