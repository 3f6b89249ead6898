//! WASI's own file system calls, held to the workspace's protected paths.
//!
//! A plugin granted a read-write directory can change files through `wasi:filesystem`
//! directly (`std::fs` in Rust), not only through the `files` capability. wasmtime-wasi knows
//! only read-only and read-write per preopened directory, so the calls that change a path
//! are shadowed here: each checks the paths it changes against the [`Guard`], as named and as
//! resolved (every link followed, a dangling one to where it would create), then runs
//! wasmtime-wasi's own implementation. A refused call fails with `not-permitted`, which is
//! all the plugin sees; the refusal's text (the rule and the option that relaxes it) is kept
//! for the call's output, as the protection notice of a shell command is.
//!
//! The changing calls: `open-at` for writing, creating or truncating, `create-directory-at`,
//! `link-at` (both names: a hard link to a protected file would change it), `rename-at`
//! (both names; a git directory may not be moved at all, [`Guard::rule_for_move`]),
//! `symlink-at`, `unlink-file-at`, `remove-directory-at` and `set-times-at`. Writing to a
//! file needs a descriptor opened for writing, which only a checked `open-at` gives.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Host, HostDescriptor, NewTimestamp, OpenFlags, PathFlags,
};

use crate::sandbox::protect::{Guard, Protected, Rule};
use crate::state::State;

/// The interface wasmtime-wasi links (its WIT package's version); a plugin's import of any
/// 0.2 version resolves to it. The shadowing only takes effect under this exact name, which
/// the integration tests prove by a refused write.
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Links of a path followed before the call is refused as a loop, as Linux's `ELOOP`.
const MAX_LINKS: usize = 40;

/// The body of a shadowed call: the `changes` it makes checked (and the call refused with the
/// error of a refusal), then `op`, wasmtime-wasi's own call, run on its filesystem view.
macro_rules! checked {
    ($store:ident, $changes:expr, |$view:ident| $op:expr) => {
        Box::new(async move {
            if let Some(code) = refused($store.data_mut(), &$changes) {
                return Ok((Err(code),));
            }
            let mut $view = $store.data_mut().filesystem();
            let done = $op.await;
            lower(&mut $view, done)
        })
    };
}

