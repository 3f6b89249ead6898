//! A layer's stack: frozen levels under its live upper directory, which make checkpoints,
//! rollback and forks cost a rename or a few links, never a copy.
//!
//! A checkpoint renames the upper directory to a level (`levels/<id>` of the layer, listed in
//! its `stack` file, see [`crate::sandbox::layer::STACK`]) and starts an empty one; a rollback
//! drops the levels above the checkpoint's and empties the upper directory; a fork is a new
//! layer whose stack lists the same levels. overlayfs stacks them between the workspace and
//! the upper directory, and [`super::changes`] merges them as it does.
//!
//! A level is shared, never copied, so who uses it is counted by hard links: each level has
//! an anchor file (`levels/<id>.ref`) and each layer whose stack lists it a link to that
//! anchor (`refs/<id>`). A level is removed with its last link; a discarded layer whose levels
//! forks still use leaves only those behind (its directory then holds `levels/` alone).

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{LayerError, UPPER, WORKSPACE, io_at, is_opaque, lock, opened_up};
use crate::sandbox::layer::STACK;

/// The file of a layer's checkpoints: `LABEL<tab>DEPTH` a line, DEPTH the levels below it.
const CHECKPOINTS: &str = "checkpoints";
/// The levels a layer froze, with their anchors.
pub(super) const LEVELS: &str = "levels";
/// A layer's links to the anchors of the levels it stacks.
const REFS: &str = "refs";

/// The most levels a stack holds: overlayfs takes its lower directories in one mount option
/// of at most a page (4096 bytes), and each level is a path of about 100 bytes. Past it, the
/// two lowest levels are merged, and the checkpoint between them is dropped.
pub const MAX_LEVELS: usize = 24;

/// A named state of a layer: the levels below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub label: String,
    pub depth: usize,
}

/// The frozen levels of the layer at `dir`, the lowest first.
pub fn levels(dir: &Path) -> Result<Vec<PathBuf>, LayerError> {
    Ok(lines(dir, STACK)?.into_iter().map(PathBuf::from).collect())
}

/// The checkpoints of the layer at `dir`, the oldest first.
pub fn checkpoints(dir: &Path) -> Result<Vec<Checkpoint>, LayerError> {
    let mut all = Vec::new();
    for line in lines(dir, CHECKPOINTS)? {
        let (label, depth) = line.split_once('\t').unwrap_or((&line, ""));
        let depth = depth.parse().map_err(|_| {
            io_at("read the checkpoints of", dir)(io::Error::other(format!("bad line {line:?}")))
        })?;
        all.push(Checkpoint {
            label: label.to_string(),
            depth,
        });
    }
    Ok(all)
}

fn lines(dir: &Path, name: &str) -> Result<Vec<String>, LayerError> {
    match fs::read_to_string(dir.join(name)) {
        Ok(text) => Ok(text.lines().map(str::to_string).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_at("read the layer", dir)(e)),
    }
}

/// Writes the file `name` of `dir` whole, under a temporary name renamed over it.
fn write(dir: &Path, name: &str, lines: impl IntoIterator<Item = String>) -> io::Result<()> {
    let text: String = lines.into_iter().map(|l| l + "\n").collect();
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    fs::write(&tmp, text)?;
    fs::rename(&tmp, dir.join(name))
}

fn write_stack(dir: &Path, levels: &[PathBuf]) -> Result<(), LayerError> {
    let lines = levels.iter().map(|l| l.display().to_string());
    write(dir, STACK, lines).map_err(io_at("update the layer", dir))
}

fn write_checkpoints(dir: &Path, all: &[Checkpoint]) -> Result<(), LayerError> {
    let lines = all.iter().map(|c| format!("{}\t{}", c.label, c.depth));
    write(dir, CHECKPOINTS, lines).map_err(io_at("update the layer", dir))
}

/// A name no other level has: the time, the process and a counter.
fn new_id() -> String {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{nanos:x}-{:x}-{count:x}", std::process::id())
}

fn anchor(level: &Path) -> PathBuf {
    let id = level.file_name().unwrap_or_default().to_string_lossy();
    level.with_file_name(format!("{id}.ref"))
}

fn link_of(dir: &Path, level: &Path) -> PathBuf {
    dir.join(REFS).join(level.file_name().unwrap_or_default())
}

/// How many layers stack `level`.
fn users(level: &Path) -> io::Result<u64> {
    Ok(fs::metadata(anchor(level))?.nlink() - 1)
}

