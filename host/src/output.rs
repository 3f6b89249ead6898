//! Bounding what the model sees.
//!
//! Every output is cut to `max_output` characters (never inside a UTF-8 sequence) and says how
//! much was cut, so the model knows to ask for less. A trailing status line (`[exit code: …]`,
//! `[error: 30s timeout exceeded]`) is kept after the cut: it is the part the model needs most.
//! A command's output keeps its start and its end instead ([`ends`]): the error that stopped a
//! build or a test run is at the end.
//! Error messages about bad input quote no more than a short prefix of it ([`quote`]).

/// `text` with the value of each environment variable of `secrets` replaced by
/// `[redacted: NAME]` (values shorter than 4 bytes are left: they would redact ordinary text).
pub fn redact<'a>(text: &'a str, secrets: &[String]) -> std::borrow::Cow<'a, str> {
    let mut text = std::borrow::Cow::Borrowed(text);
    for name in secrets {
        let Some(value) = std::env::var(name).ok().filter(|v| v.len() >= 4) else {
            continue;
        };
        if text.contains(&value) {
            text = text.replace(&value, &format!("[redacted: {name}]")).into();
        }
    }
    text
}

/// Builds the final text of a call: `body` cut to `max_chars` characters, a truncation notice
/// when anything was cut (here or, `omitted_bytes`, before the host saw it), then `trailer`.
pub fn finish(body: &str, trailer: Option<&str>, max_chars: usize, omitted_bytes: u64) -> String {
    // A body of no more bytes than the limit has no more characters either: no need to count.
    let nth = if body.len() <= max_chars {
        None
    } else {
        body.char_indices().nth(max_chars)
    };
    let (kept, cut_chars) = match nth {
        Some((end, _)) => (&body[..end], body[end..].chars().count()),
        None => (body, 0),
    };
    let mut text = String::with_capacity(kept.len() + 128);
    text.push_str(kept);
    if let Some(notice) = notice(cut_chars, omitted_bytes) {
        separate(&mut text);
        text.push_str(&notice);
    }
    if let Some(trailer) = trailer.filter(|t| !t.is_empty()) {
        separate(&mut text);
        text.push_str(trailer);
    }
    text
}

fn notice(cut_chars: usize, omitted_bytes: u64) -> Option<String> {
    let what = match (cut_chars, omitted_bytes) {
        (0, 0) => return None,
        (chars, 0) => format!("{chars} more characters omitted"),
        (0, bytes) => format!("{bytes} more bytes omitted"),
        (chars, bytes) => format!("{chars} more characters and then {bytes} more bytes omitted"),
    };
    Some(format!("[output truncated: {what}. {ASK_LESS}]"))
}

/// What every truncation notice ends with.
const ASK_LESS: &str = "Ask for a smaller part, e.g. a line range or a filtered command";

/// The fewest characters of a command's output kept on each side of the notice: below that,
/// the output is cut at its start only, as any other.
const MIN_END: usize = 64;

/// A command's output as the model sees it, of at most `max_chars` characters when it can be:
/// `head`, `omitted_bytes` that were never kept, then `tail`. When it is longer, its start and
/// its end are kept, each cut at a line break where one is near, with a notice between them
/// saying how much was left out. Returns the text and the bytes still to report as omitted
/// (when `max_chars` is too small for both ends, only the start is kept, for [`finish`] to
/// cut).
pub fn ends(head: &str, tail: &str, omitted_bytes: u64, max_chars: usize) -> (String, u64) {
    let joined;
    let (head, tail) = match omitted_bytes {
        0 if tail.is_empty() => (head, tail),
        0 => {
            joined = format!("{head}{tail}");
            (joined.as_str(), "")
        }
        _ => (head, tail),
    };
    let (head_chars, tail_chars) = (head.chars().count(), tail.chars().count());
    if omitted_bytes == 0 && head_chars + tail_chars <= max_chars {
        return (head.to_string(), 0);
    }
    // The notice's length with the largest count it could show.
    let longest = between(head_chars + tail_chars, omitted_bytes)
        .chars()
        .count()
        + 2;
    let room = max_chars.saturating_sub(longest);
    if room < 2 * MIN_END {
        return (head.to_string(), omitted_bytes + tail.len() as u64);
    }
    // Without a gap, the text is split where its middle is; each side then gives up its end.
    let (head, tail) = match tail.is_empty() {
        true => head.split_at(
            head.char_indices()
                .nth(head_chars / 2)
                .map_or(0, |(i, _)| i),
        ),
        false => (head, tail),
    };
    // The end gets up to half the room, the start what the end leaves.
    let end = suffix(tail, room - room / 2);
    let start = prefix(head, room - end.chars().count());
    let cut =
        head.chars().count() + tail.chars().count() - start.chars().count() - end.chars().count();
    let mut text = String::with_capacity(start.len() + end.len() + longest);
    text.push_str(start);
    separate(&mut text);
    text.push_str(&between(cut, omitted_bytes));
    text.push('\n');
    text.push_str(end);
    (text, 0)
}

