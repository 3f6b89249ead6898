//! Line diffs with line numbers, as the file tools show them to the model.
//!
//! [`diff`] compares two texts line by line and renders the changes as unified hunks with three
//! lines of context. The format, exactly:
//!
//! ```text
//! @@ -10,3 +10,3 @@
//! 10   fn main() {
//! 11 -     let x = 1;
//! 11 +     let x = 2;
//! ```
//!
//! - Each hunk starts with a header `@@ -a,b +c,d @@`: `a` is the first old line of the hunk
//!   (1-based) and `b` the number of old lines it covers, `c` and `d` the same for the new text.
//!   The count is always written. As in GNU diff, a range covering no line gives as its start the
//!   line before it (`-0,0` for an empty old text).
//! - Each line of a hunk is `<number> <marker> <content>`: the marker is a space for a context
//!   line, `-` for a removed line and `+` for an added one; the number is the line's number in
//!   the new text for context and added lines and in the old text for removed lines,
//!   right-aligned to the width of the largest number in the whole diff. The content is the line
//!   without its line ending (`\n` or `\r\n`). A line whose content is empty ends after its
//!   marker, with no trailing space (a context line after its number).
//! - A line that has no final newline (the last line of a text) is followed by the line
//!   `\ No newline at end of file`, as in git.
//! - Lines are separated by `\n`; the text has no trailing newline. Two identical texts give an
//!   empty text.
//!
//! The diff runs under a deadline ([`DEADLINE`]): past it the algorithm settles for a correct but
//! possibly larger diff, so a pathological input cannot stall a call.
//!
//! Its cost follows the change, not the file: the lines the two texts share at the start and at
//! the end are skipped before the diff algorithm sees them (as it would skip them itself, after
//! splitting and comparing every line), keeping the context lines shown around a change.

use std::fmt::Write as _;
use std::ops::Range;
use std::time::Duration;

use similar::{Algorithm, ChangeTag, DiffTag, TextDiff};

/// How long the diff algorithm may search for a minimal diff before approximating.
pub const DEADLINE: Duration = Duration::from_millis(200);

/// Lines of unchanged context around each change.
pub const CONTEXT: usize = 3;

/// The line printed after a line that has no final newline.
pub const NO_NEWLINE: &str = "\\ No newline at end of file";

/// A rendered diff and its summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDiff {
    /// The hunks, in the format described in the [module documentation](self).
    pub text: String,
    /// The lines of the diff left out of `text` to keep it within the requested limit.
    pub omitted_lines: usize,
    /// Lines added (present in the new text only).
    pub added: usize,
    /// Lines deleted (present in the old text only).
    pub deleted: usize,
    /// The 1-based line of the new text where the first change is, or none when the texts are
    /// identical. A change that removes the end of the text points at the new text's last line.
    pub first_changed_line: Option<u32>,
}

impl LineDiff {
    /// Whether the two texts differ.
    pub fn changed(&self) -> bool {
        self.first_changed_line.is_some()
    }

    /// Drops whole lines from the end of the text until it holds at most `max_chars`
    /// characters, counting them in [`LineDiff::omitted_lines`].
    pub fn shrink_to(&mut self, max_chars: usize) {
        let mut chars = self.text.chars().count();
        while chars > max_chars {
            let cut = self.text.rfind('\n').unwrap_or(0);
            chars -= self.text[cut..].chars().count();
            self.text.truncate(cut);
            self.omitted_lines += 1;
        }
    }
}

/// Diffs `old` against `new`. The text holds the whole lines of the diff that fit in `max_chars`
/// characters, from the start; [`LineDiff::omitted_lines`] says how many did not fit. The
/// counts always cover the whole diff.
pub fn diff(old: &str, new: &str, max_chars: Option<usize>) -> LineDiff {
    diff_sharing(old, new, 0, 0, max_chars)
}

/// [`diff`] for a caller that knows the texts share their first `head` and their last `tail`
/// bytes, as an edit that replaced only text between them does: those bytes are not compared.
/// Finding where two large texts start to differ is most of the cost of diffing them.
pub fn diff_sharing(
    old: &str,
    new: &str,
    head: usize,
    tail: usize,
    max_chars: Option<usize>,
) -> LineDiff {
    let (old_bytes, new_bytes) = (old.as_bytes(), new.as_bytes());
    debug_assert!(old_bytes[..head] == new_bytes[..head], "a shared head");
    debug_assert!(
        old_bytes[old.len() - tail..] == new_bytes[new.len() - tail..],
        "a shared tail"
    );
    diff_within(
        old,
        new,
        Window::of(old_bytes, new_bytes, head, tail),
        max_chars,
    )
}

