//! Bounding what the model sees.
//!
//! Every output is cut to `max_output` characters (never inside a UTF-8 sequence) and says how
//! much was cut, so the model knows to ask for less. A trailing status line (`[exit code: …]`,
//! `[error: 30s timeout exceeded]`) is kept after the cut: it is the part the model needs most.
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
    Some(format!(
        "[output truncated: {what}. Ask for a smaller part, e.g. a line range or a filtered command]"
    ))
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
    fn bytes_dropped_upstream_are_reported() {
        let text = finish("abc", None, 10, 42);
        assert!(text.contains("42 more bytes omitted"), "{text}");
    }
}
