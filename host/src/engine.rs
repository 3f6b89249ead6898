//! The WebAssembly engine, and the on-disk cache of compiled components.
//!
//! Compiling a component with Cranelift costs tens of milliseconds; loading a compiled artifact
//! costs a tenth of one. So each component is compiled once and the artifact is kept under the
//! cache directory, keyed by a hash of the component's bytes and of everything in the engine's
//! configuration that affects compiled code: a changed plugin or a changed engine simply misses.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::Error;
use crate::workers::Workers;

/// Environment variable that overrides where compiled components are cached.
pub const CACHE_DIR_ENV: &str = "CORDON_CACHE_DIR";

/// How often the engine's epoch advances: the granularity of plugin deadlines.
pub const TICK: Duration = Duration::from_millis(10);

/// The shared engine and its compile cache.
#[derive(Clone)]
pub struct Engine {
    engine: wasmtime::Engine,
    cache: Option<PathBuf>,
    workers: Workers,
}

impl Engine {
    /// An engine with cordon's configuration, caching compiled components in `cache` (none: no
    /// cache, every start compiles).
    pub fn new(cache: Option<PathBuf>) -> Result<Self, Error> {
        Self::build(cache, true)
    }

    /// An engine for a process that makes one call or two (a one-shot `cordon call`):
    /// instances are allocated on demand, which skips reserving and releasing the pooling
    /// allocator's slots, a tenth of such a process's time. Each instantiation costs ~30 µs
    /// more. The compiled code is the same, so the cache is shared with [`Engine::new`].
    pub fn new_on_demand(cache: Option<PathBuf>) -> Result<Self, Error> {
        Self::build(cache, false)
    }

    fn build(cache: Option<PathBuf>, pooled: bool) -> Result<Self, Error> {
        let engine =
            wasmtime::Engine::new(&config(pooled)).map_err(|e| Error::Engine(e.to_string()))?;
        // Deadlines are counted in epochs; a thread advances them for as long as the engine
        // lives.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("cordon-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(TICK);
                }
            })
            .map_err(|e| Error::Engine(format!("cannot start the deadline timer: {e}")))?;
        Ok(Engine {
            engine,
            cache,
            workers: Workers::default(),
        })
    }

    /// The wasmtime engine.
    pub fn wasmtime(&self) -> &wasmtime::Engine {
        &self.engine
    }

    /// The threads plugin calls run on.
    pub(crate) fn workers(&self) -> &Workers {
        &self.workers
    }

    /// Where compiled components are cached, if anywhere.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_deref()
    }

    /// Whether the component with SHA-256 `digest` is already compiled in the cache.
    pub fn is_cached(&self, digest: &[u8; 32]) -> bool {
        self.artifact_path(digest).is_some_and(|p| p.is_file())
    }

    /// The compiled form of the component `bytes` (SHA-256 `digest`), from the cache when it
    /// is there.
    pub fn component(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> Result<Component, Error> {
        let artifact = self.artifact_path(digest);
        if let Some(path) = &artifact
            && path.is_file()
        {
            // SAFETY: the cache directory holds only artifacts this engine configuration
            // serialized itself (the file name is the hash of the component and of the engine's
            // compatibility key), written atomically.
            match unsafe { Component::deserialize_file(&self.engine, path) } {
                Ok(component) => {
                    tracing::debug!(plugin = name, path = %path.display(), "loaded compiled component from cache");
                    return Ok(component);
                }
                Err(e) => tracing::warn!(
                    plugin = name,
                    path = %path.display(),
                    "cached component is unusable ({e}); compiling again"
                ),
            }
        }
        let start = Instant::now();
        let component = Component::new(&self.engine, bytes).map_err(|e| Error::Compile {
            plugin: name.to_string(),
            reason: format!("{e:#}"),
        })?;
        tracing::debug!(plugin = name, elapsed = ?start.elapsed(), "compiled component");
        if let Some(path) = artifact {
            match component.serialize() {
                Ok(data) => {
                    if let Err(e) = write_atomically(&path, &data) {
                        tracing::warn!(path = %path.display(), "cannot cache the compiled component: {e}");
                    }
                }
                Err(e) => tracing::warn!(
                    plugin = name,
                    "cannot serialize the compiled component: {e}"
                ),
            }
        }
        Ok(component)
    }

    fn artifact_path(&self, digest: &[u8; 32]) -> Option<PathBuf> {
        let dir = self.cache.as_ref()?;
        let mut hasher = ShaHasher(Sha256::new());
        hasher.0.update(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.0.update(digest);
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        let digest = hasher.0.finalize();
        let name: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        Some(dir.join(format!("{name}.cwasm")))
    }
}

/// The default cache directory: `$CORDON_CACHE_DIR`, else `$XDG_CACHE_HOME/cordon`, else
/// `~/.cache/cordon`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var(CACHE_DIR_ENV)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("cordon")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("cordon")))
}

/// How much of an instance's dirtied memory is kept resident (zeroed in place) for the next
/// call; past it, pages go back to the kernel.
const KEEP_RESIDENT: usize = 2 << 20;

fn config(pooled: bool) -> Config {
    let mut config = Config::new();
    if pooled {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool()));
    }
    // Component-model async (p3) is not used; its per-store bookkeeping is measurable.
    config.concurrency_support(false);
    // Deadlines: a guest spinning in a loop is interrupted at its epoch deadline.
    config.epoch_interruption(true);
    config
}

fn pool() -> PoolingAllocationConfig {
    // A fresh instance per call is the isolation model, so instantiation must be cheap: the
    // pooling allocator reuses pre-reserved slots instead of mapping memory every call.
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(64)
        .total_core_instances(256)
        .total_memories(128)
        .total_tables(256)
        // One async stack per call in flight, so no more than there can be instances. The
        // default (1000) costs an `mprotect` per stack's guard page at every start: ~3 ms of a
        // one-shot `cordon call`, and as much again to unmap.
        .total_stacks(64)
        // A slot's memory is reset after each call. By default its pages are handed back to the
        // kernel and fault in again at the next call: a third of a small call's time. Instead,
        // find the pages the call dirtied (Linux's PAGEMAP_SCAN, 6.7+) and zero up to this much
        // in place, keeping them resident. Measured on a 4 KiB `read_file`: see
        // the README, "Performance".
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .max_memory_size(1 << 30);
    pool
}

fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("artifact paths have a parent");
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(data)?;
    tmp.persist(path)?;
    Ok(())
}

/// Feeds `Hash` implementations into SHA-256, so the engine's compatibility key is stable
/// across processes (std's default hasher is randomly seeded).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("only the SHA-256 digest is used")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_on_demand_engine_loads_what_the_pooled_one_cached() {
        let dir = tempfile::tempdir().unwrap();
        let pooled = Engine::new(Some(dir.path().to_path_buf())).unwrap();
        let on_demand = Engine::new_on_demand(Some(dir.path().to_path_buf())).unwrap();
        let (bytes, digest) = crate::builtin::component("read_file").expect("built in");
        pooled.component("read_file", bytes, &digest).unwrap();
        let path = on_demand.artifact_path(&digest).unwrap();
        assert_eq!(Some(&path), pooled.artifact_path(&digest).as_ref());
        // SAFETY: the artifact was just written by `pooled`, into a fresh directory.
        unsafe { Component::deserialize_file(on_demand.wasmtime(), &path) }
            .expect("the same compiled code");
    }
}
