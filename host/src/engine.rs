//! The WebAssembly engine, and the on-disk cache of compiled components.
//!
//! Compiling a component with Cranelift costs tens of milliseconds; loading a compiled artifact
//! costs a tenth of one. So each component is compiled once and the artifact is kept under the
//! cache directory, keyed by a hash of the component's bytes and of everything in the engine's
//! configuration that affects compiled code: a changed plugin or a changed engine simply misses.
//!
//! An artifact is machine code that wasmtime loads without checking it, so each carries a MAC
//! under a key of 32 random bytes kept with cordon's config (`cache.key`, mode 0600, outside
//! every grant like the cache itself, see [`crate::own`]). Loading copies the code where no one
//! can change it (a sealed memory file, see `engine/artifact.rs`), checks the MAC (keyed
//! BLAKE3, 2.6× the speed of HMAC-SHA256 here) over the bytes copied, in constant time, and
//! has wasmtime map that copy: an artifact that was changed, or swapped for another (the MAC covers its name
//! too), is compiled again and overwritten, never loaded. The copy is the price of checking:
//! mapping the file itself would let whoever can write it change the code after its check.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::Error;
use crate::workers::Workers;
use artifact::{Code, KEY_LEN, mac};

mod artifact;

/// How often the engine's epoch advances: the granularity of plugin deadlines.
pub const TICK: Duration = Duration::from_millis(10);

/// Where compiled components are cached, and the key that authenticates them.
#[derive(Clone, Debug)]
pub struct Cache {
    /// The directory of compiled components.
    pub dir: PathBuf,
    /// The key file, created when missing.
    pub key: PathBuf,
}

/// The shared engine and its compile cache.
#[derive(Clone)]
pub struct Engine {
    engine: wasmtime::Engine,
    cache: Option<Artifacts>,
    workers: Workers,
}

/// The compile cache in use: its directory and its key.
#[derive(Clone)]
struct Artifacts {
    dir: PathBuf,
    key: [u8; KEY_LEN],
}

impl Engine {
    /// An engine with cordon's configuration, caching compiled components in `cache` (none: no
    /// cache, every start compiles). A key that cannot be read or created means no cache,
    /// with a warning.
    pub fn new(cache: Option<Cache>) -> Result<Self, Error> {
        Self::build(cache, true)
    }

    /// An engine for a process that makes one call or two (a one-shot `cordon call`):
    /// instances are allocated on demand, which skips reserving and releasing the pooling
    /// allocator's slots, a tenth of such a process's time. Each instantiation costs ~30 µs
    /// more. The compiled code is the same, so the cache is shared with [`Engine::new`].
    pub fn new_on_demand(cache: Option<Cache>) -> Result<Self, Error> {
        Self::build(cache, false)
    }

    fn build(cache: Option<Cache>, pooled: bool) -> Result<Self, Error> {
        let cache = cache.and_then(|cache| match key(&cache.key) {
            Ok(key) => Some(Artifacts {
                dir: cache.dir,
                key,
            }),
            Err(KeyError::Unusable(e)) => {
                tracing::warn!(
                    "no compile cache: cannot use its key {} ({e}); every start compiles. \
                     Remove the file to have a new key made",
                    cache.key.display()
                );
                None
            }
            Err(KeyError::Unmade(e)) => {
                tracing::warn!(
                    "no compile cache: cannot make its key {} ({e}); every start compiles. \
                     Set XDG_CONFIG_HOME to a directory you can write",
                    cache.key.display()
                );
                None
            }
        });
        let engine = wasmtime::Engine::new(&config(pooled)).map_err(Error::Engine)?;
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
            .map_err(Error::Timer)?;
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
        self.cache.as_ref().map(|c| c.dir.as_path())
    }

    /// Whether the component with SHA-256 `digest` is already compiled in the cache (a hint:
    /// the artifact is authenticated only when loaded).
    pub fn is_cached(&self, digest: &[u8; 32]) -> bool {
        self.artifact(digest).is_some_and(|(_, p)| p.is_file())
    }

