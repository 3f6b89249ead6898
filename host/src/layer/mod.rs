//! Workspaces in layers: bash and the file tools see the workspace through one copy-on-write
//! layer kept under cordon's data directory (an overlayfs mount held by a keeper process, see
//! [`crate::sandbox::layer`]), and the user's tree changes only when the layer is accepted.
//!
//! What a layer holds is its upper directory: a changed or new file is there whole, a deleted
//! one is a whiteout (a character device 0/0), a directory that replaced one is marked opaque.
//! [`changes`] walks that directory, never the workspace, so diff and accept cost what changed.
//! A change to a protected path ([`Guard`]) is judged when it is accepted.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

mod control;
mod live;
pub mod op;
pub mod patch;
pub mod stack;

use control::SOCKET;
pub use control::apply;
pub use live::Live;
pub use op::{Accept, Done, Op};

use crate::sandbox::Policy;
use crate::sandbox::layer::{Keeper, UPPER};
use crate::sandbox::protect::Guard;

/// The file in a layer's directory that names the workspace it lies over.
const WORKSPACE: &str = "workspace";

/// What went wrong with a layer.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error(
        "cannot use {0:?} as a layer name: use letters, digits, '.', '_' and '-' (not first '.'), \
         or a path with a '/'"
    )]
    Name(String),
    #[error("no data directory for layers: set XDG_DATA_HOME or HOME, or name the layer by a path")]
    NoDataDir,
    #[error("there is no layer {0} (it was never used, or was discarded)")]
    Missing(PathBuf),
    #[error("{0} is not a layer and not empty; name a new or empty directory, or a layer")]
    NotALayer(PathBuf),
    #[error(
        "the layer {layer} lies over {theirs}, not over {ours}; use another layer name for this \
         workspace"
    )]
    OtherWorkspace {
        layer: PathBuf,
        theirs: PathBuf,
        ours: PathBuf,
    },
    #[error(
        "a layer needs the confined bash (its commands see the layer in their own view); {} \
         would write the real workspace",
        crate::sandbox::setting::Setting::Unconfined
    )]
    Unconfined,
    #[error("the layered workspace is unavailable: {0}")]
    Mount(#[from] crate::sandbox::layer::KeeperError),
    #[error(
        "the layer {0} is in use by a cordon that is starting or ending (it did not answer on \
         {socket} in the layer's directory); try again in a moment",
        socket = SOCKET
    )]
    Busy(PathBuf),
    /// What the running cordon that holds the layer answered ([`apply`]).
    #[error("{0}")]
    Answered(String),
    #[error("{0} is a layer already; name a new layer for the fork")]
    Exists(PathBuf),
    #[error(
        "cannot fork into {0}: a fork shares the levels of {1}, so it must be on the same file \
         system; name the fork by a name, or by a path beside the layer"
    )]
    OtherFileSystem(PathBuf, PathBuf),
    #[error(
        "cannot use {0:?} as a checkpoint label: use letters, digits, '.', '_' and '-' (not \
         first '.')"
    )]
    Label(String),
    #[error("there is a checkpoint {0:?} already; choose another label")]
    LabelTaken(String),
    #[error(
        "there is no checkpoint {label:?} in the layer {layer}; `cordon layer checkpoints` \
         lists them"
    )]
    NoCheckpoint { label: String, layer: PathBuf },
    #[error(
        "the layer {0} has {1} levels, the most overlayfs can stack, and the lowest are shared \
         with forks; roll back to an earlier checkpoint, or discard the forks"
    )]
    TooDeep(PathBuf, usize),
    #[error(
        "the layer {0} shares its levels with forks (or with the layer it was forked from): \
         accepting would change the workspace under them; take its changes as a patch \
         (`cordon layer diff` piped to `git apply`), or discard the other layers first"
    )]
    Shared(PathBuf),
    #[error("no change in the layer at {0}")]
    NoChange(String),
    #[error("refused, nothing was accepted: {}", .0.join("; "))]
    Protected(Vec<String>),
    #[error("cannot {doing} {}: {source}", path.display())]
    Io {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_at(doing: &'static str, path: &Path) -> impl FnOnce(io::Error) -> LayerError {
    let path = path.to_path_buf();
    move |source| LayerError::Io {
        doing,
        path,
        source,
    }
}

/// The directory of the layer `name`: a path (it has a `/`) as given, else
/// `<data dir>/layers/<name>`.
pub fn dir(name: &str) -> Result<PathBuf, LayerError> {
    if name.contains('/') {
        return std::path::absolute(name).map_err(|_| LayerError::Name(name.into()));
    }
    if !plain_name(name) {
        return Err(LayerError::Name(name.into()));
    }
    Ok(layers_dir().ok_or(LayerError::NoDataDir)?.join(name))
}

/// Whether `text` may name a layer or a checkpoint: letters, digits, '.', '_' and '-', not
/// first '.'.
fn plain_name(text: &str) -> bool {
    let fits = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    !text.is_empty() && !text.starts_with('.') && text.chars().all(fits)
}

/// The directory of the layers named by a name: `<data dir>/layers`.
pub fn layers_dir() -> Option<PathBuf> {
    crate::config::data_dir().map(|data| data.join("layers"))
}

/// The workspace the layer at `dir` lies over.
pub fn workspace_of(dir: &Path) -> Result<PathBuf, LayerError> {
    let text = fs::read(dir.join(WORKSPACE)).map_err(|_| LayerError::Missing(dir.into()))?;
    Ok(PathBuf::from(OsString::from_vec(text)))
}

/// Mounts the layer at `dir` over `workspace` and points the bash of `shell` at it. The
/// keeper lives as long as what is returned.
pub fn start(dir: &Path, workspace: &Path, shell: &mut Policy) -> Result<Live, LayerError> {
    if shell.unconfined {
        return Err(LayerError::Unconfined);
    }
    let dir = dir.to_path_buf();
    match workspace_of(&dir) {
        Ok(theirs) if theirs != workspace => {
            return Err(LayerError::OtherWorkspace {
                layer: dir,
                theirs,
                ours: workspace.to_path_buf(),
            });
        }
        Ok(_) => {}
        Err(_) => {
            // A directory named by path is the layer's own: nothing else may be in it, but
            // the levels a discarded layer left to its forks.
            stack::free(&dir)?;
            make(&dir, workspace)?;
        }
    }
    let keeper = mount(&shell.helper, workspace, &dir)?;
    shell.layer = Some(keeper.socket());
    Live::serve(keeper, dir, workspace.to_path_buf())
}

/// Makes the directory `dir` a layer over `workspace`.
fn make(dir: &Path, workspace: &Path) -> Result<(), LayerError> {
    make_private(dir)?;
    let text = workspace.as_os_str().as_encoded_bytes();
    fs::write(dir.join(WORKSPACE), text).map_err(io_at("create the layer", dir))
}

/// Makes the directory of a layer, which only its owner may enter: its sockets hand out its
/// tree and take operations on it.
fn make_private(dir: &Path) -> Result<(), LayerError> {
    if let Some(parent) = dir.parent() {
        fs::create_dir_all(parent).map_err(io_at("create the layer", dir))?;
    }
    fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .or_else(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(e),
        })
        .map_err(io_at("create the layer", dir))
}

