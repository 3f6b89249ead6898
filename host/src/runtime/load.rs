//! Loading: the built-in and third-party plugins of the resolved settings, their tools
//! indexed by name, and what every plugin's grants must know (cordon's own files, the protected
//! paths, the secrets to redact).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Runtime;
use crate::engine::{Cache, Engine};
use crate::grants::SecretHeader;
use crate::manifest::{self, NotLoaded};
use crate::options::Options;
use crate::own::{self, Own};
use crate::plugin::Plugin;
use crate::resolve::Resolved;
use crate::sandbox::protect::Guard;
use crate::spec::{Source, Spec};
use crate::{Error, builtin};

impl Runtime {
    /// Loads the built-in plugins and the third-party plugins, as `options` say once resolved
    /// ([`Options::resolve`]).
    pub async fn new(options: Options) -> Result<Self, Error> {
        Self::start(options.resolve()?, None).await
    }

    /// Like [`Runtime::new`], but loads only the plugin that declares `tool` when that is
    /// known before loading (a built-in's tool is its name; a plugin's manifest lists its
    /// tools) and exactly one plugin claims it. A one-shot `cordon call` then skips loading
    /// the others. When that plugin does not declare the tool after all, everything is loaded,
    /// so an unknown tool is reported against the full list.
    pub async fn for_tool(options: Options, tool: &str) -> Result<Self, Error> {
        let resolved = options.resolve()?;
        let runtime = Self::start(resolved.clone(), Some(tool)).await?;
        if runtime.tool(tool).is_some() {
            Ok(runtime)
        } else {
            // Its layer's keeper ends first: a layer has one at a time.
            drop(runtime);
            Self::start(resolved, None).await
        }
    }

    async fn start(mut resolved: Resolved, tool: Option<&str>) -> Result<Self, Error> {
        let layer = match resolved.layer.clone() {
            Some(dir) => Some(crate::layer::start(
                &dir,
                &resolved.workspace,
                &mut resolved.shell,
            )?),
            None => None,
        };
        let mut specs = builtin::specs(&resolved);
        for dir in &resolved.plugin_dirs {
            specs.extend(manifest::specs_in(dir, &resolved)?);
        }
        if let Some(live) = &layer {
            crate::layer::redirect(&mut specs, &resolved.workspace, &live.merged());
        }
        // Before anything is compiled or loaded, and against every plugin (not only the one a
        // one-shot call loads): what this start loads must be out of reach of what it runs.
        let own = own::paths(&resolved, &specs);
        own::check(&own, &resolved, &specs)?;
        protect(&mut specs, &own, &resolved);
        // Of every plugin, loaded or not: bash may print what another plugin's header holds.
        let secrets = secrets(&specs);
        if let Some(tool) = tool {
            let claims = |spec: &Spec| match &spec.tools {
                Some(listed) => listed.iter().any(|t| t == tool),
                None => spec.name == tool,
            };
            // With two claimants, loading both reports the collision.
            if specs.iter().filter(|s| claims(s)).count() == 1 {
                specs.retain(claims);
            }
        }
        // The sandbox sets up while the plugins load.
        for shell in specs.iter_mut().filter_map(|s| s.grants.shell.as_mut()) {
            if tool.is_some()
                && let Some(shell) = Arc::get_mut(shell)
            {
                shell.expect_one_command();
            }
            shell.warm();
        }
        let cache = cache(&resolved);
        let mut runtime = Runtime {
            // One call does not repay reserving the instance pool.
            engine: match tool {
                Some(_) => Engine::new_on_demand(cache)?,
                None => Engine::new(cache)?,
            },
            plugins: Vec::new(),
            index: BTreeMap::new(),
            resolved,
            own,
            secrets,
            layer,
        };
        runtime.load(specs).await?;
        Ok(runtime)
    }

    /// Loads one more plugin, the component file at `path` with its manifest beside it, as a
    /// plugin directory would (`cordon plugins check` uses it).
    pub async fn add_plugin_file(&mut self, path: &Path) -> Result<&Plugin, Error> {
        // Already loaded from a plugin directory: that is the answer, not a name collision.
        let same = |p: &Plugin| match p.source() {
            Source::File(loaded) => same_file(loaded, path),
            Source::Builtin => false,
        };
        if let Some(i) = self.plugins.iter().position(same) {
            return Ok(&self.plugins[i]);
        }
        let mut specs = vec![manifest::spec(path, &self.resolved)?];
        own::check(&self.own, &self.resolved, &specs)?;
        self.secrets.extend(secrets(&specs));
        protect(&mut specs, &self.own, &self.resolved);
        self.load(specs).await?;
        Ok(self.plugins.last().expect("a plugin was just added"))
    }

