//! `cordon layer`: review, accept or discard a layer's changes, checkpoint, roll back and
//! fork it, from any terminal, while a cordon runs in it or after. The layer names the
//! workspace it lies over, so `--workspace` is not needed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cordon::layer::{self, Accept, ChangeKind, Done, Op};
use cordon::session::display::escape;

use crate::args::LayerCommand;
use crate::terminal;

/// Runs a `cordon layer` command; `unprotect` is what `--unprotect` and the config file's
/// `[bash] unprotect` name. With `ask` (`--permissions ask`), accept asks on the terminal
/// about each protected change that `unprotect` does not allow, instead of refusing it.
/// What changes a layer that a running cordon holds is done by that cordon, between its calls.
pub fn run(command: LayerCommand, unprotect: &[PathBuf], ask: bool) -> anyhow::Result<ExitCode> {
    let dir = layer::dir(command.layer())?;
    let op = match command {
        LayerCommand::Diff { stat, .. } => {
            let workspace = layer::workspace_of(&dir)?;
            let judged = layer::judged(&dir, &workspace, &[], unprotect)?;
            let (changes, refusals): (Vec<_>, Vec<_>) = judged.into_iter().unzip();
            let text = layer::patch::of(&workspace, &changes, stat)?;
            std::io::stdout().lock().write_all(text.as_bytes())?;
            for refusal in refusals.into_iter().flatten() {
                eprintln!("cordon: {}", escape(&refusal));
            }
            return Ok(ExitCode::SUCCESS);
        }
        LayerCommand::Accept { paths, .. } => {
            let unprotect = unprotect.to_vec();
            let allowed = match ask {
                true => asked(&dir, &paths, &unprotect)?,
                false => Vec::new(),
            };
            Op::Accept(Accept {
                paths,
                unprotect,
                allowed,
            })
        }
        LayerCommand::Checkpoint { label, .. } => Op::Checkpoint { label },
        LayerCommand::Rollback { label, .. } => Op::Rollback { label },
        LayerCommand::Checkpoints { .. } => Op::Checkpoints,
        LayerCommand::Discard { .. } => Op::Discard,
        LayerCommand::Fork { new, .. } => {
            // The fork's directory as this terminal names it, not as the running cordon would.
            let name = layer::dir(&new)?.into_os_string().into_string();
            let name = name.map_err(|path| {
                anyhow::anyhow!("cannot fork into {path:?}: the path is not UTF-8; use a name")
            })?;
            Op::Fork { name }
        }
    };
    let waiting =
        || eprintln!("cordon: the cordon using the layer is running a call; waiting for it to end");
    // The refusals of an accept name the layer's paths: shown, not obeyed.
    let done = layer::apply(&dir, op, waiting)
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
/// returns the paths in the layer of those allowed. One no refuses the whole accept: nothing
/// more is asked.
fn asked(dir: &Path, paths: &[PathBuf], unprotect: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let workspace = layer::workspace_of(dir)?;
    let (mut allowed, mut refused) = (Vec::new(), Vec::new());
    for (change, refusal) in layer::judged(dir, &workspace, paths, unprotect)? {
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
