//! The `edit_file` tool: exact, all-or-nothing replacements in an existing text file.
//!
//! Every edit's `old` text must occur exactly once in the original file; all edits are located
//! in the original (never in the result of another edit) and must not overlap, nest or repeat.
//! If any edit is refused, nothing is written. A file whose lines all end in `\r\n` keeps them:
//! edits are matched against its text with `\n` line endings, and the result is written back
//! with `\r\n`.

use std::borrow::Cow;
use std::ops::Range;
use std::path::Path;

use cordon_kit::textfile::{self, DRY_RUN, count};
use cordon_kit::{Context, Declaration, Kind, Outcome, Tool, diff, path};
use schemars::JsonSchema;
use serde::Deserialize;

/// The `edit_file` tool.
pub struct EditFile;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Path of an existing file, relative to the workspace root.
    path: String,
    /// Replacements, all located in the original file.
    #[schemars(length(min = 1))]
    edits: Vec<Edit>,
    /// Report what would change, write nothing.
    #[serde(default)]
    dry_run: bool,
}

// One replacement. Not a doc comment: that would become the description of the schema's
// `edits` items, which the model sees.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Edit {
    /// Exact text to find; must occur exactly once.
    old: String,
    /// Replacement text; empty deletes the matched text.
    new: String,
}

const DESCRIPTION: &str = "Edit an existing text file by exact text replacement. `path` is \
relative to the workspace root. Each edit replaces `old` with `new` (an empty `new` deletes). \
`old` must match the file exactly, whitespace and indentation included, and occur exactly once: \
include enough surrounding lines to make it unique, and never include read_file line numbers. \
All edits are matched against the original file, not one after another, and must not overlap. \
If any edit is refused, nothing is written. Line endings (LF or CRLF) are preserved. Returns a \
headline and a diff with line numbers; set `dry_run` to see the diff without writing. To create \
a file or rewrite it entirely, use write_file.";

impl Tool for EditFile {
    type Input = Input;
    const NAME: &'static str = "edit_file";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Edit,
                DESCRIPTION,
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("✏️", Some("path"))
            .counted_as(textfile::file_ops_counter()),
        )
    }

    fn dry_run(input: &Input) -> bool {
        input.dry_run
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        run(&input, context)
    }
}

cordon_kit::export_tools!(EditFile);

fn run(input: &Input, context: &Context) -> Result<Outcome, String> {
    let given = input.path.as_str();
    let abs = path::resolve(&context.cwd, given)?;
    let location = textfile::display(&abs);
    let bytes = textfile::read_existing(Path::new(&context.cwd), &abs, given, EditFile::NAME)?
        .ok_or_else(|| textfile::missing(given))?;
    let original = String::from_utf8(bytes).map_err(|_| {
        format!("{given} is not UTF-8 text; edit_file edits text files only. Nothing was written.")
    })?;
    let Edited {
        text: edited,
        head,
        tail,
    } = edit(&original, &input.edits, given)?;
    let limit = textfile::output_limit(context.max_output);
    // The diff says whether anything changed: comparing the texts first would read them
    // through once more.
    let change = diff::diff_sharing(&original, &edited, head, tail, Some(limit));
    if !change.changed() {
        return Ok(Outcome::success(format!(
            "The edits leave {given} unchanged; nothing was written."
        ))
        .with_location(location, None));
    }
    if !context.dry_run {
        textfile::replace(&abs, given, edited.as_bytes())?;
    }
    let headline = headline(given, input.edits.len(), &change, context.dry_run);
    let line = change.first_changed_line;
    Ok(textfile::change_outcome(headline, change, limit)
        .with_location(location.clone(), line)
        .with_diff(context, location, Some(original), edited))
}

/// The first line of a successful call's output.
fn headline(given: &str, edits: usize, change: &diff::LineDiff, dry_run: bool) -> String {
    let stats = format!(
        "+{} -{} lines, first change at line {}",
        change.added,
        change.deleted,
        change.first_changed_line.unwrap_or(1)
    );
    if dry_run {
        format!(
            "{DRY_RUN}would edit {given}: {}, {stats}",
            count(edits, "edit", "edits")
        )
    } else {
        format!(
            "Edited {given}: {}, {stats}",
            count(edits, "edit applied", "edits applied")
        )
    }
}

/// A file's text after its edits.
struct Edited {
    text: String,
    /// How many of its first bytes are the original's, untouched by any edit.
    head: usize,
    /// How many of its last bytes are.
    tail: usize,
}