/// The notice between the two ends of a command's output.
fn between(cut_chars: usize, omitted_bytes: u64) -> String {
    let what = match omitted_bytes {
        0 => format!("{cut_chars} characters"),
        bytes => format!("{cut_chars} characters and {bytes} bytes"),
    };
    format!(
        "[output truncated: {what} omitted here, between the start and the end of the output. \
         {ASK_LESS}]"
    )
}

/// The first `chars` characters of `text`, up to the last line break among them when it is in
/// their second half.
fn prefix(text: &str, chars: usize) -> &str {
    let end = text
        .char_indices()
        .nth(chars)
        .map_or(text.len(), |(i, _)| i);
    let kept = &text[..end];
    match kept.rfind('\n') {
        Some(at) if end < text.len() && at + 1 >= end / 2 => &kept[..=at],
        _ => kept,
    }
}

/// The last `chars` characters of `text`, from the first line start among them when it is in
/// their first half.
fn suffix(text: &str, chars: usize) -> &str {
    let total = text.chars().count();
    let start = text
        .char_indices()
        .nth(total.saturating_sub(chars))
        .map_or(text.len(), |(i, _)| i);
    let kept = &text[start..];
    let after_break = start > 0 && text.as_bytes()[start - 1] == b'\n';
    match kept.find('\n') {
        Some(at) if !after_break && at < kept.len() / 2 => &kept[at + 1..],
        _ => kept,
    }
}

/// How many characters of bad input an error message quotes.
const QUOTED_CHARS: usize = 100;

/// `shown` for an error message about bad input: whole when short, else its first
/// `QUOTED_CHARS` characters, marked as cut and with the total length, e.g.
/// `{"tool": 12, … (52428800 more characters, 52428900 in all)`. Input can be a 50 MB line,
/// so only the quoted prefix is ever held: the rest is counted as it is formatted.
pub fn quote(shown: impl std::fmt::Display) -> String {
    use std::fmt::Write as _;
    let mut prefix = Prefix::default();
    // Writing into a `Prefix` never fails.
    let _ = write!(prefix, "{shown}");
    if prefix.more == 0 {
        return prefix.kept;
    }
    format!(
        "{} … ({} more characters, {} in all)",
        prefix.kept,
        prefix.more,
        QUOTED_CHARS + prefix.more
    )
}

/// The first [`QUOTED_CHARS`] characters written to it, and how many came after.
#[derive(Default)]
struct Prefix {
    kept: String,
    kept_chars: usize,
    more: usize,
}

impl std::fmt::Write for Prefix {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = QUOTED_CHARS - self.kept_chars;
        let end = s.char_indices().nth(room).map_or(s.len(), |(i, _)| i);
        self.kept.push_str(&s[..end]);
        self.kept_chars += s[..end].chars().count();
        self.more += s[end..].chars().count();
        Ok(())
    }
}

