//! Bounding what the model sees.
//!
//! Every output is cut to `max_output` characters (never inside a UTF-8 sequence) and says how
//! much was cut, so the model knows to ask for less. A trailing status line (`[exit code: …]`,
//! `[error: 30s timeout exceeded]`) is kept after the cut: it is the part the model needs most.

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
    fn bytes_dropped_upstream_are_reported() {
        let text = finish("abc", None, 10, 42);
        assert!(text.contains("42 more bytes omitted"), "{text}");
    }
}