/// Makes the layer at `dir` a user of `level`.
fn take(dir: &Path, level: &Path) -> io::Result<()> {
    fs::create_dir_all(dir.join(REFS))?;
    fs::hard_link(anchor(level), link_of(dir, level))
}

/// Ends the use of `level` by the layer at `dir`; the last user removes it, and the directory
/// of a discarded layer that held it once it holds no level.
fn release(dir: &Path, level: &Path) -> io::Result<()> {
    match fs::remove_file(link_of(dir, level)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    // Removed only when it is known that nobody else stacks it.
    match users(level) {
        Ok(0) => {}
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    }
    if level.exists() {
        let _ = opened_up(level);
        fs::remove_dir_all(level)?;
    }
    fs::remove_file(anchor(level))?;
    let (Some(levels), Some(owner)) = (level.parent(), level.parent().and_then(Path::parent))
    else {
        return Ok(());
    };
    if !owner.join(WORKSPACE).exists() && fs::remove_dir(levels).is_ok() {
        let _ = fs::remove_dir(owner);
    }
    Ok(())
}

/// Replaces the upper directory of the layer at `dir` by what `change` leaves at its path
/// (given it), with the permissions it had: the merged tree's root shows them.
fn renew_upper(dir: &Path, change: impl FnOnce(&Path) -> io::Result<()>) -> Result<(), LayerError> {
    let upper = dir.join(UPPER);
    let mode = fs::metadata(&upper).map_err(io_at("read", &upper))?.mode();
    change(&upper)
        .and_then(|()| fs::set_permissions(&upper, fs::Permissions::from_mode(mode & 0o7777)))
        .map_err(io_at("replace", &upper))
}

/// Whether nothing was written in the layer since its last level was frozen.
pub(super) fn upper_empty(dir: &Path) -> Result<bool, LayerError> {
    let upper = dir.join(UPPER);
    let mut entries = fs::read_dir(&upper).map_err(|_| LayerError::Missing(dir.into()))?;
    Ok(entries.next().is_none())
}

/// Freezes the upper directory of the layer at `dir` (locked, not mounted) as its top level,
/// unless it is empty, and starts an empty one. Returns the stack.
fn freeze(dir: &Path) -> Result<Vec<PathBuf>, LayerError> {
    let mut stack = levels(dir)?;
    if upper_empty(dir)? {
        return Ok(stack);
    }
    if stack.len() >= MAX_LEVELS {
        squash_lowest(dir, &mut stack)?;
    }
    let level = dir.join(LEVELS).join(new_id());
    fs::create_dir_all(dir.join(LEVELS))
        .and_then(|()| fs::write(anchor(&level), ""))
        .and_then(|()| take(dir, &level))
        .map_err(io_at("freeze the layer", dir))?;
    renew_upper(dir, |upper| {
        fs::rename(upper, &level).and_then(|()| fs::create_dir(upper))
    })?;
    stack.push(level);
    write_stack(dir, &stack)?;
    Ok(stack)
}

/// Merges the two lowest levels of `stack` when only this layer uses them, and drops the
/// checkpoints between them; else the stack is as deep as it may be.
fn squash_lowest(dir: &Path, stack: &mut Vec<PathBuf>) -> Result<(), LayerError> {
    let private = |level: &Path| users(level).is_ok_and(|n| n == 1);
    if !(private(&stack[0]) && private(&stack[1])) {
        return Err(LayerError::TooDeep(dir.into(), stack.len()));
    }
    let (low, high) = (stack[0].clone(), stack.remove(1));
    merge_into(&low, &high).map_err(io_at("merge the levels of", dir))?;
    release(dir, &high).map_err(io_at("merge the levels of", dir))?;
    write_stack(dir, stack)?;
    let kept = checkpoints(dir)?
        .into_iter()
        .filter(|c| c.depth != 1)
        .map(|c| Checkpoint {
            depth: c.depth.saturating_sub(usize::from(c.depth > 1)),
            ..c
        })
        .collect::<Vec<_>>();
    write_checkpoints(dir, &kept)
}

/// Moves what `top` holds into `base`, as overlayfs shows `top` over `base`: a whiteout, a
/// file or an opaque directory replaces what is below it, another directory merges with one.
fn merge_into(base: &Path, top: &Path) -> io::Result<()> {
    // Entries move out of `top` and into `base`, which a command may have made read-only.
    let writable = |dir: &Path| -> io::Result<fs::Permissions> {
        let was = fs::symlink_metadata(dir)?.permissions();
        fs::set_permissions(dir, fs::Permissions::from_mode(was.mode() | 0o700))?;
        Ok(was)
    };
    let was = writable(base)?;
    writable(top)?;
    for entry in fs::read_dir(top)? {
        let entry = entry?;
        let (from, to) = (entry.path(), base.join(entry.file_name()));
        let meta = fs::symlink_metadata(&from)?;
        let there = fs::symlink_metadata(&to).ok();
        if meta.is_dir() && !is_opaque(&from) && there.as_ref().is_some_and(|m| m.is_dir()) {
            merge_into(&to, &from)?;
            fs::set_permissions(&to, meta.permissions())?;
            continue;
        }
        match there {
            Some(m) if m.is_dir() => {
                opened_up(&to)?;
                fs::remove_dir_all(&to)?
            }
            Some(_) => fs::remove_file(&to)?,
            None => {}
        }
        fs::rename(&from, &to)?;
    }
    fs::set_permissions(base, was)
}

/// Takes a checkpoint of the layer at `dir`, named `label` (the next free number when none),
/// and returns its label. The layer must not be mounted: the caller holds its lock, or is the
/// session whose keeper unmounted it.
pub fn checkpoint_unmounted(dir: &Path, label: Option<&str>) -> Result<String, LayerError> {
    let all = checkpoints(dir)?;
    let label = match label {
        Some(label) => {
            if !super::plain_name(label) {
                return Err(LayerError::Label(label.into()));
            }
            if all.iter().any(|c| c.label == label) {
                return Err(LayerError::LabelTaken(label.into()));
            }
            label.to_string()
        }
        None => (all.len() + 1..)
            .map(|n| n.to_string())
            .find(|n| all.iter().all(|c| &c.label != n))
            .expect("a free number"),
    };
    let depth = freeze(dir)?.len();
    // Read again: freezing may have merged the lowest levels, and dropped a checkpoint.
    let mut all = checkpoints(dir)?;
    all.retain(|c| c.depth <= depth);
    all.push(Checkpoint {
        label: label.clone(),
        depth,
    });
    write_checkpoints(dir, &all)?;
    Ok(label)
}

/// Takes a checkpoint of the layer at `dir`, which no cordon may be using.
pub fn checkpoint(dir: &Path, label: Option<&str>) -> Result<String, LayerError> {
    let _lock = lock(dir)?;
    checkpoint_unmounted(dir, label)
}

/// Brings the layer at `dir` back to the checkpoint `label`: the levels above it are dropped
/// and the upper directory emptied. Unmounted, as [`checkpoint_unmounted`].
pub fn rollback_unmounted(dir: &Path, label: &str) -> Result<(), LayerError> {
    let (all, depth) = find(dir, label)?;
    let kept = all.into_iter().filter(|c| c.depth <= depth).collect();
    keep(dir, depth, kept)
}

/// The checkpoints of the layer at `dir`, and the depth of the one labelled `label`.
pub(super) fn find(dir: &Path, label: &str) -> Result<(Vec<Checkpoint>, usize), LayerError> {
    let all = checkpoints(dir)?;
    match all.iter().find(|c| c.label == label).map(|c| c.depth) {
        Some(depth) => Ok((all, depth)),
        None => Err(LayerError::NoCheckpoint {
            label: label.into(),
            layer: dir.into(),
        }),
    }
}

/// Drops every change and checkpoint of the layer at `dir`, which then shows the workspace as
/// it is. Unmounted, as [`checkpoint_unmounted`].
pub(super) fn empty_unmounted(dir: &Path) -> Result<(), LayerError> {
    keep(dir, 0, Vec::new())
}

/// Keeps the lowest `depth` levels of the layer at `dir` and the checkpoints `kept`, and
/// empties its upper directory.
fn keep(dir: &Path, depth: usize, kept: Vec<Checkpoint>) -> Result<(), LayerError> {
    let mut stack = levels(dir)?;
    let dropped = stack.split_off(depth.min(stack.len()));
    write_stack(dir, &stack)?;
    write_checkpoints(dir, &kept)?;
    renew_upper(dir, |upper| {
        let _ = opened_up(upper);
        fs::remove_dir_all(upper).and_then(|()| fs::create_dir(upper))
    })?;
    for level in dropped.iter().rev() {
        release(dir, level).map_err(io_at("drop a level of", dir))?;
    }
    Ok(())
}

/// Rolls the layer at `dir`, which no cordon may be using, back to the checkpoint `label`.
pub fn rollback(dir: &Path, label: &str) -> Result<(), LayerError> {
    let _lock = lock(dir)?;
    rollback_unmounted(dir, label)
}

/// Makes the layer `new` from the current state of the layer at `dir`, sharing its levels,
/// after freezing its upper directory (which needs the layer unmounted: `unmounted`). The
/// fork keeps the checkpoints; `new` must be free (`free`).
pub fn fork_unmounted(dir: &Path, new: &Path) -> Result<(), LayerError> {
    let stack = freeze(dir)?;
    make_fork(dir, new, &stack)
}

/// Forks the layer at `dir`, which no cordon may be using, into `new`.
pub fn fork(dir: &Path, new: &Path) -> Result<(), LayerError> {
    super::workspace_of(dir)?;
    free(new)?;
    let _lock = lock(dir)?;
    fork_unmounted(dir, new)
}

/// Refuses a fork's directory that is a layer or holds something else.
pub(super) fn free(new: &Path) -> Result<(), LayerError> {
    if new.join(WORKSPACE).exists() {
        return Err(LayerError::Exists(new.into()));
    }
    let holds = fs::read_dir(new).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name() != std::ffi::OsStr::new(LEVELS))
    });
    if holds {
        return Err(LayerError::NotALayer(new.into()));
    }
    Ok(())
}

