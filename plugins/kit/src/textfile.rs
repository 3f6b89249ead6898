//! What the file tools (`read_file`, `write_file`, `edit_file`) share, so they word things the
//! same way: the turn counter, the messages for common failures, reading an existing file and
//! replacing it through the host.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::diff::LineDiff;
use crate::{Counter, Outcome, files, path};

/// The prefix of the headline of a dry run (a call that computes its outcome and writes
/// nothing). The rest of the headline then says what the call would do: `would create …`.
pub const DRY_RUN: &str = "Dry run, nothing written: ";

/// The turn counter all file tools add to: `📝 N file op(s)`.
pub fn file_ops_counter() -> Counter {
    Counter::new("file_ops", "📝", "file op", "file ops")
}

/// The failure for a file that does not exist, `given` as the model wrote it.
pub fn missing(given: &str) -> String {
    format!("{given} does not exist. Create it with write_file")
}

/// The failure for a path that names a directory.
pub fn directory(given: &str) -> String {
    format!("{given} is a directory, not a file; give the path of a file")
}

/// `n` followed by the right noun: `1 line`, `3 lines`.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

/// The absolute path as text, for outcome locations and diffs.
pub fn display(abs: &Path) -> String {
    abs.to_string_lossy().into_owned()
}

/// The characters of output the host keeps, from `Context::max_output` (0: no limit).
pub fn output_limit(max_output: u32) -> usize {
    match max_output {
        0 => usize::MAX,
        n => n as usize,
    }
}

/// The outcome of a call that changes (or in a dry run would change) a file: `headline` on the
/// first line, then as much of `change` as fits in `max_chars` characters in whole lines, and
/// when lines were left out a trailer saying how many.
pub fn change_outcome(headline: String, mut change: LineDiff, max_chars: usize) -> Outcome {
    change.shrink_to(max_chars.saturating_sub(headline.chars().count() + 1));
    let mut output = headline;
    if !change.text.is_empty() {
        output.push('\n');
        output.push_str(&change.text);
    }
    let outcome = Outcome::success(output);
    match change.omitted_lines {
        0 => outcome,
        n => outcome.with_trailer(format!(
            "[output limit reached: {} not shown]",
            count(n, "more diff line", "more diff lines")
        )),
    }
}

/// Words an I/O error on `abs` (resolved from `given`, inside the workspace root `root`) for
/// the model: as [`path::describe`], except that a refusal on a path that goes through a
/// symbolic link names the link and says which links can be followed.
///
/// WASI refuses a link whose target is absolute even when it points inside the workspace, and
/// any link leading out; only links with a relative target that stays inside are followed.
pub fn describe(root: &Path, abs: &Path, given: &str, error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::PermissionDenied
        && let Some(link) = first_link(root, abs)
    {
        return format!(
            "{given} cannot be accessed: it goes through the symbolic link {}, which leads \
                 outside the workspace or has an absolute target; only links with a relative \
                 target inside the workspace are followed",
            link.display()
        );
    }
    path::describe(given, error)
}

