//! A layer's changes as git shows them: a unified diff `git apply` takes, or `--stat`.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use similar::TextDiff;

use super::{Change, ChangeKind};

/// What one side of a change holds.
struct Side {
    mode: u32,
    bytes: Vec<u8>,
}

impl Side {
    fn read(path: &Path) -> io::Result<Side> {
        let meta = fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() {
            let target = fs::read_link(path)?;
            return Ok(Side {
                mode: 0o120000,
                bytes: target.into_os_string().into_encoded_bytes(),
            });
        }
        let exec = meta.permissions().mode() & 0o111 != 0;
        Ok(Side {
            mode: if exec { 0o100755 } else { 0o100644 },
            bytes: fs::read(path)?,
        })
    }

    fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes)
            .ok()
            .filter(|t| !t.contains('\0'))
    }
}

/// The sides of `change`: the workspace's and the layer's.
fn sides(workspace: &Path, change: &Change) -> io::Result<(Option<Side>, Option<Side>)> {
    let old = match change.kind {
        ChangeKind::Added => None,
        _ => Some(Side::read(&workspace.join(&change.path))?),
    };
    let new = change.source.as_deref().map(Side::read).transpose()?;
    Ok((old, new))
}

/// The unified diff of `changes` (see [`unified`]), or their summary (`stat`, see [`stat`]).
pub fn of(workspace: &Path, changes: &[Change], stat: bool) -> io::Result<String> {
    match stat {
        true => self::stat(workspace, changes),
        false => unified(workspace, changes),
    }
}

/// The unified diff of `changes`, with git's headers.
pub fn unified(workspace: &Path, changes: &[Change]) -> io::Result<String> {
    let mut out = String::new();
    for change in changes {
        let (old, new) = sides(workspace, change)?;
        let (pa, pb) = (quoted("a/", &change.path), quoted("b/", &change.path));
        out.push_str(&format!("diff --git {pa} {pb}\n"));
        match (&old, &new) {
            (None, Some(n)) => out.push_str(&format!("new file mode {:o}\n", n.mode)),
            (Some(o), None) => out.push_str(&format!("deleted file mode {:o}\n", o.mode)),
            (Some(o), Some(n)) if o.mode != n.mode => {
                out.push_str(&format!("old mode {:o}\nnew mode {:o}\n", o.mode, n.mode))
            }
            _ => {}
        }
        let (a, b) = (
            old.as_ref().map_or("/dev/null".into(), |_| pa.clone()),
            new.as_ref().map_or("/dev/null".into(), |_| pb.clone()),
        );
        match (text(&old), text(&new)) {
            (Some(o), Some(n)) if o != n => {
                out.push_str(&format!("--- {a}\n+++ {b}\n"));
                let diff = TextDiff::from_lines(o, n);
                out.push_str(&diff.unified_diff().context_radius(3).to_string());
            }
            (Some(_), Some(_)) => {}
            _ => out.push_str(&format!("Binary files {a} and {b} differ\n")),
        }
    }
    Ok(out)
}

/// `git diff --stat`'s summary of `changes`: a line per file, then the totals.
pub fn stat(workspace: &Path, changes: &[Change]) -> io::Result<String> {
    let mut rows = Vec::new();
    let (mut added, mut removed) = (0, 0);
    for change in changes {
        let (old, new) = sides(workspace, change)?;
        let count = match (text(&old), text(&new)) {
            (Some(o), Some(n)) => {
                let diff = TextDiff::from_lines(o, n);
                let ops = diff.iter_all_changes();
                let (mut plus, mut minus) = (0, 0);
                for c in ops {
                    match c.tag() {
                        similar::ChangeTag::Insert => plus += 1,
                        similar::ChangeTag::Delete => minus += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
                added += plus;
                removed += minus;
                format!("{} {}{}", plus + minus, "+".repeat(plus), "-".repeat(minus))
            }
            _ => "Bin".to_string(),
        };
        rows.push((quoted("", &change.path), count));
    }
    let width = rows.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (path, count) in &rows {
        out.push_str(&format!(" {path:<width$} | {count}\n"));
    }
    let files = rows.len();
    out.push_str(&format!(
        " {files} file{} changed, {added} insertion{}(+), {removed} deletion{}(-)\n",
        plural(files),
        plural(added),
        plural(removed)
    ));
    Ok(out)
}

/// `prefix` and `path` as git writes a name in a patch: as it is, or, when it holds a control
/// character, a quote, a backslash or a byte outside ASCII, in double quotes with C escapes
/// (`core.quotePath`), so that `git apply` reads it back and no terminal obeys it.
fn quoted(prefix: &str, path: &Path) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let plain = |b: &u8| (0x20..0x7f).contains(b) && !matches!(b, b'"' | b'\\');
    if bytes.iter().all(plain) {
        return format!("{prefix}{}", path.display());
    }
    let mut out = format!("\"{prefix}");
    for &b in bytes {
        match b {
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b if plain(&b) => out.push(char::from(b)),
            b => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

/// The text of a side, empty when there is none; none when it is binary.
fn text(side: &Option<Side>) -> Option<&str> {
    side.as_ref().map_or(Some(""), Side::text)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::quoted;

    #[test]
    fn names_are_quoted_as_git_quotes_them() {
        assert_eq!(quoted("a/", Path::new("src/main.rs")), "a/src/main.rs");
        assert_eq!(quoted("a/", Path::new("with space")), "a/with space");
        assert_eq!(quoted("b/", Path::new("a\x1b[2Kb")), r#""b/a\033[2Kb""#);
        assert_eq!(quoted("a/", Path::new("tab\there\n")), r#""a/tab\there\n""#);
        assert_eq!(quoted("", Path::new("say \"hi\"\\")), r#""say \"hi\"\\""#);
        assert_eq!(quoted("a/", Path::new("café")), r#""a/caf\303\251""#);
    }
}