/// The layer's changes as a unified diff, or `git diff --stat`'s summary.
fn diff(dir: &Path, workspace: &Path, stat: bool) -> Result<String, LayerError> {
    let changes = changes(dir, workspace)?;
    patch::of(workspace, &changes, stat).map_err(io_at("read the layer", dir))
}

/// Starts the keeper of the layer at `dir` over `workspace`.
pub fn mount(helper: &Path, workspace: &Path, dir: &Path) -> Result<Keeper, LayerError> {
    Ok(Keeper::start(helper, workspace, dir)?)
}

/// Points the directory grants of `specs` inside the workspace at the layer's merged tree:
/// they keep their paths, and are opened there.
pub fn redirect(specs: &mut [crate::spec::Spec], workspace: &Path, merged: &Path) {
    let dirs = specs.iter_mut().flat_map(|s| s.grants.dirs.iter_mut());
    for dir in dirs {
        if let Ok(rel) = dir.path.strip_prefix(workspace) {
            dir.source = Some(merged.join(rel));
        }
    }
}

/// What became of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One changed file (or symbolic link) of a layer, relative to the workspace.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Change {
    #[serde(with = "op::path")]
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// The layer's version of the file: in its upper directory or in a frozen level (none
    /// for a deletion). Not told to another process: a path inside the layer's directory.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// The changes of the layer at `dir` against `workspace`, by path: its upper directory and
