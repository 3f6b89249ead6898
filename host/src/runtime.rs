//! The runtime: the declared tools, and the pipeline every call goes through.
//!
//! Whatever the front door (library, `cordon call`, `cordon session`, `cordon mcp`), a call is:
//! find the tool, parse and validate the input against its schema, run it in a fresh instance
//! of its plugin, and bound the output. Every ordinary failure on the way is a failed
//! [`CallOutcome`] with a text for the model, never an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::bindings::cordon::tool::types::{Context, Diff, Location};
use crate::engine::{Cache, Engine};
use crate::grants::SecretHeader;
use crate::manifest::{self, Refusal};
use crate::options::Options;
use crate::own::{self, Own};
use crate::plugin::{Answer, Plugin, Tool};
use crate::resolve::Resolved;
use crate::schema::Problem;
use crate::shell::protect::Guard;
use crate::spec::{Source, Spec};
pub use crate::watch::Watch;
use crate::{Error, builtin, output};

/// The most bytes a call's input may have; a larger one is refused before any plugin runs.
/// The plugin holds the input twice (as text and parsed) and a file tool hands it back in its
/// outcome (the new text of a file), all within a built-in's 1 GiB of memory.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// What a call produced, ready for the model (the WIT `outcome` is what the plugin handed back;
/// this is it after the host's pipeline).
#[derive(Clone, Debug)]
pub struct CallOutcome {
    /// The text the model sees: truncated, with any status line last.
    pub output: String,
    /// Whether the call failed.
    pub failed: bool,
    /// The files it read or changed.
    pub locations: Vec<Location>,
    /// The change it made, or would make in a dry run (when [`Options::diffs`] is on).
    pub diff: Option<Diff>,
    /// The layers of confinement of the shell command it ran, if it ran one.
    pub sandbox: Vec<crate::shell::Layer>,
    /// How that command ended: the exit status its text's trailer tells the model, for a
    /// program, which cannot tell the trailer from a command's own output ending alike.
    pub exit: Option<crate::shell::Status>,
    /// The connections cordon's proxy refused to that command (`host:port` and the line its
    /// output ends with).
    pub blocked: Vec<crate::shell::Blocked>,
}

impl CallOutcome {
    /// A failure that happened before or around the plugin: bad input, unknown tool, crash.
    pub fn failure(output: impl Into<String>) -> Self {
        CallOutcome {
            output: output.into(),
            failed: true,
            locations: Vec::new(),
            diff: None,
            sandbox: Vec::new(),
            exit: None,
            blocked: Vec::new(),
        }
    }
}

impl From<CallError> for CallOutcome {
    fn from(error: CallError) -> Self {
        CallOutcome::failure(error.to_string())
    }
}

/// A call whose tool was found and whose input passed validation.
pub struct Call<'a> {
    /// The plugin that declares the tool.
    pub plugin: &'a Plugin,
    /// The tool.
    pub tool: &'a Tool,
    /// The input, parsed and valid.
    pub input: Value,
}

