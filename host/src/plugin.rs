//! Loading a component as a plugin, and running one call in a fresh instance.
//!
//! Loading does everything that can be done once: compile (or load from the cache), check the
//! version of the contract it was built against ([`crate::contract`]), link exactly the granted
//! capabilities, pre-instantiate, ask the plugin for its declarations and compile their
//! schemas. A call then only creates a store and instantiates from the
//! pre-instantiated component, so no state survives from one call to the next.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::Error;
use crate::bindings::cordon::tool::types::{Context, Outcome};
use crate::bindings::{Declaration, Kind, interface};
use crate::caps;
use crate::contract::{self, Instance, Mismatch, Pre, Version};
use crate::engine::{Engine, TICK};
use crate::grants::{Grants, Roots};
use crate::sandbox::Stop;
use crate::schema::InputSchema;
use crate::spec::{Limits, Source};
use crate::state::State;
use crate::watch::Watch;
use crate::workers::Workers;

/// One tool a plugin declared.
pub struct Tool {
    /// The declaration, as the plugin gave it.
    pub declaration: Declaration,
    /// Its compiled input schema.
    pub schema: InputSchema,
    /// The kind the host treats its calls as: the declared kind, raised to what the plugin's
    /// grants make possible ([`effective_kind`]). Permissions, the ACP view and the MCP
    /// annotations follow this kind, never the declaration alone.
    pub kind: Kind,
}

/// The kind of a tool declared `declared` in a plugin holding `grants`: a plugin that may run
/// commands is `execute`, one that may write a directory is at least `edit`, whatever its tools
/// declare. A declaration is the plugin's word; grants are what it can actually do, so a tool
/// that declares `read` cannot write without the user's permission.
pub fn effective_kind(declared: Kind, grants: &Grants) -> Kind {
    if grants.shell.is_some() {
        Kind::Execute
    } else if grants.files() && !declared.needs_permission() {
        Kind::Edit
    } else {
        declared
    }
}

/// Whether `error` comes from a resource the kernel reported busy (`EBUSY`).
fn busy(error: &wasmtime::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::EBUSY))
    })
}

/// A loaded plugin, ready to run calls.
pub struct Plugin {
    core: Arc<Core>,
    source: Source,
    contract: Version,
    tools: Vec<Tool>,
    workers: Workers,
}

/// What a call needs to start an instance, shared with the worker thread that runs it.
struct Core {
    name: String,
    pre: Pre,
    grants: Arc<Grants>,
    roots: Arc<Roots>,
    limits: Limits,
}

