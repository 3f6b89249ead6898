//! `cordon layer`: review, accept or discard a layer's changes, from any terminal. The layer
//! names the workspace it lies over, so `--workspace` is not needed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use cordon::layer::{self, Kind};
use cordon::shell::protect::Guard;

use crate::args::LayerCommand;

/// Runs a `cordon layer` command; `unprotect` is the global `--unprotect`.
pub fn run(command: LayerCommand, unprotect: &[PathBuf]) -> anyhow::Result<ExitCode> {
    match command {
        LayerCommand::Diff { layer, stat } => {
            let dir = layer::dir(&layer)?;
            let workspace = layer::workspace_of(&dir)?;
            let changes = layer::changes(&dir, &workspace)?;
            let upper = dir.join(cordon::shell::layer::UPPER);
            let text = if stat {
                layer::patch::stat(&upper, &workspace, &changes)?
            } else {
                layer::patch::unified(&upper, &workspace, &changes)?
            };
            std::io::stdout().lock().write_all(text.as_bytes())?;
            let guard = Guard::new(&workspace, unprotect);
            for change in &changes {
                if let Some(protected) = guard.rule_for(&workspace.join(&change.path)) {
                    eprintln!("cordon: {}", guard.refusal(&protected));
                }
            }
        }
        LayerCommand::Accept { layer, paths } => {
            let dir = layer::dir(&layer)?;
            let workspace = layer::workspace_of(&dir)?;
            let accepted = layer::accept(&dir, &workspace, &paths, unprotect)?;
            for change in &accepted {
                let what = match change.kind {
                    Kind::Added => "added",
                    Kind::Modified => "modified",
                    Kind::Deleted => "deleted",
                };
                println!("{what:<8} {}", change.path.display());
            }
        }
        LayerCommand::Discard { layer } => {
            let dir = layer::dir(&layer)?;
            layer::discard(&dir)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