/// frozen levels walked, the workspace looked up only where the layer has something.
pub fn changes(dir: &Path, workspace: &Path) -> Result<Vec<Change>, LayerError> {
    let upper = dir.join(UPPER);
    if !upper.is_dir() {
        return Err(LayerError::Missing(dir.into()));
    }
    let levels = stack::levels(dir)?;
    let mut tops = vec![upper.as_path()];
    tops.extend(levels.iter().rev().map(PathBuf::as_path));
    let mut found = BTreeMap::new();
    walk(&tops, workspace, Path::new(""), &mut found).map_err(io_at("read the layer", dir))?;
    Ok(found.into_values().collect())
}

/// Walks `rel` in `tops` (the layer's directories that show at `rel`, the highest first),
/// as overlayfs merges them: at each name the highest that has it decides; a directory also
/// shows the directories below it, down to one that is opaque or a name that is not one.
fn walk(
    tops: &[&Path],
    lower: &Path,
    rel: &Path,
    found: &mut BTreeMap<PathBuf, Change>,
) -> io::Result<()> {
    let mut names = std::collections::BTreeSet::new();
    for top in tops {
        for entry in fs::read_dir(top.join(rel))? {
            names.insert(entry?.file_name());
        }
    }
    for name in names {
        let path = rel.join(name);
        let mut first: Option<(&Path, fs::Metadata)> = None;
        let mut dirs = Vec::new();
        // Whether the layer hides the workspace's directory at `path`.
        let mut hides = false;
        for &top in tops {
            let Ok(meta) = fs::symlink_metadata(top.join(&path)) else {
                continue;
            };
            if !meta.is_dir() {
                if first.is_none() {
                    first = Some((top, meta));
                } else {
                    hides = true;
                }
                break;
            }
            dirs.push(top);
            let opaque = is_opaque(&top.join(&path));
            first.get_or_insert((top, meta));
            if opaque {
                hides = true;
                break;
            }
        }
        let Some((top, meta)) = first else { continue };
        let below = fs::symlink_metadata(lower.join(&path)).ok();
        let below_dir = below.as_ref().is_some_and(|m| m.is_dir());
        if is_whiteout(&meta) {
            deleted(lower, &path, found)?;
        } else if meta.is_dir() {
            if below.is_some() && !below_dir {
                found.insert(path.clone(), gone(&path));
            } else if below_dir && hides {
                deleted(lower, &path, found)?;
            }
            walk(&dirs, lower, &path, found)?;
        } else {
            if below_dir {
                deleted(lower, &path, found)?;
            }
            let source = top.join(&path);
            let kind = match below {
                Some(m) if !m.is_dir() => {
                    if same(&source, &lower.join(&path))? {
                        found.remove(&path);
                        continue;
                    }
                    ChangeKind::Modified
                }
                _ => ChangeKind::Added,
            };
            let source = Some(source);
            found.insert(path.clone(), Change { path, kind, source });
        }
    }
    Ok(())
}

fn gone(path: &Path) -> Change {
    Change {
        path: path.to_path_buf(),
        kind: ChangeKind::Deleted,
        source: None,
    }
}

/// Marks every file at or below `rel` of `lower` deleted (what is written over them later
/// turns them into changes).
fn deleted(lower: &Path, rel: &Path, found: &mut BTreeMap<PathBuf, Change>) -> io::Result<()> {
    let Ok(meta) = fs::symlink_metadata(lower.join(rel)) else {
        return Ok(());
    };
    if !meta.is_dir() {
        found.insert(rel.to_path_buf(), gone(rel));
        return Ok(());
    }
    for entry in fs::read_dir(lower.join(rel))? {
        deleted(lower, &rel.join(entry?.file_name()), found)?;
    }
    Ok(())
}

fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether overlayfs marked the directory opaque (it replaced a deleted one): `trusted.` as
/// root mounts it, `user.` in a user namespace.
fn is_opaque(dir: &Path) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| rustix::fs::lgetxattr(dir, *name, &mut [0u8; 4]).is_ok_and(|n| n > 0))
}