/// Why a call cannot run: the model named no declared tool, or gave an input that does not
/// fit. The message is the text of the failed outcome the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("Unknown tool \"{}\". Declared tools: {}", output::quote(name), declared.join(", "))]
    UnknownTool { name: String, declared: Vec<String> },
    #[error(
        "The input for {tool} is {:.1} MiB, more than the {} MiB a call may carry; send less in \
         one call (a file this large is better produced by a command)",
        *bytes as f64 / f64::from(1 << 20),
        MAX_INPUT_BYTES >> 20
    )]
    TooLarge { tool: String, bytes: usize },
    #[error("The input for {tool} is not valid JSON: {source}")]
    NotJson {
        tool: String,
        source: serde_json::Error,
    },
    #[error("The input for {tool} must be a JSON object, not {found}")]
    NotObject { tool: String, found: &'static str },
    #[error("Invalid input for {tool}: {}", problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; "))]
    InvalidInput {
        tool: String,
        problems: Vec<Problem>,
    },
}

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
        let layer = crate::layer::start(&mut resolved)?;
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
                        refusal: Box::new(Refusal::Unlisted {
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
    pub fn network(&self) -> &crate::shell::Network {
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

    /// Runs the tool `name` with `input` (a JSON object as text). With `dry_run` the plugin
    /// computes the outcome but changes nothing.
    pub async fn call(&self, name: &str, input: &str, dry_run: bool) -> CallOutcome {
        match self.prepare_text(name, input) {
            Ok(call) => self.run(&call, dry_run, Watch::default()).await,
            Err(error) => error.into(),
        }
    }

    /// Finds the tool `name` and checks `input` against its schema: everything a call needs
    /// before anything runs.
    pub fn prepare(&self, name: &str, input: Value) -> Result<Call<'_>, CallError> {
        let (plugin, tool) = self.validate(name, &input)?;
        Ok(Call {
            plugin,
            tool,
            input,
        })
    }

    /// Finds the tool `name` and checks `input` against its schema, without taking the input:
    /// for a caller that keeps it whatever the answer.
    pub fn validate(&self, name: &str, input: &Value) -> Result<(&Plugin, &Tool), CallError> {
        let (plugin, tool) = self.find(name)?;
        check(tool, input)?;
        Ok((plugin, tool))
    }

    /// [`Runtime::prepare`] for a front door that receives the input as text: an input larger
    /// than [`MAX_INPUT_BYTES`] is refused before it is parsed.
    pub fn prepare_text(&self, name: &str, input: &str) -> Result<Call<'_>, CallError> {
        let (plugin, tool) = self.find(name)?;
        let input = Self::parse(name, input)?;
        check(tool, &input)?;
        Ok(Call {
            plugin,
            tool,
            input,
        })
    }

    /// Parses the text of an input for the tool `name`: an input larger than
    /// [`MAX_INPUT_BYTES`] is refused before it is parsed.
    pub fn parse(name: &str, input: &str) -> Result<Value, CallError> {
        if input.len() > MAX_INPUT_BYTES {
            return Err(CallError::TooLarge {
                tool: name.to_string(),
                bytes: input.len(),
            });
        }
        serde_json::from_str(input).map_err(|source| CallError::NotJson {
            tool: name.to_string(),
            source,
        })
    }

    /// The tool `name` with its plugin, or the error that lists the declared tools.
    pub fn find(&self, name: &str) -> Result<(&Plugin, &Tool), CallError> {
        self.tool(name).ok_or_else(|| CallError::UnknownTool {
            name: name.to_string(),
            declared: self
                .tools()
                .map(|(_, t)| t.declaration.name.clone())
                .collect(),
        })
    }

    /// Runs a prepared call in a fresh instance of its plugin, followed by `watch`.
    pub async fn run(&self, call: &Call<'_>, dry_run: bool, watch: Watch) -> CallOutcome {
        let context = Context {
            cwd: call.plugin.grants().cwd.to_string_lossy().into_owned(),
            dry_run,
            max_output: u32::try_from(self.resolved.max_output).unwrap_or(u32::MAX),
            want_diff: self.resolved.diffs,
        };
        let name = &call.tool.declaration.name;
        match call
            .plugin
            .call(name, call.input.to_string(), context, watch)
            .await
        {
            Ok(answer) => self.finish(answer),
            Err(failure) => CallOutcome::failure(failure.to_string()),
        }
    }

    fn finish(&self, answer: Answer) -> CallOutcome {
        let Answer {
            outcome,
            sandbox,
            exit,
            blocked,
            mut protected,
        } = answer;
        let mut output = output::finish(
            &output::redact(&outcome.output, &self.secrets),
            outcome.trailer.as_deref(),
            self.resolved.max_output,
            outcome.omitted_bytes,
        );
        // What the plugin itself was refused (it saw only `not-permitted`), once per path.
        protected.sort();
        protected.dedup();
        for refusal in protected {
            output.push_str(&format!("\n[cordon: refused: {refusal}]"));
        }
        CallOutcome {
            output,
            failed: outcome.failed,
            locations: outcome.locations,
            diff: outcome.diff,
            sandbox,
            exit,
            blocked,
        }
    }
}

/// Checks that `input` is an object that fits the schema of `tool`.
pub fn check(tool: &Tool, input: &Value) -> Result<(), CallError> {
    let name = &tool.declaration.name;
    if !input.is_object() {
        return Err(CallError::NotObject {
            tool: name.clone(),
            found: json_type(input),
        });
    }
    tool.schema
        .check(input)
        .map_err(|problems| CallError::InvalidInput {
            tool: name.clone(),
            problems,
        })
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

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
