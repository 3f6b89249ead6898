//! `cordon layer`: review, accept or discard a layer's changes, checkpoint, roll back and
//! fork it, from any terminal, while a cordon runs in it or after. The layer names the
//! workspace it lies over, so `--workspace` is not needed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cordon::layer::{self, Accept, ChangeKind, Done, Op};
use cordon::sandbox::protect::Guard;
use cordon::session::display::escape;

use crate::args::LayerCommand;
use crate::terminal;

/// Runs a `cordon layer` command; `unprotect` is what `--unprotect` and the config file's
/// `[bash] unprotect` name. With `ask` (`--permissions ask`), accept asks on the terminal
/// about each protected change that `unprotect` does not allow, instead of refusing it.
/// What changes a layer that a running cordon holds is done by that cordon, between its calls.
pub fn run(command: LayerCommand, unprotect: &[PathBuf], ask: bool) -> anyhow::Result<ExitCode> {
    let (layer, op) = match command {
        LayerCommand::Diff { layer, stat } => {
            let dir = layer::dir(&layer)?;
            let workspace = layer::workspace_of(&dir)?;
            let changes = layer::changes(&dir, &workspace)?;
            let text = if stat {
                layer::patch::stat(&workspace, &changes)?
            } else {
                layer::patch::unified(&workspace, &changes)?
            };
            std::io::stdout().lock().write_all(text.as_bytes())?;
            let guard = Guard::new(&workspace, unprotect);
            for change in &changes {
                if let Some(protected) = guard.rule_for(&workspace.join(&change.path)) {
                    eprintln!("cordon: {}", escape(&guard.refusal(&protected)));
                }
            }
            return Ok(ExitCode::SUCCESS);
        }
        LayerCommand::Accept { layer, paths } => {
            let dir = layer::dir(&layer)?;
            let workspace = layer::workspace_of(&dir)?;
            let unprotect = unprotect.to_vec();
            let allowed = match ask {
                true => asked(&dir, &workspace, &paths, &unprotect)?,
                false => Vec::new(),
            };
            let accept = Accept {
                paths,
                unprotect,
                allowed,
            };
            (layer, Op::Accept(accept))
        }
        LayerCommand::Checkpoint { layer, label } => (layer, Op::Checkpoint { label }),
        LayerCommand::Rollback { layer, label } => (layer, Op::Rollback { label }),
        LayerCommand::Checkpoints { layer } => (layer, Op::Checkpoints),
        LayerCommand::Discard { layer } => (layer, Op::Discard),
        LayerCommand::Fork { layer, new } => {
            // The fork's directory as this terminal names it, not as the running cordon would.
            let name = layer::dir(&new)?.into_os_string().into_string();
            let name = name.map_err(|path| {
                anyhow::anyhow!("cannot fork into {path:?}: the path is not UTF-8; use a name")
            })?;
            (layer, Op::Fork { name })
        }
    };
    let waiting =
        || eprintln!("cordon: the cordon using the layer is running a call; waiting for it to end");
    // The refusals of an accept name the layer's paths: shown, not obeyed.
    let done = layer::apply(&layer::dir(&layer)?, op, waiting)
        .map_err(|e| anyhow::anyhow!("{}", escape(&e.to_string())))?;
    match done {
        Done::Checkpoint(label) => println!("{label}"),
        Done::Checkpoints(labels) => labels.iter().for_each(|label| println!("{label}")),
        Done::Accepted(accepted) => {
            for change in &accepted {
                let what = match change.kind {
                    ChangeKind::Added => "added",
                    ChangeKind::Modified => "modified",
                    ChangeKind::Deleted => "deleted",
                };
                println!("{what:<8} {}", escape(&change.path.display().to_string()));
            }
        }
        Done::Diff(text) => std::io::stdout().lock().write_all(text.as_bytes())?,
        Done::Discarded { pending: true } => eprintln!(
            "cordon: a cordon runs in the layer: it dropped every change and checkpoint, goes on \
             over the workspace as it is, and removes the layer when it ends"
        ),
        Done::RolledBack(_) | Done::Fork(_) | Done::Discarded { pending: false } => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks on the terminal about each protected change an accept of `paths` would take, and
/// returns the paths in the layer of those allowed. One no refuses the whole accept: nothing more is asked.
fn asked(
    dir: &Path,
    workspace: &Path,
    paths: &[PathBuf],
    unprotect: &[PathBuf],
) -> anyhow::Result<Vec<PathBuf>> {
    let (mut allowed, mut refused) = (Vec::new(), Vec::new());
    for (change, refusal) in layer::judged(dir, workspace, paths, unprotect)? {
        let Some(refusal) = refusal else { continue };
        // The path is the layer's: whatever its name holds is shown, not obeyed.
        let question = format!("{refusal}\nAccept {} anyway?", change.path.display());
        let yes = refused.is_empty()
            && terminal::confirm(&escape(&question)).unwrap_or_else(|e| {
                tracing::warn!("cannot ask on the terminal ({e}); the change is refused");
                false
            });
        match yes {
            true => allowed.push(change.path),
            false => refused.push(refusal),
        }
    }
    if !refused.is_empty() {
        let refused = layer::LayerError::Protected(refused).to_string();
        anyhow::bail!("{}", escape(&refused));
    }
    Ok(allowed)
}