/// Whether two files (or links) have the same type, permission bits and contents.
fn same(a: &Path, b: &Path) -> io::Result<bool> {
    let (ma, mb) = (fs::symlink_metadata(a)?, fs::symlink_metadata(b)?);
    if ma.file_type().is_symlink() || mb.file_type().is_symlink() {
        return Ok(ma.file_type() == mb.file_type() && fs::read_link(a)? == fs::read_link(b)?);
    }
    Ok(ma.permissions().mode() == mb.permissions().mode()
        && ma.len() == mb.len()
        && fs::read(a)? == fs::read(b)?)
}

/// The layer at `dir`, locked against a keeper for as long as the lock lives.
pub fn lock(dir: &Path) -> Result<File, LayerError> {
    // Its lock file is made by its first keeper: a fork never used has none yet.
    workspace_of(dir)?;
    match crate::sandbox::layer::lock(dir, true) {
        Ok(Some(file)) => Ok(file),
        Ok(None) => Err(LayerError::Busy(dir.into())),
        Err(e) => Err(io_at("lock the layer", dir)(e)),
    }
}

/// The changes of the layer at `dir` at or below `paths` (all when none; relative to
/// `workspace`, or in it), each with the refusal's text when a protected path that `unprotect`
/// does not relax: what an accept of them would take, or refuse.
pub fn judged(
    dir: &Path,
    workspace: &Path,
    paths: &[PathBuf],
    unprotect: &[PathBuf],
) -> Result<Vec<(Change, Option<String>)>, LayerError> {
    let all = changes(dir, workspace)?;
    let rel = |p: &PathBuf| p.strip_prefix(workspace).unwrap_or(p).to_path_buf();
    let paths: Vec<PathBuf> = paths.iter().map(rel).collect();
    if let Some(p) = paths
        .iter()
        .find(|p| !all.iter().any(|c| c.path.starts_with(p)))
    {
        return Err(LayerError::NoChange(p.display().to_string()));
    }
    let guard = Guard::new(workspace, unprotect);
    Ok(all
        .into_iter()
        .filter(|c| paths.is_empty() || paths.iter().any(|p| c.path.starts_with(p)))
        .map(|c| {
            let refusal = guard.rule_for(&workspace.join(&c.path));
            let refusal = refusal.map(|rule| guard.refusal(&rule));
            (c, refusal)
        })
        .collect())
}

/// Copies the layer's changes that `accept` takes into `workspace`, each file written under
/// a temporary name and renamed over its own, deletions made; then takes them out of the
/// layer. A protected change among them that is neither unprotected nor allowed refuses the
/// whole accept. Returns what was accepted. The layer must not be in use.
pub fn accept(
    dir: &Path,
    workspace: &Path,
    accept: &op::Accept,
) -> Result<Vec<Change>, LayerError> {
    let _lock = lock(dir)?;
    accept_unmounted(dir, workspace, accept)
}

/// [`accept`] of a layer locked or unmounted by its caller.
fn accept_unmounted(
    dir: &Path,
    workspace: &Path,
    accept: &op::Accept,
) -> Result<Vec<Change>, LayerError> {
    if stack::shared(dir)? {
        return Err(LayerError::Shared(dir.into()));
    }
    let judged = judged(dir, workspace, &accept.paths, &accept.unprotect)?;
    let refused: Vec<String> = judged
        .iter()
        .filter(|(change, _)| !accept.allowed.contains(&change.path))
        .filter_map(|(_, why)| why.clone())
        .collect();
    if !refused.is_empty() {
        return Err(LayerError::Protected(refused));
    }
    let chosen: Vec<Change> = judged.into_iter().map(|(change, _)| change).collect();
    // Taken out of the layer below, an accepted file must not show an older version of it.
    stack::flatten(dir)?;
    let upper = dir.join(UPPER);
    for change in &chosen {
        let target = workspace.join(&change.path);
        match change.kind {
            ChangeKind::Deleted => remove(&target).map_err(io_at("delete", &target))?,
            ChangeKind::Added | ChangeKind::Modified => {
                place(&upper.join(&change.path), &target).map_err(io_at("write", &target))?
            }
        }
    }
    for change in &chosen {
        settle(&upper, &change.path).map_err(io_at("update the layer", dir))?;
    }
    Ok(chosen)
}

/// Removes a file, or a directory a file replaced, from the workspace.
fn remove(target: &Path) -> io::Result<()> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(target),
        Ok(_) => fs::remove_file(target),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Puts a copy of `from` (a file or link of the layer) at `to`, atomically.