    /// The compiled form of the component `bytes` (SHA-256 `digest`), from the cache when it
    /// is there.
    pub fn component(
        &self,
        name: &str,
        bytes: &[u8],
        digest: &[u8; 32],
    ) -> Result<Component, Error> {
        let artifact = self.artifact(digest);
        if let Some((name_hash, path)) = &artifact
            && let Some(component) = self.load(name, name_hash, path)
        {
            return Ok(component);
        }
        let start = Instant::now();
        let component = Component::new(&self.engine, bytes).map_err(|source| Error::Compile {
            plugin: name.to_string(),
            source,
        })?;
        tracing::debug!(plugin = name, elapsed = ?start.elapsed(), "compiled component");
        if let (Some(cache), Some((name_hash, path))) = (&self.cache, artifact) {
            match component.serialize() {
                Ok(code) => {
                    let mac = mac(&cache.key, &name_hash, &code);
                    if let Err(e) = write_atomically(&path, &[mac.as_bytes(), &code]) {
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

    /// The cached artifact `path` (named `name_hash`) of plugin `name`, when it is there and
    /// authentic.
    fn load(&self, name: &str, name_hash: &[u8; 32], path: &Path) -> Option<Component> {
        let cache = self.cache.as_ref()?;
        let code = match Code::open(path, &cache.key, name_hash) {
            Ok(Some(code)) => code,
            Ok(None) => {
                tracing::warn!(plugin = name, path = %path.display(), "cached component failed authentication; compiling again");
                return None;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(plugin = name, path = %path.display(), "cannot read the cached component ({e}); compiling again");
                return None;
            }
        };
        // SAFETY: `code` carries a valid MAC under this cache's key for this artifact name: it
        // is what this engine configuration serialized for this component.
        match unsafe { code.deserialize(&self.engine) } {
            Ok(component) => {
                tracing::debug!(plugin = name, path = %path.display(), "loaded compiled component from cache");
                Some(component)
            }
            Err(e) => {
                tracing::warn!(plugin = name, path = %path.display(), "cached component is unusable ({e:#}); compiling again");
                None
            }
        }
    }

    /// The name of the artifact of the component with SHA-256 `digest` (a hash of it and of
    /// the engine's compatibility key), and its path.
    fn artifact(&self, digest: &[u8; 32]) -> Option<([u8; 32], PathBuf)> {
        let dir = &self.cache.as_ref()?.dir;
        let mut hasher = ShaHasher(Sha256::new());
        hasher.0.update(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.0.update(digest);
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        let name_hash: [u8; 32] = hasher.0.finalize().into();
        let name: String = name_hash.iter().map(|b| format!("{b:02x}")).collect();
        Some((name_hash, dir.join(format!("{name}.cwasm"))))
    }
}

/// The most linear memory one instance may have: the size of a slot in the pool.
pub const MAX_MEMORY: usize = 1 << 30;

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
        // docs/performance.md.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        .max_memory_size(MAX_MEMORY);
    pool
}

fn write_atomically(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let dir = path.parent().expect("artifact paths have a parent");
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    for part in parts {
        tmp.write_all(part)?;
    }
    tmp.persist(path)?;
    Ok(())
}

/// The cache key in the file `path`; a missing file is created with 32 random bytes (mode 0600,
/// its directory 0700). Several processes may start at once: the new key is written to a
/// temporary file and linked into place only if no other is there, else the other is used.
/// Why the compile cache's key cannot be had.
#[derive(Debug)]
enum KeyError {
    /// The key file is there but cannot be read, or holds no key: removing it helps.
    Unusable(std::io::Error),
    /// There is no key file, and none can be made (its directory is not writable).
    Unmade(std::io::Error),
}

/// The key at `path`, made (from `/dev/urandom`, mode 0600) when there is none.
fn key(path: &Path) -> Result<[u8; KEY_LEN], KeyError> {
    use std::io::ErrorKind;
    use std::io::Read;
    let read = |path: &Path| -> std::io::Result<[u8; KEY_LEN]> {
        let mut data = Vec::with_capacity(KEY_LEN + 1);
        std::fs::File::open(path)?
            .take(KEY_LEN as u64 + 1)
            .read_to_end(&mut data)?;
        data.try_into().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("it does not hold a key of {KEY_LEN} bytes"),
            )
        })
    };
    match read(path) {
        // No key there, nor can there be one where a file stands for a directory.
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {}
        other => return other.map_err(KeyError::Unusable),
    }
    make(path, read).map_err(KeyError::Unmade)
}

/// Makes the key file at `path`; when another process made it first, reads theirs.
fn make(
    path: &Path,
    read: impl Fn(&Path) -> std::io::Result<[u8; KEY_LEN]>,
) -> std::io::Result<[u8; KEY_LEN]> {
    use std::io::Read;
    let dir = path.parent().expect("the key file has a parent");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut key = [0; KEY_LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    // Created with mode 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(".cache.key.")
        .tempfile_in(dir)?;
    tmp.write_all(&key)?;
    tmp.as_file().sync_all()?;
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(key),
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => read(path),
        Err(e) => Err(e.error),
    }
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

    fn cache(dir: &Path) -> Option<Cache> {
        Some(Cache {
            dir: dir.join("cache"),
            key: dir.join("config/cache.key"),
        })
    }

    /// Compiles `read_file` into a fresh cache: the engine, the artifact's path, the
    /// component's bytes and digest.
    fn cached(dir: &Path) -> (Engine, PathBuf, &'static [u8], [u8; 32]) {
        let engine = Engine::new_on_demand(cache(dir)).unwrap();
        let (bytes, digest) = crate::builtin::component("read_file").expect("built in");
        engine.component("read_file", bytes, &digest).unwrap();
        let (_, path) = engine.artifact(&digest).unwrap();
        (engine, path, bytes, digest)
    }

    /// Whether `engine` loads the artifact of `digest` from its cache as it is.
    fn loads(engine: &Engine, digest: &[u8; 32]) -> bool {
        let (name_hash, path) = engine.artifact(digest).unwrap();
        engine.load("read_file", &name_hash, &path).is_some()
    }

    #[test]
    fn the_on_demand_engine_loads_what_the_pooled_one_cached() {
        let dir = tempfile::tempdir().unwrap();
        let pooled = Engine::new(cache(dir.path())).unwrap();
        let on_demand = Engine::new_on_demand(cache(dir.path())).unwrap();
        let (bytes, digest) = crate::builtin::component("read_file").expect("built in");
        pooled.component("read_file", bytes, &digest).unwrap();
        assert_eq!(on_demand.artifact(&digest), pooled.artifact(&digest));
        assert!(loads(&on_demand, &digest), "the same compiled code");
    }

    #[test]
    fn the_key_is_made_once_private_and_then_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config/cordon/cache.key");
        let made = key(&path).unwrap();
        assert_eq!(key(&path).unwrap(), made);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
        std::fs::write(&path, "short").unwrap();
        assert!(key(&path).is_err(), "a damaged key is not used");
    }

    #[test]
    fn a_damaged_key_is_to_be_removed_and_a_key_that_cannot_be_made_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let damaged = dir.path().join("cache.key");
        std::fs::write(&damaged, "short").unwrap();
        assert!(matches!(key(&damaged), Err(KeyError::Unusable(_))));
        // Under a file, no directory can be made, whoever runs the test.
        let unmade = damaged.join("cordon/cache.key");
        assert!(matches!(key(&unmade), Err(KeyError::Unmade(_))));
    }