/// [`diff`], giving the diff algorithm only the `window` of the texts.
fn diff_within(old: &str, new: &str, window: Window, max_chars: Option<usize>) -> LineDiff {
    // Lines before the window: the same number in both texts.
    let skip = window.lines_before;
    let lines_after = crate::lines::count_lines(&new[window.new.end..]);
    let text_diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DEADLINE)
        .diff_lines(&old[window.old], &new[window.new]);

    let mut added = 0;
    let mut deleted = 0;
    let mut first: Option<usize> = None;
    for op in text_diff.ops() {
        let (tag, old_range, new_range) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        added += new_range.len();
        deleted += old_range.len();
        first.get_or_insert(new_range.start);
    }
    let new_lines = skip + text_diff.new_len() + lines_after;
    let first_changed_line = first.map(|start| {
        let line = (skip + start + 1).min(new_lines.max(1));
        u32::try_from(line).unwrap_or(u32::MAX)
    });

    let groups = text_diff.grouped_ops(CONTEXT);
    let width = groups
        .iter()
        .flatten()
        .flat_map(|op| text_diff.iter_changes(op))
        .map(|change| shown_number(change.tag(), change.old_index(), change.new_index(), skip))
        .max()
        .unwrap_or(0)
        .to_string()
        .len();

    let limit = max_chars.unwrap_or(usize::MAX);
    let mut lines = 0usize;
    let mut rendered = 0usize;
    let mut text = String::new();
    let mut chars = 0usize;
    let mut push = |text: &mut String, line: &str| {
        lines += 1;
        if rendered < lines - 1 {
            return;
        }
        let separator = usize::from(!text.is_empty());
        let needed = separator + line.chars().count();
        if chars + needed > limit {
            return;
        }
        if separator == 1 {
            text.push('\n');
        }
        text.push_str(line);
        chars += needed;
        rendered += 1;
    };
    for group in &groups {
        let (Some(first_op), Some(last_op)) = (group.first(), group.last()) else {
            continue;
        };
        let header = format!(
            "@@ -{} +{} @@",
            range(first_op.old_range().start + skip..last_op.old_range().end + skip),
            range(first_op.new_range().start + skip..last_op.new_range().end + skip),
        );
        push(&mut text, &header);
        for op in group {
            for change in text_diff.iter_changes(op) {
                let tag = change.tag();
                let number = shown_number(tag, change.old_index(), change.new_index(), skip);
                let marker = match tag {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                let content = strip_line_ending(change.value());
                let mut line = String::with_capacity(width + 3 + content.len());
                let _ = write!(line, "{number:>width$} {marker} {content}");
                if content.is_empty() {
                    line.truncate(line.trim_end().len());
                }
                push(&mut text, &line);
                if change.missing_newline() {
                    push(&mut text, NO_NEWLINE);
                }
            }
        }
    }
    let omitted_lines = lines - rendered;

    LineDiff {
        text,
        omitted_lines,
        added,
        deleted,
        first_changed_line,
    }
}

/// The number shown for a line: its new number, or its old number when it was removed; the
/// indices count from `offset` lines into the texts.
fn shown_number(
    tag: ChangeTag,
    old_index: Option<usize>,
    new_index: Option<usize>,
    offset: usize,
) -> usize {
    let index = match tag {
        ChangeTag::Delete => old_index,
        ChangeTag::Equal | ChangeTag::Insert => new_index,
    };
    index.map_or(0, |i| offset + i + 1)
}

/// The part of two texts the diff algorithm needs to see: everything but the whole lines they
/// share at the start and at the end, widened by [`CONTEXT`] of those lines on each side. The
/// lines skipped at the start are the same in both texts, so are those at the end.
struct Window {
    /// The window's byte range in the old text.
    old: Range<usize>,
    /// The window's byte range in the new text.
    new: Range<usize>,
    /// The number of lines before the window.
    lines_before: usize,
}