/// Makes the fork `new` of `dir` over `stack` (`new` found [`free`] first); a fork that fails
/// leaves nothing.
fn make_fork(dir: &Path, new: &Path, stack: &[PathBuf]) -> Result<(), LayerError> {
    stack_onto(dir, new, stack).inspect_err(|_| {
        let _ = release_all(new);
        let _ = fs::remove_dir_all(new);
    })
}

fn stack_onto(dir: &Path, new: &Path, stack: &[PathBuf]) -> Result<(), LayerError> {
    super::make_private(new)?;
    fs::create_dir(new.join(UPPER)).map_err(io_at("create the fork", new))?;
    for level in stack {
        take(new, level).map_err(|e| match e.raw_os_error() {
            Some(libc::EXDEV) => LayerError::OtherFileSystem(new.into(), dir.into()),
            _ => io_at("create the fork", new)(e),
        })?;
    }
    write_stack(new, stack)?;
    write_checkpoints(new, &checkpoints(dir)?)?;
    // Written last: with it the directory is a layer.
    fs::copy(dir.join(WORKSPACE), new.join(WORKSPACE)).map_err(io_at("create the fork", new))?;
    Ok(())
}

/// The levels of the layer at `dir` that another layer (a fork, or the layer it was forked
/// from) stacks too.
pub fn shared(dir: &Path) -> Result<bool, LayerError> {
    let stack = levels(dir)?;
    Ok(stack.iter().any(|l| users(l).is_ok_and(|n| n > 1)))
}