/// Puts what follows on a line of its own.
fn separate(text: &mut String) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_unchanged() {
        assert_eq!(finish("hello\n", None, 10, 0), "hello\n");
        assert_eq!(finish("", None, 0, 0), "");
    }

    #[test]
    fn cuts_at_a_character_boundary_and_says_how_much() {
        let text = finish("héllo wörld", None, 4, 0);
        assert!(
            text.starts_with("héll\n[output truncated: 7 more characters omitted."),
            "{text}"
        );
    }

    #[test]
    fn the_trailer_survives_the_cut() {
        let text = finish(
            &"y\n".repeat(1000),
            Some("[exit code: exit status 1]"),
            10,
            0,
        );
        assert!(text.ends_with("omitted. Ask for a smaller part, e.g. a line range or a filtered command]\n[exit code: exit status 1]"), "{text}");
        assert_eq!(finish("", Some("[x]"), 10, 0), "[x]");
        assert_eq!(finish("out", Some("[x]"), 10, 0), "out\n[x]");
    }

    #[test]
    fn quotes_are_whole_when_short_and_a_marked_prefix_when_long() {
        assert_eq!(quote("short"), "short");
        assert_eq!(quote(serde_json::json!([1, 2])), "[1,2]");
        let exact = "é".repeat(QUOTED_CHARS);
        assert_eq!(quote(&exact), exact);
        let long = format!("{{\"tool\": 12, \"x\": \"{}\"}}", "é".repeat(1_000_000));
        let quoted = quote(&long);
        let total = long.chars().count();
        assert_eq!(
            quoted,
            format!(
                "{} … ({} more characters, {total} in all)",
                long.chars().take(QUOTED_CHARS).collect::<String>(),
                total - QUOTED_CHARS
            )
        );
    }

    #[test]
    fn a_command_keeps_its_start_and_its_end() {
        let lines: String = (1..=2000).map(|i| format!("{i}\n")).collect();
        let (text, omitted) = ends(&lines, "error: it broke\n", 0, 1000);
        assert_eq!(omitted, 0);
        assert!(text.chars().count() <= 1000, "{}", text.len());
        assert!(text.starts_with("1\n2\n"), "{text}");
        assert!(text.ends_with("1999\n2000\nerror: it broke\n"), "{text}");
        let (start, rest) = text.split_once("[output truncated: ").unwrap();
        let (notice, end) = rest.split_once('\n').unwrap();
        // Both ends are whole lines, and the count is what is missing.
        assert!(start.ends_with('\n') && end.starts_with(|c: char| c.is_ascii_digit()));
        let total = lines.len() + "error: it broke\n".len();
        let cut = total - start.len() - end.len();
        assert_eq!(
            notice,
            format!(
                "{cut} characters omitted here, between the start and the end of the output. \
                 {ASK_LESS}]"
            )
        );
    }

    #[test]
    fn bytes_never_kept_are_counted_between_the_ends() {
        let head = "h".repeat(5000);
        let (text, omitted) = ends(&head, "the end\n", 123, 1000);
        assert_eq!(omitted, 0);
        let (start, notice) = text.split_once('\n').unwrap();
        assert!(
            start.len() > 800 && start.bytes().all(|b| b == b'h'),
            "{text}"
        );
        let cut = 5000 - start.len();
        assert_eq!(
            notice,
            format!(
                "[output truncated: {cut} characters and 123 bytes omitted here, between the \
                 start and the end of the output. {ASK_LESS}]\nthe end\n"
            )
        );
        assert!(text.chars().count() <= 1000);
    }

    #[test]
    fn short_output_is_whole_and_a_tiny_limit_keeps_the_start() {
        assert_eq!(ends("ab", "", 0, 10), ("ab".to_string(), 0));
        assert_eq!(ends("ab", "cd", 0, 10), ("abcd".to_string(), 0));
        assert_eq!(ends("abc", "de", 7, 10), ("abc".to_string(), 9));
    }

    #[test]
    fn bytes_dropped_upstream_are_reported() {
        let text = finish("abc", None, 10, 42);
        assert!(text.contains("42 more bytes omitted"), "{text}");
    }
}