fn place(from: &Path, to: &Path) -> io::Result<()> {
    let parent = to.parent().unwrap_or(Path::new("/"));
    if fs::symlink_metadata(parent).is_ok_and(|m| !m.is_dir()) {
        fs::remove_file(parent)?;
    }
    fs::create_dir_all(parent)?;
    let name = to.file_name().unwrap_or_default().to_string_lossy();
    let tmp = parent.join(format!(".{name}.cordon-accept.{}", std::process::id()));
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, &tmp)?;
    } else {
        fs::copy(from, &tmp)?;
        fs::set_permissions(&tmp, meta.permissions())?;
    }
    if fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
        fs::remove_dir_all(to)?;
    }
    fs::rename(&tmp, to).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// Takes an accepted path out of the upper directory, unless a directory above it there is
/// opaque (the workspace below would show through where the layer hid it).
fn settle(upper: &Path, rel: &Path) -> io::Result<()> {
    let mut dir = upper.to_path_buf();
    for part in rel.parent().into_iter().flat_map(|p| p.components()) {
        dir.push(part);
        if is_opaque(&dir) {
            return Ok(());
        }
    }
    // A deleted file's whiteout may stand for a whole directory: take that out once.
    let mut at = rel.to_path_buf();
    loop {
        let path = upper.join(&at);
        if let Ok(meta) = fs::symlink_metadata(&path) {
            if !meta.is_dir() {
                // Its directory may have been made read-only by a command: for a moment not.
                let parent = path.parent().unwrap_or(upper);
                let was = fs::symlink_metadata(parent)?.permissions();
                fs::set_permissions(parent, fs::Permissions::from_mode(was.mode() | 0o700))?;
                let removed = fs::remove_file(&path);
                fs::set_permissions(parent, was)?;
                removed?;
            }
            return Ok(());
        }
        if !at.pop() || at.as_os_str().is_empty() {
            return Ok(());
        }
    }
}

/// Removes the layer at `dir`: its changes, mount directories and all, but the levels that
/// its forks still use.
pub fn discard(dir: &Path) -> Result<(), LayerError> {
    let lock = lock(dir)?;
    if !dir.join(UPPER).is_dir() {
        return Err(LayerError::NotALayer(dir.into()));
    }
    // overlayfs leaves its work directory unreadable to its owner, and a command may have
    // made a directory read-only. (Levels are opened up by the last layer that stacks them.)
    let _ = opened_up(&dir.join("work"));
    let _ = opened_up(&dir.join(UPPER));
    if stack::release_all(dir)? {
        // The workspace file first: without it the directory is no layer.
        fs::remove_file(dir.join(WORKSPACE)).map_err(io_at("remove the layer", dir))?;
        for entry in fs::read_dir(dir).map_err(io_at("remove the layer", dir))? {
            let entry = entry.map_err(io_at("remove the layer", dir))?;
            if entry.file_name() == std::ffi::OsStr::new(stack::LEVELS) {
                continue;
            }
            let path = entry.path();
            let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed.map_err(io_at("remove the layer", &path))?;
        }
    } else {
        fs::remove_dir_all(dir).map_err(io_at("remove the layer", dir))?;
    }
    drop(lock);
    Ok(())
}

fn opened_up(dir: &Path) -> io::Result<()> {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            opened_up(&entry.path())?;
        }
    }
    Ok(())
}

/// Whether a layer can be mounted over `workspace` for the bash of `shell` here, as `cordon
/// doctor` shows it: one is mounted in a scratch directory beside the layers, then removed.
pub fn probe(workspace: &Path, shell: &Policy) -> Result<(), LayerError> {
    if shell.unconfined {
        return Err(LayerError::Unconfined);
    }
    let layers = layers_dir().ok_or(LayerError::NoDataDir)?;
    fs::create_dir_all(&layers).map_err(io_at("create", &layers))?;
    let scratch = tempfile::Builder::new()
        .prefix(".probe-")
        .tempdir_in(&layers)
        .map_err(io_at("create a directory in", &layers))?;
    let dir = scratch.path().join("layer");
    make(&dir, workspace)?;
    drop(mount(&shell.helper, workspace, &dir)?);
    discard(&dir)
}
