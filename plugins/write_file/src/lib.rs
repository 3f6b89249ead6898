//! The `write_file` tool: creates a file of the workspace or replaces its whole content.
//!
//! The output is a headline and a diff against the previous content (see
//! [`cordon_kit::diff`]); the file is replaced atomically by the host, keeping its permission
//! bits.

use std::io;
use std::path::Path;

use cordon_kit::textfile::{self, DRY_RUN, count};
use cordon_kit::{Context, Declaration, Kind, Outcome, Tool, diff, files, path};
use schemars::JsonSchema;
use serde::Deserialize;

/// The `write_file` tool.
pub struct WriteFile;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// File path, relative to the workspace root; parent directories are created.
    path: String,
    /// The whole content of the file.
    content: String,
}

const DESCRIPTION: &str = "Create a file, or replace the whole content of an existing one. \
`path` is relative to the workspace root; missing parent directories are created. `content` is \
the complete new content of the file (end it with a newline if the file should end with one). \
Returns a headline and a diff against the previous content. To change part of an existing file, \
prefer edit_file.";

impl Tool for WriteFile {
    type Input = Input;
    const NAME: &'static str = "write_file";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Edit,
                DESCRIPTION,
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("📝", Some("path"))
            .counted_as(textfile::file_ops_counter()),
        )
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        run(input, context)
    }
}

cordon_kit::export_tools!(WriteFile);

fn run(input: Input, context: &Context) -> Result<Outcome, String> {
    let given = input.path.as_str();
    let abs = path::resolve(&context.cwd, given)?;
    let root = Path::new(&context.cwd);
    let location = textfile::display(&abs);
    let old = textfile::read_existing(root, &abs, given, WriteFile::NAME)?;
    if old.as_deref() == Some(input.content.as_bytes()) {
        return Ok(Outcome::success(unchanged(given)).with_location(location, None));
    }
    let old_text = old.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let limit = textfile::output_limit(context.max_output);
    let change = diff::diff(
        old_text.as_deref().unwrap_or(""),
        &input.content,
        Some(limit),
    );
    let headline = headline(
        given,
        old_text.is_none(),
        &input.content,
        &change,
        context.dry_run,
    );
    if !context.dry_run {
        let bytes = input.content.as_bytes();
        // Parents are created only once the host has had its say: a protected path is
        // refused before anything of it exists.
        match textfile::try_replace(&abs, bytes) {
            Err(files::ReplaceError::NoParent(_)) => {
                ensure_parent(root, &abs, given)?;
                textfile::replace(&abs, given, bytes)?;
            }
            done => done.map_err(|e| textfile::replace_failure(given, e))?,
        }
    }
    let line = old_text.as_ref().and(change.first_changed_line);
    Ok(textfile::change_outcome(headline, change, limit)
        .with_location(location.clone(), line)
        .with_diff(context, location, old_text, input.content))
}

/// The output when the file already holds the content.
fn unchanged(given: &str) -> String {
    format!("{given} already has this content; nothing was written.")
}

/// The first line of the output.
fn headline(
    given: &str,
    created: bool,
    content: &str,
    change: &diff::LineDiff,
    dry_run: bool,
) -> String {
    let lines = count(cordon_kit::lines::count_lines(content), "line", "lines");
    let stats = format!("+{} -{} lines", change.added, change.deleted);
    match (created, dry_run) {
        (true, false) => format!("Created {given} ({lines})"),
        (true, true) => format!("{DRY_RUN}would create {given} ({lines})"),
        (false, false) => format!("Updated {given}: {stats}"),
        (false, true) => format!("{DRY_RUN}would update {given}: {stats}"),
    }
}

/// Creates the missing parent directories of `abs`.
fn ensure_parent(root: &Path, abs: &Path, given: &str) -> Result<(), String> {
    let Some(parent) = abs.parent() else {
        return Ok(());
    };
    match std::fs::metadata(parent) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{given} cannot be written: a parent of this path is a file, not a directory. \
             Nothing was written."
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(parent).map_err(|e| {
                format!(
                    "the parent directories of {given} cannot be created: {}. Nothing was written.",
                    textfile::describe(root, abs, given, &e)
                )
            })
        }
        Err(e) => Err(format!(
            "{}. Nothing was written.",
            textfile::describe(root, abs, given, &e)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headlines() {
        let created = diff::diff("", "a\nb\n", None);
        assert_eq!(
            headline("x.txt", true, "a\nb\n", &created, false),
            "Created x.txt (2 lines)"
        );
        assert_eq!(
            headline("x.txt", true, "a\nb\n", &created, true),
            "Dry run, nothing written: would create x.txt (2 lines)"
        );
        assert_eq!(
            headline("x.txt", true, "a", &diff::diff("", "a", None), false),
            "Created x.txt (1 line)"
        );
        let updated = diff::diff("a\nb\n", "a\nc\nd\n", None);
        assert_eq!(
            headline("x.txt", false, "a\nc\nd\n", &updated, false),
            "Updated x.txt: +2 -1 lines"
        );
        assert_eq!(
            headline("x.txt", false, "a\nc\nd\n", &updated, true),
            "Dry run, nothing written: would update x.txt: +2 -1 lines"
        );
        assert_eq!(
            unchanged("x.txt"),
            "x.txt already has this content; nothing was written."
        );
    }
}