/// Replaces wasmtime-wasi's changing `wasi:filesystem` calls by checked ones. Linked after
/// WASI, only for a plugin with a read-write directory in a guarded workspace.
pub(crate) fn add_to_linker(linker: &mut Linker<State>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (fd, follow, path, open, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            let writes = flags.contains(DescriptorFlags::WRITE)
                || open.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE);
            let follows = follow.contains(PathFlags::SYMLINK_FOLLOW);
            checked!(
                store,
                match writes {
                    true => vec![Change::write(&fd, &path, follows)],
                    false => Vec::new(),
                },
                |view| view.open_at(fd, follow, path, open, flags)
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store, (fd, path): (Resource<Descriptor>, String)| {
            // A new git directory is what `git init` makes, and its entries are protected
            // once it exists: only a `.git` file is a git link.
            checked!(
                store,
                [Change {
                    makes_dir: true,
                    ..Change::write(&fd, &path, false)
                }],
                |view| view.create_directory_at(fd, path)
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store,
         (fd, follow, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            let follows = follow.contains(PathFlags::SYMLINK_FOLLOW);
            checked!(
                store,
                [
                    Change::write(&fd, &old, follows),
                    Change::write(&new_fd, &new, false),
                ],
                |view| view.link_at(fd, follow, old, new_fd, new)
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store,
         (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            checked!(
                store,
                [Change::moved(&fd, &old), Change::moved(&new_fd, &new)],
                |view| view.rename_at(fd, old, new_fd, new)
            )
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store, (fd, target, path): (Resource<Descriptor>, String, String)| {
            checked!(store, [Change::write(&fd, &path, false)], |view| view
                .symlink_at(fd, target, path))
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.unlink-file-at",
        |mut store, (fd, path): (Resource<Descriptor>, String)| {
            checked!(store, [Change::moved(&fd, &path)], |view| view
                .unlink_file_at(fd, path))
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        |mut store, (fd, path): (Resource<Descriptor>, String)| {
            checked!(store, [Change::moved(&fd, &path)], |view| view
                .remove_directory_at(fd, path))
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-times-at",
        |mut store,
         (fd, follow, path, accessed, modified): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        )| {
            let follows = follow.contains(PathFlags::SYMLINK_FOLLOW);
            checked!(store, [Change::write(&fd, &path, follows)], |view| view
                .set_times_at(fd, follow, path, accessed, modified))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// One path a call changes: `path` beneath the directory `fd`.
struct Change<'a> {
    fd: &'a Resource<Descriptor>,
    path: &'a str,
    /// Whether the call follows a link in the last component.
    follows: bool,
    /// Whether the path is moved or removed (a git directory may not be), not written.
    moves: bool,
    /// Whether the call makes a directory there.
    makes_dir: bool,
}

impl<'a> Change<'a> {
    fn write(fd: &'a Resource<Descriptor>, path: &'a str, follows: bool) -> Self {
        Change {
            fd,
            path,
            follows,
            moves: false,
            makes_dir: false,
        }
    }

    fn moved(fd: &'a Resource<Descriptor>, path: &'a str) -> Self {
        Change {
            fd,
            path,
            follows: false,
            moves: true,
            makes_dir: false,
        }
    }
}

/// The error a call that makes one of `changes` fails with, if one is refused; its text is
/// kept in `state` for the call's output.
fn refused(state: &mut State, changes: &[Change]) -> Option<ErrorCode> {
    let guard = state.grants.guard.clone()?;
    for change in changes {
        // A descriptor that is not a directory fails in wasmtime-wasi's own call.
        let Ok(Descriptor::Dir(dir)) = state.ctx().table.get(change.fd) else {
            continue;
        };
        match protection(&guard, &dir.dir, change) {
            Ok(None) => {}
            Ok(Some(protected)) => {
                state.protected.push(guard.refusal(&protected));
                return Some(ErrorCode::NotPermitted);
            }
            // The call would fail the same way: the resolution is cap-std's, as the call's.
            Err(e) => return Some(ErrorCode::from(&e)),
        }
    }
    None
}

/// The protection that covers `change` beneath `dir`, as named and as resolved.
fn protection(
    guard: &Guard,
    dir: &std::fs::File,
    change: &Change,
) -> io::Result<Option<Protected>> {
    let rule = |path: &Path| {
        let protected = if change.moves {
            guard.rule_for_move(path)
        } else {
            guard.rule_for(path)
        };
        protected
            .filter(|p| !(change.makes_dir && matches!(p.rule, Rule::GitLink | Rule::GitNest(_))))
    };
    // The directory's real path, whatever the plugin opened it as.
    let base = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    let named = Path::new(change.path);
    if let Some(protected) = rule(&base.join(named)) {
        return Ok(Some(protected));
    }
    let handle = cap_std::fs::Dir::from_std_file(dir.try_clone()?);
    Ok(rule(&base.join(resolve(&handle, named, change.follows)?)))
}

/// `path` beneath `dir` as the call will find it, relative to `dir`: its parent canonical,
/// and its last component followed too when the call follows links, a dangling link to where
/// the call would create its file.
fn resolve(dir: &cap_std::fs::Dir, path: &Path, follows: bool) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let Some(name) = path.file_name().map(ToOwned::to_owned) else {
            // `.`, `..`: a directory, which must exist.
            return dir.canonicalize(&path);
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => dir.canonicalize(p)?,
            _ => PathBuf::new(),
        };
        let here = parent.join(name);
        match dir.symlink_metadata(&here) {
            Ok(meta) if follows && meta.is_symlink() => path = parent.join(dir.read_link(&here)?),
            _ => return Ok(here),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// wasmtime-wasi's result as the component's: an error code, or a trap.
fn lower<T>(
    view: &mut WasiFilesystemCtxView<'_>,
    done: FsResult<T>,
) -> wasmtime::Result<(Result<T, ErrorCode>,)> {
    match done {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => Ok((Err(view.convert_error_code(e)?),)),
    }
}