impl Plugin {
    /// Loads a compiled component under `grants` and `limits`.
    pub async fn load(
        engine: &Engine,
        name: &str,
        source: Source,
        component: Component,
        grants: Grants,
        limits: Limits,
    ) -> Result<Self, Error> {
        let load_error = |source: wasmtime::Error| Error::Load {
            plugin: name.to_string(),
            source,
        };
        let contract = contract::version(&component, engine.wasmtime()).map_err(|mismatch| {
            Error::Contract {
                plugin: name.to_string(),
                mismatch,
            }
        })?;
        // A component that names a served version but whose interfaces differ from it was
        // built against a state of the contract that was never released.
        let shape = |source: wasmtime::Error| Error::Contract {
            plugin: name.to_string(),
            mismatch: Mismatch::Shape {
                built: contract.as_str(),
                cause: format!("{source:#}"),
            },
        };
        let linked = |source: wasmtime::Error| match format!("{source:#}") {
            cause if cause.contains(contract::PACKAGE) => shape(source),
            _ => load_error(source),
        };
        let granted = grants.interfaces();
        for (import, _) in component.component_type().imports(engine.wasmtime()) {
            if let Some(capability) = interface::capability(import)
                && !granted.contains(&capability)
            {
                return Err(Error::NotGranted {
                    plugin: name.to_string(),
                    interface: import.to_string(),
                });
            }
        }
        let mut linker = Linker::new(engine.wasmtime());
        caps::add_to_linker(&mut linker, &grants).map_err(load_error)?;
        let pre = linker.instantiate_pre(&component).map_err(linked)?;
        let pre = Pre::new(contract, pre).map_err(shape)?;
        let roots = Roots::open(&grants).map_err(|source| Error::Grant {
            plugin: name.to_string(),
            path: grants.cwd.clone(),
            source,
        })?;
        let core = Core {
            name: name.to_string(),
            pre,
            grants: Arc::new(grants),
            roots: Arc::new(roots),
            limits,
        };
        // Once, at load: it may run on the front door's thread. The first instance also builds
        // the memory images, which the kernel may for a moment refuse to seal (EBUSY while it
        // still holds references to the pages just written; seen once on Linux 6.18, loading
        // the 18 MB Python example). wasmtime keeps no failure, so a second try builds the
        // images anew.
        let mut tries = 0;
        let declarations = loop {
            match core.declarations().await {
                Err(e) if tries < 3 && busy(&e) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20 * tries)).await;
                }
                Err(e) if e.is::<contract::Drift>() => return Err(shape(e)),
                done => break done.map_err(load_error)?,
            }
        };
        let mut tools = Vec::with_capacity(declarations.len());
        for declaration in declarations {
            let schema = InputSchema::compile(&declaration.input_schema).map_err(|source| {
                Error::Schema {
                    plugin: name.to_string(),
                    tool: declaration.name.clone(),
                    source,
                }
            })?;
            tools.push(Tool {
                kind: effective_kind(declaration.kind, &core.grants),
                declaration,
                schema,
            });
        }
        Ok(Plugin {
            core: Arc::new(core),
            source,
            contract,
            tools,
            workers: engine.workers().clone(),
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// Where it came from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The version of the plugin contract it was built against.
    pub fn contract(&self) -> Version {
        self.contract
    }

    /// What it was granted.
    pub fn grants(&self) -> &Grants {
        &self.core.grants
    }

    /// The bounds on each call.
    pub fn limits(&self) -> Limits {
        self.core.limits
    }

    /// The tools it declared.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Runs one call of `tool` in a fresh instance, within the plugin's deadline and memory.
    /// An error is a failure to start, a limit reached, a trap or a lost worker; its text is
    /// worded for the model.
    ///
    /// The call runs on a worker thread (see the `workers` module) and this waits for it under
    /// the deadline, so a call held in a system call (a FIFO being opened) neither blocks the
    /// caller's thread nor outlives its deadline: it is abandoned, its thread ends when the
    /// system call does.
    pub async fn call(
        &self,
        tool: &str,
        input: String,
        context: Context,
        watch: Watch,
    ) -> Result<Reply, CallFailure> {
        let started = |cause| CallFailure::Start {
            plugin: self.core.name.clone(),
            cause,
        };
        // A shell command holds the worker's thread until it ends, where the worker cannot
        // drop it: this side stops it when the call is given up (dropped, past its deadline).
        let stop = match self.core.grants.shell {
            Some(_) => Some(Stop::new().map_err(|e| started(StartCause::Stoppable(e)))?),
            None => None,
        };
        let _stop = stop.clone().map(StopOnDrop);
        let (answer, answered) = tokio::sync::oneshot::channel();
        let core = self.core.clone();
        let owned_tool = tool.to_string();
        self.workers
            .run(move || {
                let mut answer = answer;
                // When the caller gives up (deadline, cancellation) the call is dropped where
                // it stands: a guest in wasm at its next epoch tick, a shell command at once.
                let result = crate::workers::block_on(async {
                    tokio::select! {
                        result = core.run(&owned_tool, &input, context, watch, stop) => Some(result),
                        () = answer.closed() => None,
                    }
                });
                if let Some(result) = result {
                    let _ = answer.send(result);
                }
            })
            .map_err(|e| started(StartCause::Thread(e)))?;
        match tokio::time::timeout(self.core.limits.timeout + TICK, answered).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(CallFailure::Lost {
                plugin: self.core.name.clone(),
                tool: tool.to_string(),
            }),
            Err(_) => Err(self.core.over_time()),
        }
    }
}

/// Stops a call's shell commands when dropped: after they ended, harmless.
struct StopOnDrop(Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Why a call of a plugin has no answer. Its text is the failed outcome the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error("the {plugin} plugin could not be started: {cause}")]
    Start {
        plugin: String,
        #[source]
        cause: StartCause,
    },
    /// The call ran past `limit`, in wasm or waiting in the host, and was stopped.
    #[error(
        "the {plugin} plugin ran past its {} s limit and was stopped; the call had no result",
        limit.as_secs_f64()
    )]
    Timeout { plugin: String, limit: Duration },
    /// The instance asked for more than `limit` bytes of memory.
    #[error(
        "the {plugin} plugin needed more than its {} MiB of memory and was stopped; the call \
         had no result",
        limit >> 20
    )]
    OutOfMemory { plugin: String, limit: usize },
    /// The guest trapped (a panic, an unreachable, a host function's error).
    #[error("the {plugin} plugin crashed while running {tool}: {}", trap.root_cause())]
    Trap {
        plugin: String,
        tool: String,
        #[source]
        trap: wasmtime::Error,
    },
    /// The worker thread that ran the call ended without answering (it panicked).
    #[error("the {plugin} plugin crashed while running {tool}: its thread ended without an answer")]
    Lost { plugin: String, tool: String },
}