/// The first symbolic link along `abs`, relative to `root`.
fn first_link(root: &Path, abs: &Path) -> Option<PathBuf> {
    let inside = abs.strip_prefix(root).ok()?;
    let mut current = root.to_path_buf();
    let mut shown = PathBuf::new();
    for component in inside.components() {
        current.push(component);
        shown.push(component);
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => return Some(shown),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// The largest existing file `write_file` and `edit_file` take in. Each holds the file, its new
/// text and the diff of the two in the plugin's memory and hands both texts back to the host;
/// the host's bound on a call's input is the same 64 MiB.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The failure for a path that is neither a regular file nor a directory.
pub fn not_regular(given: &str, tool: &str) -> String {
    format!(
        "{given} is not a regular file (it is a named pipe, a socket or a device); {tool} works \
         on regular files only"
    )
}

/// The failure for an existing file over [`MAX_FILE_BYTES`], `size` bytes long.
pub fn too_large(given: &str, size: u64, tool: &str) -> String {
    format!(
        "{given} is {:.1} MiB, more than the {} MiB {tool} works on; change a file this large \
         with a command instead. Nothing was written.",
        size as f64 / f64::from(1 << 20),
        MAX_FILE_BYTES >> 20
    )
}

/// What is at `abs` (resolved from `given`, inside `root`), looked at without opening it: none
/// when nothing is there, the failure text when it is a directory, not a regular file (for
/// `tool`'s message) or cannot be looked at. Only a regular file is safe to open: opening a
/// FIFO waits for a writer, and a device's content may never end.
pub fn regular_file(
    root: &Path,
    abs: &Path,
    given: &str,
    tool: &str,
) -> Result<Option<std::fs::Metadata>, String> {
    match std::fs::metadata(abs) {
        Ok(meta) if meta.is_dir() => Err(directory(given)),
        Ok(meta) if !meta.is_file() => Err(not_regular(given, tool)),
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(describe(root, abs, given, &e)),
    }
}

/// Reads the file at `abs` (resolved from `given`, inside `root`) for `tool`: none when it does
/// not exist, the failure text when it is not a regular file, is over [`MAX_FILE_BYTES`] or
/// cannot be read.
pub fn read_existing(
    root: &Path,
    abs: &Path,
    given: &str,
    tool: &str,
) -> Result<Option<Vec<u8>>, String> {
    let Some(meta) = regular_file(root, abs, given, tool)? else {
        return Ok(None);
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(given, meta.len(), tool));
    }
    let read = |file: std::fs::File| {
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        // One byte past the bound tells a file that grew since it was looked at.
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    match std::fs::File::open(abs).and_then(read) {
        Ok(bytes) if bytes.len() as u64 > MAX_FILE_BYTES => {
            Err(too_large(given, bytes.len() as u64, tool))
        }
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => Err(directory(given)),
        Err(e) => Err(describe(root, abs, given, &e)),
    }
}

/// Replaces the file at `abs` (resolved from `given`) with `bytes` through the host's atomic
/// replacement, which keeps permission bits; the failure text otherwise.
pub fn replace(abs: &Path, given: &str, bytes: &[u8]) -> Result<(), String> {
    try_replace(abs, bytes).map_err(|e| replace_failure(given, e))
}

/// [`replace`], with the host's failure as it is (a caller may handle a missing parent).
pub fn try_replace(abs: &Path, bytes: &[u8]) -> Result<(), files::ReplaceError> {
    files::replace(&display(abs), bytes)
}

/// The failure text of a replacement of `given` that failed with `error`.
pub fn replace_failure(given: &str, error: files::ReplaceError) -> String {
    let why = match error {
        files::ReplaceError::NotPermitted(_) => format!(
            "{given} cannot be written: it resolves outside the directories this tool may \
             write (for example through a symbolic link leading out of the workspace)"
        ),
        files::ReplaceError::NoParent(_) => {
            format!("{given} cannot be written: its parent directory does not exist")
        }
        files::ReplaceError::IsDirectory(_) => directory(given),
        files::ReplaceError::Protected(why) => format!("{given} cannot be written: {why}"),
        files::ReplaceError::Io(message) => format!("{given} cannot be written: {message}"),
    };
    format!("{why}. Nothing was written.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_diff_is_cut_at_a_line_with_a_trailer() {
        let new: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let change = crate::diff::diff("", &new, Some(60));
        let outcome = change_outcome("Created x (100 lines)".into(), change, 60);
        assert_eq!(
            outcome.output,
            "Created x (100 lines)\n@@ -0,0 +1,100 @@\n  1 + line 1"
        );
        assert_eq!(
            outcome.trailer.as_deref(),
            Some("[output limit reached: 99 more diff lines not shown]")
        );
        let short = change_outcome("H".into(), crate::diff::diff("a\n", "b\n", None), 1000);
        assert_eq!(short.output, "H\n@@ -1,1 +1,1 @@\n1 - a\n1 + b");
        assert_eq!(short.trailer, None);
    }

    #[test]
    fn a_refusal_through_a_link_names_the_link() {
        use std::os::unix::fs::symlink;
        let ws = std::env::temp_dir().join(format!("cordon-kit-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ws);
        std::fs::create_dir_all(ws.join("real")).unwrap();
        let root = ws.canonicalize().unwrap();
        symlink("/etc", root.join("real/out")).unwrap();
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(
            describe(
                &root,
                &root.join("real/out/passwd"),
                "real/out/passwd",
                &denied
            ),
            "real/out/passwd cannot be accessed: it goes through the symbolic link real/out, \
             which leads outside the workspace or has an absolute target; only links with a \
             relative target inside the workspace are followed"
        );
        assert_eq!(
            describe(&root, &root.join("real/x"), "real/x", &denied),
            path::describe("real/x", &denied)
        );
        let missing = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(
            describe(&root, &root.join("real/out/x"), "real/out/x", &missing),
            "real/out/x does not exist"
        );
        std::fs::remove_dir_all(&ws).unwrap();
    }

    #[test]
    fn counts_choose_the_noun() {
        assert_eq!(count(1, "line", "lines"), "1 line");
        assert_eq!(count(0, "line", "lines"), "0 lines");
        assert_eq!(count(2, "edit", "edits"), "2 edits");
    }
}