impl Window {
    /// The window of `old` and `new`, which are known to share their first `same_head` and
    /// last `same_tail` bytes.
    fn of(old: &[u8], new: &[u8], same_head: usize, same_tail: usize) -> Self {
        // The shared head, in whole lines: up to the last line start within the common prefix.
        let prefix = same_head + common_prefix(&old[same_head..], &new[same_head..]);
        let head = line_start(old, prefix);
        // The shared tail, in whole lines, not overlapping the head: it must start at a line
        // start in both texts. Within the common suffix the byte before a start is the same in
        // both, so past its first line any line start in the old text is one in the new.
        let known = same_tail.min(old.len() - head).min(new.len() - head);
        let suffix =
            known + common_suffix(&old[head..old.len() - known], &new[head..new.len() - known]);
        let at_line_start = |text: &[u8], at: usize| at == 0 || text[at - 1] == b'\n';
        let tail =
            if at_line_start(old, old.len() - suffix) && at_line_start(new, new.len() - suffix) {
                suffix
            } else {
                let from = old.len() - suffix;
                match old[from..].iter().position(|&b| b == b'\n') {
                    Some(i) => old.len() - (from + i + 1),
                    None => 0,
                }
            };
        let start = lines_back(old, head, CONTEXT);
        let old_end = lines_forward(old, old.len() - tail, CONTEXT);
        let new_end = new.len() - tail + (old_end - (old.len() - tail));
        Window {
            old: start..old_end,
            new: start..new_end,
            lines_before: memchr::memchr_iter(b'\n', &old[..start]).count(),
        }
    }
}