/// Why a call's instance could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartCause {
    /// No eventfd to stop its shell commands with.
    #[error("cannot make its commands stoppable: {0}")]
    Stoppable(#[source] std::io::Error),
    /// No worker thread to run it on.
    #[error("{0}")]
    Thread(#[source] std::io::Error),
    /// Instantiating the component failed.
    #[error("{0:#}")]
    Instance(#[source] wasmtime::Error),
}

/// What a plugin answered to a call.
pub struct Reply {
    pub outcome: Outcome,
    /// The layers of confinement of the last shell command the call ran (empty when none).
    pub sandbox: Vec<crate::sandbox::Layer>,
    /// How the last shell command the call ran ended (none when it ran none).
    pub exit: Option<crate::sandbox::Status>,
    /// The connections the proxy refused to the shell commands of the call.
    pub blocked: Vec<crate::sandbox::Blocked>,
    /// The refusals of the plugin's own writes to protected paths, one per path.
    pub protected: Vec<String>,
}

impl Core {
    async fn run(
        &self,
        tool: &str,
        input: &str,
        context: Context,
        watch: Watch,
        stop: Option<Stop>,
    ) -> Result<Reply, CallFailure> {
        let (mut store, instance) =
            self.instantiate(context.dry_run)
                .await
                .map_err(|e| CallFailure::Start {
                    plugin: self.name.clone(),
                    cause: StartCause::Instance(e),
                })?;
        store.data_mut().watch = watch;
        store.data_mut().stop = stop;
        store.data_mut().max_output = usize::try_from(context.max_output).unwrap_or(usize::MAX);
        // The epoch deadline stops a guest spinning in wasm; the timer also stops a call
        // waiting in the host (a shell command), one tick later, dropping what it waits on.
        let call = instance.call(&mut store, tool, input, &context);
        let result = tokio::time::timeout(self.limits.timeout + TICK, call).await;
        let printed = store.data().stdio.text();
        if !printed.is_empty() {
            tracing::debug!(plugin = %self.name, "plugin printed: {printed}");
        }
        match result {
            Ok(Ok(outcome)) => Ok(Reply {
                outcome,
                sandbox: std::mem::take(&mut store.data_mut().sandbox),
                exit: store.data_mut().exit.take(),
                blocked: std::mem::take(&mut store.data_mut().blocked),
                protected: std::mem::take(&mut store.data_mut().protected),
            }),
            Err(_) => Err(self.over_time()),
            Ok(Err(e)) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {
                Err(self.over_time())
            }
            Ok(Err(_)) if store.data().limiter.exceeded => Err(CallFailure::OutOfMemory {
                plugin: self.name.clone(),
                limit: self.limits.memory,
            }),
            Ok(Err(trap)) => Err(CallFailure::Trap {
                plugin: self.name.clone(),
                tool: tool.to_string(),
                trap,
            }),
        }
    }

    fn over_time(&self) -> CallFailure {
        CallFailure::Timeout {
            plugin: self.name.clone(),
            limit: self.limits.timeout,
        }
    }

    async fn declarations(&self) -> wasmtime::Result<Vec<Declaration>> {
        let (mut store, instance) = self.instantiate(false).await?;
        let cwd = self.grants.cwd.to_string_lossy();
        instance.tools(&mut store, &cwd).await
    }

    async fn instantiate(&self, dry_run: bool) -> wasmtime::Result<(Store<State>, Instance)> {
        // A layer's mount is replaced at each checkpoint and rollback of a session: its
        // directories are opened anew for each instance, not kept from the load.
        let roots = match self.grants.dirs.iter().any(|d| d.source.is_some()) {
            true => Arc::new(Roots::open(&self.grants)?),
            false => self.roots.clone(),
        };
        let state = State::new(self.grants.clone(), roots, self.limits.memory, dry_run)?;
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        // Every tick yields to the worker's runtime, so a call given up (cancelled) is dropped
        // even while its guest spins; at the deadline the guest traps.
        let mut left = ticks(self.limits.timeout);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            left = left.saturating_sub(1);
            match left {
                0 => Err(Trap::Interrupt.into()),
                _ => Ok(UpdateDeadline::Yield(1)),
            }
        });
        // What the plugin hands the host in one go (a call's outcome, a file for
        // `files.replace`) is copied into the host's memory, within this "hostcall fuel".
        // wasmtime's default (128 MiB) is below what a file tool legitimately returns (an edit
        // of a large file: its old and new texts). The plugin's memory bound is the natural
        // bound: it cannot hand over more than it may hold, and the user granted that much.
        store.set_hostcall_fuel(self.limits.memory);
        let instance = self.pre.instantiate(&mut store).await?;
        Ok((store, instance))
    }
}

/// The number of epoch ticks in `duration`, rounded up.
fn ticks(duration: Duration) -> u64 {
    let ticks = duration.as_nanos().div_ceil(TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_resource_is_tried_again() {
        let io = |code| std::io::Error::from_raw_os_error(code);
        let sealing = wasmtime::Error::from(io(libc::EBUSY)).context("cannot add seals");
        assert!(busy(&sealing));
        assert!(!busy(&wasmtime::Error::from(io(libc::ENOMEM))));
        assert!(!busy(&wasmtime::Error::msg("unknown import")));
    }
}
