//! The built-in tools: components embedded in the binary, and what each is granted.

use std::sync::Arc;
use std::time::Duration;

use crate::grants::Grants;
use crate::resolve::Resolved;
use crate::sandbox::Shell;
use crate::spec::{Limits, Source, Spec};

include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));

/// What the built-in plugin `name` is granted under `options`; none when it is not loaded.
///
/// Each gets the least it needs: `read_file` reads the workspace; `write_file` and `edit_file`
/// read and write it; `bash` has no directory of its own, only the shell capability, whose
/// commands run under the kernel confinement of [`crate::sandbox`]; `read_skill` reads the skills
/// directory and nothing else.
pub fn grants(name: &str, resolved: &Resolved) -> Option<Grants> {
    let ws = &resolved.workspace;
    match name {
        "bash" => Some(Grants::none(ws).shell(Arc::new(Shell::new(resolved.shell.clone())))),
        "read_file" => resolved.edit_tools.then(|| Grants::none(ws).read(ws)),
        "write_file" | "edit_file" => resolved.edit_tools.then(|| Grants::none(ws).read_write(ws)),
        "read_skill" => resolved
            .skills
            .as_ref()
            .map(|dir| Grants::none(dir).read(dir)),
        _ => None,
    }
}

/// The built-in plugins to load under `options`, with their grants and limits.
pub fn specs(resolved: &Resolved) -> Vec<Spec> {
    NAMES
        .iter()
        .filter_map(|name| {
            let (bytes, digest) = component(name)?;
            Some(Spec {
                name: name.to_string(),
                source: Source::Builtin,
                bytes: bytes::Bytes::from_static(bytes),
                digest,
                grants: grants(name, resolved)?,
                limits: limits(name, resolved),
                tools: None,
            })
        })
        .collect()
}

/// Built-ins are trusted code, but still bounded: a pathological input must not hang or
/// exhaust the host. `bash` waits in the host for its command, so its deadline is the longest
/// a command may be given plus a margin for killing it.
fn limits(name: &str, resolved: &Resolved) -> Limits {
    let timeout = match name {
        "bash" => {
            Duration::from_secs(resolved.shell.max_timeout_secs().into()) + Duration::from_secs(10)
        }
        _ => Duration::from_secs(60),
    };
    Limits {
        timeout,
        memory: crate::engine::MAX_MEMORY,
    }
}
