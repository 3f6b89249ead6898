//! `breakdown` (only when asked for: `-- breakdown`): where the in-process start-up time goes,
//! warm cache: the engine, each built-in's cache check, deserialization and load, and
//! `Runtime::new` as a whole. Information only; it adds no rows to the report.

use cordon::Runtime;
use cordon::engine::{Cache, Engine};
use cordon::plugin::Plugin;

use crate::fixture::Dirs;
use crate::harness::{print_samples, repeated, samples};
use crate::in_process;

pub(crate) fn run(dirs: &Dirs) {
    println!("\n# Start-up breakdown (in-process, warm cache)");
    let async_runtime = in_process::async_runtime();
    let resolved = dirs.options().resolve().unwrap();
    let n = samples(30);
    let time = |what: &str, f: &mut dyn FnMut()| {
        print_samples(what, &repeated(n, f));
    };
    let cache = || {
        Some(Cache {
            dir: dirs.cache.clone(),
            key: resolved.cache_key.clone().expect("a config directory"),
        })
    };
    time("Engine::new (pooling allocator, epoch thread)", &mut || {
        drop(Engine::new(cache()).unwrap());
    });
    let engine = Engine::new(cache()).unwrap();
    let specs = cordon::builtin::specs(&resolved);
    for spec in &specs {
        time(
            &format!("{}: is_cached ({} KiB)", spec.name, spec.bytes.len() >> 10),
            &mut || assert!(engine.is_cached(&spec.digest)),
        );
        time(
            &format!("{}: component (deserialize)", spec.name),
            &mut || {
                drop(
                    engine
                        .component(&spec.name, &spec.bytes, &spec.digest)
                        .unwrap(),
                );
            },
        );
        let compiled = engine
            .component(&spec.name, &spec.bytes, &spec.digest)
            .unwrap();
        time(&format!("{}: Plugin::load", spec.name), &mut || {
            let plugin = async_runtime.block_on(Plugin::load(
                &engine,
                &spec.name,
                spec.source.clone(),
                compiled.clone(),
                spec.grants.clone(),
                spec.limits,
            ));
            drop(plugin.unwrap());
        });
    }
    time("Runtime::new (everything)", &mut || {
        drop(
            async_runtime
                .block_on(Runtime::new(dirs.options()))
                .unwrap(),
        );
    });
}