    #[test]
    fn keys_made_at_once_by_several_processes_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.key");
        let keys: Vec<_> = std::thread::scope(|s| {
            let made: Vec<_> = (0..8).map(|_| s.spawn(|| key(&path).unwrap())).collect();
            made.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(keys.iter().all(|k| *k == keys[0]), "one key wins");
    }

    #[test]
    fn a_changed_artifact_is_compiled_again_and_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, path, bytes, digest) = cached(dir.path());
        let good = std::fs::read(&path).unwrap();
        assert!(loads(&engine, &digest));
        for at in [0, KEY_LEN, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            std::fs::write(&path, &bad).unwrap();
            assert!(!loads(&engine, &digest), "a byte changed at {at}");
        }
        std::fs::write(&path, &good[..KEY_LEN - 1]).unwrap();
        assert!(!loads(&engine, &digest), "cut short");
        engine.component("read_file", bytes, &digest).unwrap();
        assert!(loads(&engine, &digest), "compiled again and overwritten");
    }

    #[test]
    fn an_artifact_made_under_another_key_or_name_is_not_loaded() {
        let (one, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (engine, path, _, digest) = cached(one.path());
        let (_, foreign, _, _) = cached(other.path());
        std::fs::copy(&foreign, &path).unwrap();
        assert!(!loads(&engine, &digest), "another key");

        // An authentic artifact of one component under the name of another.
        let (bytes, write_file) = crate::builtin::component("write_file").expect("built in");
        engine.component("write_file", bytes, &write_file).unwrap();
        let (_, write_path) = engine.artifact(&write_file).unwrap();
        std::fs::copy(&write_path, &path).unwrap();
        assert!(!loads(&engine, &digest), "another name");
    }

    #[test]
    fn what_is_checked_is_what_is_loaded_though_the_file_changes_after_its_check() {
        let dir = tempfile::tempdir().unwrap();
        let (engine, path, _, digest) = cached(dir.path());
        let (name_hash, _) = engine.artifact(&digest).unwrap();
        let key = &engine.cache.as_ref().unwrap().key;
        let code = Code::open(&path, key, &name_hash)
            .unwrap()
            .expect("authentic");
        let Code::Sealed(sealed) = &code else {
            panic!("a memory file can be made here, so the code is copied into one");
        };
        let seals = rustix::fs::fcntl_get_seals(sealed).unwrap();
        assert!(seals.contains(rustix::fs::SealFlags::WRITE | rustix::fs::SealFlags::SEAL));
        // The same file (inode), its every byte changed after the check.
        let mut changed = std::fs::read(&path).unwrap();
        changed.iter_mut().for_each(|b| *b = !*b);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .write_all(&changed)
            .unwrap();
        // SAFETY: authenticated above.
        let component = unsafe { code.deserialize(&engine.engine) }.expect("the checked code");
        assert!(component.component_type().exports(&engine.engine).count() > 0);
    }
}
