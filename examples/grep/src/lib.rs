//! An example third-party plugin: the `grep` tool searches the workspace's text files for a
//! substring and answers with `path:line:text` lines.
//!
//! It is written with `cordon-kit` as docs/plugins.md describes ("Writing a plugin"): a struct
//! implementing [`Tool`] and `export_tools!`. Its manifest, `grep.toml`, grants it the
//! workspace read-only; nothing else is reachable from inside the component, and
//! [`path::resolve`] turns a path that would leave the workspace into a clear refusal before
//! anything is touched.

use std::fs;
use std::path::{Path, PathBuf};

use cordon_kit::{Context, Counter, Declaration, Kind, Outcome, Tool, path};
use schemars::JsonSchema;
use serde::Deserialize;

/// The most matching lines one call returns.
const MAX_MATCHES: usize = 200;
/// Files larger than this are skipped (they are rarely source, and reading them costs memory).
const MAX_FILE_BYTES: u64 = 1 << 20;
/// The most characters of one matching line that are shown.
const MAX_LINE_CHARS: usize = 300;

/// The `grep` tool.
pub struct Grep;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The text to look for, matched literally.
    #[schemars(length(min = 1))]
    pattern: String,
    /// Directory or file to search, relative to the workspace root.
    #[serde(default = "dot")]
    path: String,
    /// Only search files whose name matches, e.g. `*.rs`.
    // Left out, not null, when there is none: schemars would offer `null` for an `Option`.
    #[schemars(extend("type" = "string"))]
    glob: Option<String>,
    /// Ignore case when matching.
    #[serde(default)]
    case_insensitive: bool,
}

fn dot() -> String {
    ".".into()
}

const DESCRIPTION: &str = "Search the workspace's text files for a plain substring (not a \
regular expression). Returns one `path:line:text` line per matching line, paths relative to the \
workspace root, at most 200 matches. `path` is a directory (searched recursively; hidden \
entries, files over 1 MiB and files that are not UTF-8 are skipped) or a file, relative to the \
workspace root; default the whole workspace. `glob` keeps only files whose name matches, such \
as `*.rs` (`*` matches any run of characters, `?` one). Set `case_insensitive` to ignore case.";

impl Tool for Grep {
    type Input = Input;
    const NAME: &'static str = "grep";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Search,
                DESCRIPTION,
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("🔎", Some("pattern"))
            .counted_as(Counter::new("searches", "🔎", "search", "searches")),
        )
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        run(&input, context)
    }
}

cordon_kit::export_tools!(Grep);

fn run(input: &Input, context: &Context) -> Result<Outcome, String> {
    if input.pattern.is_empty() {
        return Err("the pattern is empty: give the text to look for".into());
    }
    let root = Path::new(&context.cwd);
    let start = path::resolve(&context.cwd, &input.path)?;
    let meta = fs::metadata(&start).map_err(|e| path::describe(&input.path, &e))?;
    let matcher = Matcher::new(&input.pattern, input.case_insensitive);
    let limit = cordon_kit::textfile::output_limit(context.max_output);
    let mut search = Search {
        root,
        matcher: &matcher,
        glob: input.glob.as_deref(),
        limit,
        out: String::new(),
        chars: 0,
        matches: 0,
        files: 0,
        skipped: 0,
        full: false,
        locations: Vec::new(),
    };
    if meta.is_dir() {
        search.dir(&start);
    } else {
        // A file named explicitly is searched whatever its name; say why when it cannot be.
        if meta.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{} is larger than 1 MiB; grep searches smaller text files only",
                input.path
            ));
        }
        let bytes = fs::read(&start).map_err(|e| path::describe(&input.path, &e))?;
        let text = String::from_utf8(bytes).map_err(|_| {
            format!(
                "{} is not UTF-8 text; grep searches text files only",
                input.path
            )
        })?;
        search.text(&start, &text);
    }
    Ok(search.finish(input))
}

/// A literal, optionally case-insensitive, substring matcher.
struct Matcher {
    needle: String,
    case_insensitive: bool,
}

impl Matcher {
    fn new(pattern: &str, case_insensitive: bool) -> Self {
        let needle = if case_insensitive {
            pattern.to_lowercase()
        } else {
            pattern.to_owned()
        };
        Matcher {
            needle,
            case_insensitive,
        }
    }

    fn is_match(&self, line: &str) -> bool {
        if self.case_insensitive {
            line.to_lowercase().contains(&self.needle)
        } else {
            line.contains(&self.needle)
        }
    }
}

/// One call's walk: what it found so far.
struct Search<'a> {
    root: &'a Path,
    matcher: &'a Matcher,
    glob: Option<&'a str>,
    /// The characters of output the host keeps.
    limit: usize,
    out: String,
    /// The characters in `out`.
    chars: usize,
    matches: usize,
    files: usize,
    /// Files left out: too large, not UTF-8, or unreadable.
    skipped: usize,
    /// Whether the match cap or the output limit was reached (the walk stops then).
    full: bool,
    /// The first matching line of each file with a match.
    locations: Vec<(PathBuf, u32)>,
}