/// Applies `edits` to `original`, keeping its line endings; the refusal text when any edit is
/// refused.
fn edit(original: &str, edits: &[Edit], given: &str) -> Result<Edited, String> {
    let endings = LineEndings::of(original);
    let (text, edits) = match endings {
        LineEndings::Crlf => (Cow::Owned(original.replace("\r\n", "\n")), normalize(edits)),
        LineEndings::Lf => (Cow::Borrowed(original), normalize(edits)),
        LineEndings::Mixed => (Cow::Borrowed(original), edits.to_vec()),
    };
    let located = locate(&text, &edits, given).map_err(|problems| {
        let mut out =
            format!("Nothing was written to {given}; fix these edits and send them all again:");
        for problem in problems {
            out.push('\n');
            out.push_str(&problem);
        }
        out
    })?;
    let result = splice(&text, &located, &edits);
    Ok(match endings {
        // Offsets in the text with `\n` endings are not offsets in the original.
        LineEndings::Crlf => Edited {
            text: result.replace('\n', "\r\n"),
            head: 0,
            tail: 0,
        },
        LineEndings::Lf | LineEndings::Mixed => {
            // Sorted and disjoint: the first starts first, the last ends last.
            let head = located.first().map_or(0, |(range, _)| range.start);
            let tail = located
                .last()
                .map_or(0, |(range, _)| text.len() - range.end);
            Edited {
                text: result,
                head,
                tail,
            }
        }
    })
}

/// How the lines of a file end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LineEndings {
    /// Every line break is `\n` alone (or there is none).
    Lf,
    /// Every line break is `\r\n`.
    Crlf,
    /// Both occur: edits are matched exactly as given.
    Mixed,
}

impl LineEndings {
    fn of(text: &str) -> Self {
        // Most files have no `\r` at all: one quick scan settles it.
        if memchr::memchr(b'\r', text.as_bytes()).is_none() {
            return LineEndings::Lf;
        }
        let newlines = text.matches('\n').count();
        let crlf = text.matches("\r\n").count();
        match (crlf, newlines) {
            (0, _) => LineEndings::Lf,
            (c, n) if c == n => LineEndings::Crlf,
            _ => LineEndings::Mixed,
        }
    }
}

/// `edits` with their `\r\n` line breaks turned into `\n`.
fn normalize(edits: &[Edit]) -> Vec<Edit> {
    edits
        .iter()
        .map(|e| Edit {
            old: e.old.replace("\r\n", "\n"),
            new: e.new.replace("\r\n", "\n"),
        })
        .collect()
}

/// Where each edit's `old` text is in `text`, sorted by position, as (range, edit index); or
/// every problem found, one line each.
fn locate(
    text: &str,
    edits: &[Edit],
    given: &str,
) -> Result<Vec<(Range<usize>, usize)>, Vec<String>> {
    let mut problems = Vec::new();
    let mut found = Vec::new();
    for (index, edit) in edits.iter().enumerate() {
        let n = index + 1;
        if edit.old.is_empty() {
            problems.push(format!(
                "edit {n}: old is empty; give the exact text to replace (to write a whole file, use write_file)"
            ));
            continue;
        }
        let at = occurrences(text, &edit.old);
        match at.as_slice() {
            [] => problems.push(format!(
                "edit {n}: old text not found in {given}. It must match the file exactly, \
                 whitespace and indentation included, without read_file line numbers; read the \
                 file and copy the text."
            )),
            [start] => found.push((*start..*start + edit.old.len(), index)),
            many => {
                let mut lines: Vec<usize> = many.iter().map(|&at| line_of(text, at)).collect();
                lines.dedup();
                problems.push(format!(
                    "edit {n}: old text occurs {} times in {given} (at lines {}); include more \
                     surrounding lines in old so that it occurs exactly once.",
                    many.len(),
                    list(&lines)
                ));
            }
        }
    }
    for (a, (first, i)) in found.iter().enumerate() {
        for (second, j) in &found[a + 1..] {
            let (i, j) = (i + 1, j + 1);
            let line = line_of(text, first.start.max(second.start));
            if first == second {
                problems.push(format!(
                    "edits {i} and {j} replace the same text (line {line}); merge them into one edit."
                ));
            } else if first.start <= second.start && second.end <= first.end {
                problems.push(format!(
                    "edit {j}'s old text lies inside edit {i}'s (line {line}); merge them into one edit."
                ));
            } else if second.start <= first.start && first.end <= second.end {
                problems.push(format!(
                    "edit {i}'s old text lies inside edit {j}'s (line {line}); merge them into one edit."
                ));
            } else if first.start < second.end && second.start < first.end {
                problems.push(format!(
                    "edits {i} and {j} overlap (line {line}); merge them into one edit or make their old texts disjoint."
                ));
            }
        }
    }
    if problems.is_empty() {
        found.sort_by_key(|(range, _)| range.start);
        Ok(found)
    } else {
        Err(problems)
    }
}