/// Merges the levels of the layer at `dir` (locked, its levels its own) into its upper
/// directory and drops its checkpoints, which lay over the workspace as it was.
pub(super) fn flatten(dir: &Path) -> Result<(), LayerError> {
    let stack = levels(dir)?;
    let Some(base) = stack.first() else {
        return Ok(());
    };
    let upper = dir.join(UPPER);
    for top in stack[1..].iter().chain([&upper]) {
        merge_into(base, top).map_err(io_at("merge the levels of", dir))?;
    }
    renew_upper(dir, |upper| {
        fs::remove_dir_all(upper).and_then(|()| fs::rename(base, upper))
    })?;
    write_stack(dir, &[])?;
    write_checkpoints(dir, &[])?;
    for level in &stack {
        release(dir, level).map_err(io_at("merge the levels of", dir))?;
    }
    Ok(())
}

/// Ends the layer at `dir`'s use of its levels, before it is removed. Returns whether levels
/// it froze are still used by forks (its directory must then keep `levels/`).
pub(super) fn release_all(dir: &Path) -> Result<bool, LayerError> {
    for level in levels(dir)? {
        release(dir, &level).map_err(io_at("drop a level of", dir))?;
    }
    let kept = fs::read_dir(dir.join(LEVELS)).is_ok_and(|mut e| e.next().is_some());
    Ok(kept)
}