impl Search<'_> {
    /// Searches the directory `dir` recursively, entries in name order so the output is stable.
    fn dir(&mut self, dir: &Path) {
        let Ok(entries) = fs::read_dir(dir) else {
            self.skipped += 1;
            return;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if self.full {
                return;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                self.skipped += 1;
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            // Symbolic links are not followed: the file type is the link's own.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                self.dir(&path);
            } else if kind.is_file() && self.glob.is_none_or(|g| glob_match(g, name)) {
                self.file(&path);
            }
        }
    }

    fn file(&mut self, path: &Path) {
        let readable = fs::metadata(path)
            .ok()
            .filter(|m| m.len() <= MAX_FILE_BYTES)
            .and_then(|_| fs::read(path).ok())
            .and_then(|bytes| String::from_utf8(bytes).ok());
        match readable {
            Some(text) => self.text(path, &text),
            None => self.skipped += 1,
        }
    }

    fn text(&mut self, path: &Path, text: &str) {
        self.files += 1;
        let shown = relative(self.root, path);
        let mut first = true;
        for (number, line) in (1u32..).zip(text.lines()) {
            if !self.matcher.is_match(line) {
                continue;
            }
            let line = line.strip_suffix('\r').unwrap_or(line);
            let line = match line.char_indices().nth(MAX_LINE_CHARS) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line.to_owned(),
            };
            let entry = format!("{shown}:{number}:{line}\n");
            let chars = entry.chars().count();
            // Whole lines only: stop before the one that would pass what the host keeps.
            if self.matches == MAX_MATCHES || (self.matches > 0 && self.chars + chars > self.limit)
            {
                self.full = true;
                return;
            }
            if first {
                self.locations.push((path.to_path_buf(), number));
                first = false;
            }
            self.chars += chars;
            self.out.push_str(&entry);
            self.matches += 1;
        }
    }

    fn finish(self, input: &Input) -> Outcome {
        let files = count(self.files, "file", "files");
        let mut notes = Vec::new();
        if self.full {
            notes.push(format!(
                "stopped after {}: there may be more; narrow `pattern`, `path` or `glob`",
                count(self.matches, "match", "matches")
            ));
        }
        if self.skipped > 0 {
            notes.push(format!(
                "{} skipped (over 1 MiB, not UTF-8 or unreadable)",
                count(self.skipped, "file", "files")
            ));
        }
        let mut outcome = if self.matches == 0 {
            Outcome::success(format!(
                "No matches for {:?} in {} ({files} searched).",
                input.pattern, input.path
            ))
        } else {
            let mut out = self.out;
            out.pop();
            Outcome::success(out)
        };
        if !notes.is_empty() {
            outcome = outcome.with_trailer(format!("[{}]", notes.join("; ")));
        }
        for (path, line) in self.locations {
            outcome = outcome.with_location(path.to_string_lossy(), Some(line));
        }
        outcome
    }
}

/// `path` relative to `root` when it is inside it (always, for paths that passed `resolve`).
fn relative(root: &Path, path: &Path) -> String {
    match path.strip_prefix(root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

fn count(n: usize, singular: &str, plural: &str) -> String {
    cordon_kit::textfile::count(n, singular, plural)
}

/// Whether the file name `name` matches `glob`: `*` stands for any run of characters, `?` for
/// one character, everything else for itself.
fn glob_match(glob: &str, name: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Classic backtracking over the last `*`: linear in practice, no recursion.
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_file_names() {
        assert!(glob_match("*.rs", "main.rs"));
        assert!(!glob_match("*.rs", "main.rsx"));
        assert!(glob_match("Cargo.toml", "Cargo.toml"));
        assert!(!glob_match("Cargo.toml", "Cargo.lock"));
        assert!(glob_match("test_*.py", "test_grep.py"));
        assert!(glob_match("?.txt", "a.txt"));
        assert!(!glob_match("?.txt", "ab.txt"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
    }

    #[test]
    fn matching_is_literal_and_optionally_case_insensitive() {
        assert!(Matcher::new("fn main", false).is_match("pub fn main() {"));
        assert!(!Matcher::new("FN", false).is_match("fn"));
        assert!(Matcher::new("FN", true).is_match("pub fn"));
        assert!(Matcher::new("a.b", false).is_match("x a.b y"));
        assert!(!Matcher::new("a.b", false).is_match("axb"));
    }

    #[test]
    fn paths_are_shown_relative_to_the_root() {
        let root = Path::new("/ws");
        assert_eq!(relative(root, Path::new("/ws/src/a.rs")), "src/a.rs");
        assert_eq!(relative(root, Path::new("/ws")), ".");
    }
}