/// The start of every occurrence of `needle` (not empty) in `text`, overlapping ones included.
///
/// Finding them reads the whole file; `memchr`'s searcher does it several times faster than
/// `str::find` in WebAssembly.
fn occurrences(text: &str, needle: &str) -> Vec<usize> {
    let step = needle.chars().next().map_or(1, char::len_utf8);
    let finder = memchr::memmem::Finder::new(needle);
    let mut at = Vec::new();
    let mut from = 0;
    while let Some(found) = finder.find(&text.as_bytes()[from..]) {
        at.push(from + found);
        from += found + step;
    }
    at
}

/// The 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `1, 2 and 3`, with at most ten numbers shown.
fn list(numbers: &[usize]) -> String {
    const SHOWN: usize = 10;
    let words: Vec<String> = numbers.iter().take(SHOWN).map(usize::to_string).collect();
    match words.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] if numbers.len() <= SHOWN => format!("{} and {last}", init.join(", ")),
        _ => format!("{}, …", words.join(", ")),
    }
}

/// `text` with each located range replaced by its edit's `new` text.
fn splice(text: &str, located: &[(Range<usize>, usize)], edits: &[Edit]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for (range, index) in located {
        out.push_str(&text[copied..range.start]);
        out.push_str(&edits[*index].new);
        copied = range.end;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits(pairs: &[(&str, &str)]) -> Vec<Edit> {
        pairs
            .iter()
            .map(|(old, new)| Edit {
                old: old.to_string(),
                new: new.to_string(),
            })
            .collect()
    }

    /// The edited text; checks on the way that the head and tail it claims are the original's.
    fn apply(text: &str, pairs: &[(&str, &str)]) -> Result<String, String> {
        let edited = edit(text, &edits(pairs), "f.txt")?;
        let (old, new) = (text.as_bytes(), edited.text.as_bytes());
        assert_eq!(old[..edited.head], new[..edited.head], "head of {text:?}");
        let (old_tail, new_tail) = (old.len() - edited.tail, new.len() - edited.tail);
        assert_eq!(old[old_tail..], new[new_tail..], "tail of {text:?}");
        Ok(edited.text)
    }

    const HEAD: &str = "Nothing was written to f.txt; fix these edits and send them all again:\n";

    #[test]
    fn a_unique_match_is_replaced() {
        assert_eq!(apply("a\nb\nc\n", &[("b", "B")]).unwrap(), "a\nB\nc\n");
        assert_eq!(apply("a\nb\nc\n", &[("b\n", "")]).unwrap(), "a\nc\n");
    }

    #[test]
    fn not_found_names_the_edit() {
        assert_eq!(
            apply("a\nb\n", &[("a", "x"), ("zzz", "y")]).unwrap_err(),
            format!(
                "{HEAD}edit 2: old text not found in f.txt. It must match the file exactly, \
                 whitespace and indentation included, without read_file line numbers; read the \
                 file and copy the text."
            )
        );
    }

    #[test]
    fn ambiguous_says_how_many_times_and_where() {
        assert_eq!(
            apply("x = 1\ny = 2\nx = 1\n\nx = 1\n", &[("x = 1", "x = 3")]).unwrap_err(),
            format!(
                "{HEAD}edit 1: old text occurs 3 times in f.txt (at lines 1, 3 and 5); include \
                 more surrounding lines in old so that it occurs exactly once."
            )
        );
        // Overlapping occurrences count too.
        assert!(
            apply("aaa", &[("aa", "b")])
                .unwrap_err()
                .contains("occurs 2 times")
        );
    }

    #[test]
    fn empty_old_is_refused() {
        assert!(
            apply("a\n", &[("", "b")])
                .unwrap_err()
                .contains("edit 1: old is empty")
        );
    }

    #[test]
    fn overlapping_nested_and_repeated_edits_are_refused() {
        let text = "alpha beta gamma\ndelta\n";
        assert_eq!(
            apply(text, &[("alpha beta", "1"), ("beta gamma", "2")]).unwrap_err(),
            format!(
                "{HEAD}edits 1 and 2 overlap (line 1); merge them into one edit or make their \
                 old texts disjoint."
            )
        );
        assert_eq!(
            apply(text, &[("beta", "1"), ("alpha beta gamma", "2")]).unwrap_err(),
            format!(
                "{HEAD}edit 1's old text lies inside edit 2's (line 1); merge them into one edit."
            )
        );
        assert_eq!(
            apply(text, &[("delta", "1"), ("gamma", "g"), ("delta", "2")]).unwrap_err(),
            format!(
                "{HEAD}edits 1 and 3 replace the same text (line 2); merge them into one edit."
            )
        );
    }

    #[test]
    fn adjacent_edits_are_fine() {
        assert_eq!(
            apply("abcd", &[("cd", "CD"), ("ab", "AB")]).unwrap(),
            "ABCD"
        );
    }

    #[test]
    fn every_problem_is_reported() {
        let err = apply("a b a\n", &[("a", "x"), ("q", "y"), ("", "z")]).unwrap_err();
        assert!(err.contains("edit 1: old text occurs 2 times"), "{err}");
        assert!(err.contains("edit 2: old text not found"), "{err}");
        assert!(err.contains("edit 3: old is empty"), "{err}");
    }

    #[test]
    fn edits_are_located_in_the_original_never_in_cascade() {
        // Edit 1 creates a second "b", edit 2 would then be ambiguous, and edit 3's old text
        // only exists after edit 1: resolved against the original, 1 and 2 apply, 3 is refused.
        assert_eq!(
            apply("a\nb\n", &[("a", "b"), ("b", "c")]).unwrap(),
            "b\nc\n"
        );
        assert!(
            apply("a\nb\n", &[("a", "xyz"), ("xyz", "w")])
                .unwrap_err()
                .contains("edit 2: old text not found")
        );
        // Swapping two names works in one call.
        assert_eq!(apply("x y", &[("x", "y"), ("y", "x")]).unwrap(), "y x");
    }

    #[test]
    fn crlf_files_keep_crlf() {
        let text = "one\r\ntwo\r\nthree\r\n";
        assert_eq!(
            apply(text, &[("one\ntwo\n", "1\n2\n2.5\n")]).unwrap(),
            "1\r\n2\r\n2.5\r\nthree\r\n"
        );
        // An old text given with \r\n works too.
        assert_eq!(
            apply(text, &[("two\r\nthree", "2\r\n3")]).unwrap(),
            "one\r\n2\r\n3\r\n"
        );
        assert_eq!(LineEndings::of(text), LineEndings::Crlf);
        assert_eq!(LineEndings::of("a\nb"), LineEndings::Lf);
        assert_eq!(LineEndings::of("a\r\nb\n"), LineEndings::Mixed);
    }

    #[test]
    fn lf_files_stay_lf() {
        assert_eq!(apply("a\nb\n", &[("a\r\nb", "x\r\ny")]).unwrap(), "x\ny\n");
    }

    #[test]
    fn mixed_files_match_exactly() {
        assert_eq!(
            apply("a\r\nb\nc\n", &[("b\nc", "B\nC")]).unwrap(),
            "a\r\nB\nC\n"
        );
    }

    #[test]
    fn multibyte_text() {
        assert_eq!(apply("héé é\n", &[("éé", "e")]).unwrap(), "he é\n");
        assert_eq!(occurrences("ééé", "éé"), vec![0, 2]);
    }

    #[test]
    fn long_lists_are_cut() {
        assert_eq!(list(&[1]), "1");
        assert_eq!(list(&[1, 2]), "1 and 2");
        assert_eq!(
            list(&(1..=12).collect::<Vec<_>>()),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …"
        );
    }

    #[test]
    fn headlines() {
        let change = diff::diff("a\nb\nc\n", "a\nB\nc\nd\n", None);
        assert_eq!(
            headline("f.txt", 2, &change, false),
            "Edited f.txt: 2 edits applied, +2 -1 lines, first change at line 2"
        );
        assert_eq!(
            headline("f.txt", 1, &change, true),
            "Dry run, nothing written: would edit f.txt: 1 edit, +2 -1 lines, first change at line 2"
        );
    }
}
