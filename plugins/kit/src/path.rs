//! Confining model-given paths to a tool's directory.
//!
//! The host mounts each granted directory at its own absolute path, so the paths a tool works
//! with are the real ones and an absolute path the model copied from elsewhere in the
//! conversation just works. [`resolve`] decides lexically, before any file is touched, whether a
//! path stays inside the root; symbolic links are left to the WASI grant, which refuses any
//! that lead out, and [`describe`] words that refusal.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Resolves `given` against `root` (absolute) and checks that it stays inside it.
///
/// Relative paths are taken from `root`; absolute paths must lie under it. `.` and `..` are
/// folded lexically. `~` is refused rather than expanded: a home directory is never part of a
/// grant. The path must name a file, as every tool using this works on files: one ending in
/// `/` or `/.` names a directory, and is refused as POSIX refuses it (the lexical folding would
/// otherwise drop the slash and quietly use the file). The error is the message for the model.
pub fn resolve(root: &str, given: &str) -> Result<PathBuf, String> {
    let root = Path::new(root);
    if given.is_empty() {
        return Err("the path is empty: give a file path relative to the workspace root".into());
    }
    if given.starts_with('~') {
        return Err(format!(
            "{given} is outside the workspace: \"~\" is not expanded. Give a path relative to the workspace root {}.",
            root.display()
        ));
    }
    let joined = root.join(given);
    let mut normal = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    if !normal.starts_with(root) {
        return Err(outside(given, root));
    }
    if let Some(end) = ["/", "/."].into_iter().find(|end| given.ends_with(end)) {
        return Err(format!(
            "{given} ends with \"{end}\", which names a directory; give the path of a file"
        ));
    }
    Ok(normal)
}

fn outside(given: &str, root: &Path) -> String {
    format!(
        "{given} is outside the workspace ({}); only paths inside it can be used.",
        root.display()
    )
}

/// Words an I/O error on `given` for the model.
pub fn describe(given: &str, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => format!("{given} does not exist"),
        io::ErrorKind::PermissionDenied => format!(
            "{given} cannot be accessed: it resolves outside the directories this tool may use \
             (for example through a symbolic link leading out of the workspace), or the tool \
             may only read there"
        ),
        io::ErrorKind::IsADirectory => format!("{given} is a directory, not a file"),
        io::ErrorKind::NotADirectory => {
            format!("{given}: a parent of this path is a file, not a directory")
        }
        io::ErrorKind::InvalidData => format!("{given} is not valid UTF-8 text"),
        _ => format!("{given}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "/work/ws";

    #[test]
    fn relative_paths_resolve_under_the_root() {
        assert_eq!(
            resolve(ROOT, "a/b.txt").unwrap(),
            Path::new("/work/ws/a/b.txt")
        );
        assert_eq!(resolve(ROOT, "./a/../b").unwrap(), Path::new("/work/ws/b"));
    }

    #[test]
    fn absolute_paths_inside_are_accepted() {
        assert_eq!(
            resolve(ROOT, "/work/ws/x").unwrap(),
            Path::new("/work/ws/x")
        );
    }

    #[test]
    fn a_path_naming_a_directory_is_refused() {
        assert_eq!(
            resolve(ROOT, "newdir/").unwrap_err(),
            "newdir/ ends with \"/\", which names a directory; give the path of a file"
        );
        assert_eq!(
            resolve(ROOT, "a.txt/.").unwrap_err(),
            "a.txt/. ends with \"/.\", which names a directory; give the path of a file"
        );
        for bad in ["/work/ws/", "a//", "sub/./"] {
            assert!(resolve(ROOT, bad).is_err(), "{bad} should be refused");
        }
        assert!(resolve(ROOT, "a/.b").is_ok());
    }

    #[test]
    fn escapes_are_refused() {
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/work/wsx/a",
            "~/x",
            "~",
            "",
        ] {
            assert!(resolve(ROOT, bad).is_err(), "{bad} should be refused");
        }
    }
}