    async fn load(&mut self, specs: Vec<Spec>) -> Result<(), Error> {
        let engine = &self.engine;
        let cold = specs
            .iter()
            .filter(|s| !engine.is_cached(&s.digest))
            .count();
        if cold > 0 {
            match engine.cache_dir() {
                Some(dir) => tracing::info!(
                    "compiling {cold} plugin(s) for this machine; cached in {} for later starts",
                    dir.display()
                ),
                None => tracing::info!("compiling {cold} plugin(s); no cache directory is set"),
            }
        }
        let mut compiled = Vec::with_capacity(specs.len());
        if cold == 0 {
            // Loading from the cache takes a tenth of a millisecond: not worth a thread.
            for spec in &specs {
                compiled.push(engine.component(&spec.name, &spec.bytes, &spec.digest)?);
            }
        } else {
            // Compile in parallel: on a cold start this is nearly all of the start-up time.
            let compiling: Vec<_> = specs
                .iter()
                .map(|spec| {
                    let engine = engine.clone();
                    let (name, bytes, digest) =
                        (spec.name.clone(), spec.bytes.clone(), spec.digest);
                    tokio::task::spawn_blocking(move || engine.component(&name, &bytes, &digest))
                })
                .collect();
            for task in compiling {
                compiled.push(task.await??);
            }
        }
        for (spec, compiled) in specs.into_iter().zip(compiled) {
            let plugin = Plugin::load(
                &self.engine,
                &spec.name,
                spec.source,
                compiled,
                spec.grants,
                spec.limits,
            )
            .await?;
            if let Some(listed) = &spec.tools {
                let declared: Vec<String> = plugin
                    .tools()
                    .iter()
                    .map(|t| t.declaration.name.clone())
                    .collect();
                if declared.iter().any(|d| !listed.contains(d)) {
                    return Err(Error::Plugin {
                        plugin: spec.name,
                        refusal: Box::new(NotLoaded::Unlisted {
                            declared,
                            listed: listed.clone(),
                        }),
                    });
                }
            }
            self.add(plugin)?;
        }
        Ok(())
    }

    fn add(&mut self, plugin: Plugin) -> Result<(), Error> {
        let p = self.plugins.len();
        for (t, tool) in plugin.tools().iter().enumerate() {
            let name = &tool.declaration.name;
            if let Some(&(other, _)) = self.index.get(name) {
                return Err(Error::DuplicateTool {
                    plugin: plugin.name().to_string(),
                    tool: name.clone(),
                    existing: match self.plugins[other].source() {
                        Source::Builtin => "the built-in tools".to_string(),
                        Source::File(path) => format!("plugin {}", path.display()),
                    },
                });
            }
            self.index.insert(name.clone(), (p, t));
        }
        self.plugins.push(plugin);
        Ok(())
    }
}

/// The variables that the secret headers of `specs` name.
fn secrets(specs: &[Spec]) -> Vec<String> {
    let http = specs.iter().filter_map(|s| s.grants.http.as_deref());
    http.flat_map(|h| &h.headers)
        .flat_map(|header| SecretHeader::variables(&header.template))
        .collect()
}

/// Tells every plugin's grants which paths are cordon's own and which of the workspace are
/// protected, so the `files` capability refuses them even inside a read-write directory.
fn protect(specs: &mut [Spec], own: &[Own], resolved: &Resolved) {
    let own: Arc<[PathBuf]> = own.iter().map(|o| o.resolved.clone()).collect();
    let guard = Arc::new(Guard::new(&resolved.workspace, &resolved.shell.unprotect));
    for spec in specs {
        spec.grants.own = own.clone();
        spec.grants.guard = Some(guard.clone());
    }
}

/// The compile cache asked for: a directory and the key that authenticates what is in it.
/// Without a key (no config directory) nothing is cached.
fn cache(resolved: &Resolved) -> Option<Cache> {
    let dir = resolved.cache_dir.clone()?;
    match resolved.cache_key.clone() {
        Some(key) => Some(Cache { dir, key }),
        None => {
            tracing::warn!(
                "no compile cache: the key that authenticates it lives in cordon's config \
                 directory, and neither XDG_CONFIG_HOME nor HOME is set; every start compiles"
            );
            None
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}
