//! `cordon layer`: review, accept or discard a layer's changes, checkpoint, roll back and
//! fork it, from any terminal. The layer names the workspace it lies over, so `--workspace`
//! is not needed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use cordon::layer::{self, ChangeKind, stack};
use cordon::sandbox::protect::Guard;
use cordon::session::display::escape;

use crate::args::LayerCommand;
use crate::terminal;

/// Runs a `cordon layer` command; `unprotect` is what `--unprotect` and the config file's
/// `[bash] unprotect` name. With `ask`
/// (`--permissions ask`), accept asks on the terminal about each protected change that
/// `unprotect` does not allow, instead of refusing it.
pub fn run(command: LayerCommand, unprotect: &[PathBuf], ask: bool) -> anyhow::Result<ExitCode> {
    match command {
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
        }
        LayerCommand::Accept { layer, paths } => {
            let dir = layer::dir(&layer)?;
            let workspace = layer::workspace_of(&dir)?;
            // One no refuses the whole accept: nothing more is asked.
            let mut refused = !ask;
            let allow = |change: &layer::Change, refusal: &str| {
                // The path is the layer's: whatever its name holds is shown, not obeyed.
                let question = format!("{refusal}\nAccept {} anyway?", change.path.display());
                let yes = !refused
                    && terminal::confirm(&escape(&question)).unwrap_or_else(|e| {
                        tracing::warn!("cannot ask on the terminal ({e}); the change is refused");
                        false
                    });
                refused |= !yes;
                yes
            };
            // The refusals name the layer's paths: shown, not obeyed.
            let accepted = layer::accept(&dir, &workspace, &paths, unprotect, allow)
                .map_err(|e| anyhow::anyhow!("{}", escape(&e.to_string())))?;
            for change in &accepted {
                let what = match change.kind {
                    ChangeKind::Added => "added",
                    ChangeKind::Modified => "modified",
                    ChangeKind::Deleted => "deleted",
                };
                println!("{what:<8} {}", change.path.display());
            }
        }
        LayerCommand::Discard { layer } => {
            let dir = layer::dir(&layer)?;
            layer::discard(&dir)?;
        }
        LayerCommand::Checkpoint { layer, label } => {
            let dir = layer::dir(&layer)?;
            layer::workspace_of(&dir)?;
            println!("{}", stack::checkpoint(&dir, label.as_deref())?);
        }
        LayerCommand::Rollback { layer, label } => {
            let dir = layer::dir(&layer)?;
            layer::workspace_of(&dir)?;
            stack::rollback(&dir, &label)?;
        }
        LayerCommand::Checkpoints { layer } => {
            let dir = layer::dir(&layer)?;
            layer::workspace_of(&dir)?;
            for checkpoint in stack::checkpoints(&dir)? {
                println!("{}", checkpoint.label);
            }
        }
        LayerCommand::Fork { layer, new } => {
            stack::fork(&layer::dir(&layer)?, &layer::dir(&new)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