/// The start of the line holding byte `at` of `text` (`at` itself when a line starts there).
fn line_start(text: &[u8], at: usize) -> usize {
    text[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
}

/// The start of the line `n` lines before the one starting at `at`, or 0.
fn lines_back(text: &[u8], mut at: usize, n: usize) -> usize {
    for _ in 0..n {
        if at == 0 {
            break;
        }
        at = line_start(text, at - 1);
    }
    at
}

/// The start of the line `n` lines after the one starting at `at`, or the end of `text`.
fn lines_forward(text: &[u8], mut at: usize, n: usize) -> usize {
    for _ in 0..n {
        match text[at..].iter().position(|&b| b == b'\n') {
            Some(i) => at += i + 1,
            None => return text.len(),
        }
    }
    at
}

// The plugins run as WebAssembly, where comparing or scanning byte by byte (which is what
// `==` on large slices comes down to) is several times slower than eight bytes at a time.

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let words = a[..n]
        .chunks_exact(8)
        .zip(b[..n].chunks_exact(8))
        .take_while(|(x, y)| word(x) == word(y))
        .count();
    let at = words * 8;
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The length of the longest common suffix of `a` and `b`.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let words = a
        .rchunks_exact(8)
        .zip(b.rchunks_exact(8))
        .take_while(|(x, y)| word(x) == word(y))
        .count();
    let at = n - words * 8;
    words * 8
        + a[..at]
            .iter()
            .rev()
            .zip(b[..at].iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
}

fn word(bytes: &[u8]) -> u64 {
    u64::from_ne_bytes(bytes.try_into().expect("eight bytes"))
}

/// A hunk range `start,count` from a 0-based range of lines.
fn range(lines: Range<usize>) -> String {
    if lines.is_empty() {
        format!("{},0", lines.start)
    } else {
        format!("{},{}", lines.start + 1, lines.len())
    }
}

/// `line` without its `\n` or `\r\n`.
fn strip_line_ending(line: &str) -> &str {
    let line = line.strip_suffix('\n').unwrap_or(line);
    line.strip_suffix('\r').unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(old: &str, new: &str) -> String {
        diff(old, new, None).text
    }

    #[test]
    fn identical_texts_give_nothing() {
        let d = diff("a\nb\n", "a\nb\n", None);
        assert_eq!(d.text, "");
        assert_eq!((d.added, d.deleted, d.first_changed_line), (0, 0, None));
        assert!(!d.changed());
    }

    #[test]
    fn a_changed_line_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            render(old, new),
            "@@ -2,7 +2,7 @@\n\
             2   b\n\
             3   c\n\
             4   d\n\
             5 - e\n\
             5 + E\n\
             6   f\n\
             7   g\n\
             8   h"
        );
        let d = diff(old, new, None);
        assert_eq!((d.added, d.deleted, d.first_changed_line), (1, 1, Some(5)));
    }

    #[test]
    fn numbers_are_aligned_to_the_widest() {
        let old: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l9\n", "nine\n").replace("l11\n", "eleven\n");
        assert_eq!(
            render(&old, &new),
            "@@ -6,7 +6,7 @@\n\
             \x206   l6\n\
             \x207   l7\n\
             \x208   l8\n\
             \x209 - l9\n\
             \x209 + nine\n\
             10   l10\n\
             11 - l11\n\
             11 + eleven\n\
             12   l12"
        );
    }

    #[test]
    fn distant_changes_make_separate_hunks() {
        let old: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let new = old.replace("l2\n", "two\n").replace("l18\n", "");
        assert_eq!(
            render(&old, &new),
            "@@ -1,5 +1,5 @@\n\
             \x201   l1\n\
             \x202 - l2\n\
             \x202 + two\n\
             \x203   l3\n\
             \x204   l4\n\
             \x205   l5\n\
             @@ -15,6 +15,5 @@\n\
             15   l15\n\
             16   l16\n\
             17   l17\n\
             18 - l18\n\
             18   l19\n\
             19   l20"
        );
        let d = diff(&old, &new, None);
        assert_eq!((d.added, d.deleted, d.first_changed_line), (1, 2, Some(2)));
    }

    #[test]
    fn a_new_file_is_all_additions() {
        assert_eq!(render("", "x\ny\n"), "@@ -0,0 +1,2 @@\n1 + x\n2 + y");
        let d = diff("", "x\ny\n", None);
        assert_eq!((d.added, d.deleted, d.first_changed_line), (2, 0, Some(1)));
    }

    #[test]
    fn emptying_a_file() {
        assert_eq!(render("x\n", ""), "@@ -1,1 +0,0 @@\n1 - x");
        assert_eq!(diff("x\n", "", None).first_changed_line, Some(1));
    }

    #[test]
    fn deleting_the_last_lines_points_at_the_last_line() {
        let d = diff("a\nb\nc\n", "a\n", None);
        assert_eq!(d.first_changed_line, Some(1));
        assert_eq!(d.text, "@@ -1,3 +1,1 @@\n1   a\n2 - b\n3 - c");
    }

    #[test]
    fn a_missing_final_newline_is_marked() {
        assert_eq!(
            render("a\nb", "a\nb\n"),
            "@@ -1,2 +1,2 @@\n1   a\n2 - b\n\\ No newline at end of file\n2 + b"
        );
    }

    #[test]
    fn empty_lines_have_no_trailing_space_and_crlf_is_stripped() {
        assert_eq!(
            render("a\r\n\r\nb\r\n", "a\r\n\r\nc\r\n"),
            "@@ -1,3 +1,3 @@\n1   a\n2\n3 - b\n3 + c"
        );
        assert_eq!(render("a\n", "a\n\n"), "@@ -1,1 +1,2 @@\n1   a\n2 +");
    }

    #[test]
    fn rendering_keeps_the_whole_lines_that_fit_and_counts_everything() {
        let new: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let d = diff("", &new, Some(46));
        assert_eq!(d.text, "@@ -0,0 +1,1000 @@\n   1 + line 1\n   2 + line 2");
        assert_eq!(d.omitted_lines, 998);
        assert_eq!(d.added, 1000);
        let mut d = diff("a", "b", Some(100));
        d.shrink_to(21);
        assert_eq!(d.text, "@@ -1,1 +1,1 @@\n1 - a");
        assert_eq!(d.omitted_lines, 3);
        d.shrink_to(3);
        assert_eq!(d.text, "");
        assert_eq!(d.omitted_lines, 5);
        let d = diff("a", "b", Some(100));
        assert_eq!(d.omitted_lines, 0);
        let d = diff("a", "b", Some(26));
        assert_eq!(d.text, "@@ -1,1 +1,1 @@\n1 - a");
        assert_eq!(d.omitted_lines, 3);
    }

    /// The diff of the whole texts, without skipping their shared lines.
    fn whole(old: &str, new: &str, max_chars: Option<usize>) -> LineDiff {
        let window = Window {
            old: 0..old.len(),
            new: 0..new.len(),
            lines_before: 0,
        };
        diff_within(old, new, window, max_chars)
    }

    #[test]
    fn skipping_the_shared_lines_changes_nothing() {
        let base: Vec<String> = (1..=40).map(|i| format!("line {i}\n")).collect();
        let text = |lines: &[String]| lines.concat();
        let mut cases: Vec<(String, String)> = Vec::new();
        for at in [0, 1, 2, 3, 4, 5, 19, 35, 36, 37, 38, 39] {
            let mut changed = base.clone();
            changed[at] = "changed\n".into();
            cases.push((text(&base), text(&changed)));
            let mut removed = base.clone();
            removed.remove(at);
            cases.push((text(&base), text(&removed)));
            let mut added = base.clone();
            added.insert(at, "added\n".into());
            cases.push((text(&base), text(&added)));
            let mut two = changed.clone();
            two[(at + 9) % 40] = "also\n".into();
            cases.push((text(&base), text(&two)));
        }
        let all = text(&base);
        let unterminated = all.trim_end_matches('\n').to_string();
        for (old, new) in [
            (all.clone(), all.clone()),
            (all.clone(), unterminated.clone()),
            (unterminated.clone(), format!("{unterminated}x")),
            (all.clone(), format!("{all}more\nlines")),
            (all.clone(), String::new()),
            (String::new(), all.clone()),
            (
                all.replace('\n', "\r\n"),
                all.replace('\n', "\r\n").replace("line 7\r", "7\r"),
            ),
            ("a\na\n".into(), "a\n".into()),
            ("x\nsame\n".into(), "y\nsame\n".into()),
            ("same\nx".into(), "same\ny".into()),
            ("ab\n".into(), "ab".into()),
            ("a\nb\n".into(), "a\nX\nb\n".into()),
            ("héllo\nwörld\n".into(), "héllo\nwörld!\n".into()),
        ] {
            cases.push((old, new));
        }
        for (old, new) in &cases {
            // Whatever true head and tail a caller claims, the diff is the same.
            let (a, b) = (old.as_bytes(), new.as_bytes());
            let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            let suffix = a
                .iter()
                .rev()
                .zip(b.iter().rev())
                .take_while(|(x, y)| x == y);
            let suffix = suffix.count();
            for max in [None, Some(40)] {
                let expected = whole(old, new, max);
                assert_eq!(diff(old, new, max), expected, "{old:?} -> {new:?}");
                for head in [prefix / 2, prefix] {
                    for tail in [0, suffix / 2, suffix] {
                        assert_eq!(
                            diff_sharing(old, new, head, tail, max),
                            expected,
                            "{old:?} -> {new:?}, sharing {head} and {tail}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_the_change_and_its_context_reach_the_algorithm() {
        let old: String = (1..=10_000).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 5000\n", "changed\n");
        let window = Window::of(old.as_bytes(), new.as_bytes(), 0, 0);
        assert_eq!(window.lines_before, 4996);
        assert_eq!(
            &old[window.old],
            "line 4997\nline 4998\nline 4999\nline 5000\nline 5001\nline 5002\nline 5003\n"
        );
        assert_eq!(
            &new[window.new],
            "line 4997\nline 4998\nline 4999\nchanged\nline 5001\nline 5002\nline 5003\n"
        );
    }

    #[test]
    fn the_byte_helpers_agree_with_the_obvious() {
        let text = b"one\ntwo\n\nthree four five six seven\neight\n";
        for len in 0..text.len() {
            let t = &text[..len];
            for cut in 0..len {
                let mut other = t.to_vec();
                other[cut] = b'#';
                assert_eq!(common_prefix(t, &other), cut);
                assert_eq!(common_suffix(t, &other), len - cut - 1);
            }
            assert_eq!(common_prefix(t, text), len);
            assert_eq!(common_suffix(t, t), len);
        }
    }

    #[test]
    fn a_large_diff_finishes_quickly() {
        let old: String = (0..20_000).map(|i| format!("{}\n", i * 7 % 1013)).collect();
        let new: String = (0..20_000)
            .map(|i| format!("{}\n", i * 11 % 1019))
            .collect();
        let started = std::time::Instant::now();
        let d = diff(&old, &new, Some(10_000));
        assert!(d.changed());
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
