//! The one-line description of a skill shown in the catalogue, taken from its markdown.
//!
//! Pure text handling, no file system: [`describe`] is given the skill file's text.
//!
//! # The rule
//!
//! 1. **Front matter.** When the file starts with a `---` line and a later line is `---` (or
//!    `...`), the lines between are YAML front matter. Its top-level `description:` key gives
//!    the description. Plain (`description: Deploys the app`), double-quoted (with the usual
//!    backslash escapes), single-quoted (`''` for a quote), plain values continued on indented
//!    lines, and block values (`>`, `|` and their `-`/`+` variants) on the indented lines that
//!    follow are understood. `null`, `~` and empty values count as absent.
//! 2. **Fallback.** Otherwise the first line of the body (what follows the front matter, or
//!    the whole file) that is paragraph text: blank lines, headings, thematic breaks (`---`,
//!    `***`, `___`), fenced code blocks and HTML comments are skipped. When the body has no
//!    such line, the text of its first heading (ATX `#` marks, or a setext `===`/`---`
//!    underline, removed). The line is cut to [`FALLBACK_CHARS`] characters, at a word
//!    boundary when there is one, with `…` appended.
//! 3. **Nothing.** When neither gives any text (an empty file, say), `(no description)`.
//!
//! Whatever the source, runs of white space (line breaks included) become one space, so each
//! skill takes exactly one catalogue line.

/// The description of a skill whose file gives none.
pub const NO_DESCRIPTION: &str = "(no description)";

/// The most characters a description taken from the body keeps (not counting the `…`).
pub const FALLBACK_CHARS: usize = 120;

/// The catalogue line for one skill: a space, the name, an em dash, the description.
pub fn catalogue_line(name: &str, description: &str) -> String {
    format!(" {name} — {description}")
}

/// The one-line description of the skill whose file holds `text` (see the module docs).
pub fn describe(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front_matter, body) = split_front_matter(text);
    front_matter
        .and_then(front_matter_description)
        .or_else(|| body_description(body))
        .unwrap_or_else(|| NO_DESCRIPTION.to_string())
}

/// Splits `text` into its front matter (the text between the fences, when the file starts with
/// a `---` line that a later `---` or `...` line closes) and the body after it.
pub fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let mut lines = text.split_inclusive('\n');
    let Some(first) = lines.next() else {
        return (None, text);
    };
    if first.trim_end() != "---" {
        return (None, text);
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            return (Some(&text[start..offset]), &text[offset + line.len()..]);
        }
        offset += line.len();
    }
    (None, text)
}

/// The value of the top-level `description` key of YAML front matter, on one line.
pub fn front_matter_description(front_matter: &str) -> Option<String> {
    let lines: Vec<&str> = front_matter.lines().collect();
    let (index, value) = lines.iter().enumerate().find_map(|(i, line)| {
        let rest = line.strip_prefix("description")?;
        let value = rest.trim_start_matches([' ', '\t']).strip_prefix(':')?;
        Some((i, value.trim()))
    })?;
    // The lines that belong to the value: indented or blank, up to the next top-level key.
    let continuation: Vec<&str> = lines[index + 1..]
        .iter()
        .take_while(|line| line.trim().is_empty() || line.starts_with([' ', '\t']))
        .copied()
        .collect();

    let text = if let Some(quoted) = value.strip_prefix('"') {
        double_quoted(&join_with(quoted, &continuation))
    } else if let Some(quoted) = value.strip_prefix('\'') {
        single_quoted(&join_with(quoted, &continuation))
    } else if value.starts_with(['>', '|']) {
        continuation.join(" ")
    } else {
        let first = strip_comment(value);
        let nothing_follows = continuation.iter().all(|line| line.trim().is_empty());
        if matches!(first, "~" | "null" | "Null" | "NULL") && nothing_follows {
            return None;
        }
        let mut parts = vec![first];
        parts.extend(continuation.iter().map(|line| strip_comment(line.trim())));
        parts.join(" ")
    };
    let text = collapse_whitespace(&text);
    (!text.is_empty()).then_some(text)
}

/// The first line of `value` and the lines after it, as one text.
fn join_with(value: &str, continuation: &[&str]) -> String {
    let mut text = value.to_string();
    for line in continuation {
        text.push('\n');
        text.push_str(line);
    }
    text
}

/// The content of a double-quoted YAML scalar, its opening quote already removed.
fn double_quoted(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('0') => {}
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        out.push(c);
                    }
                }
                Some('\n') | None => {}
                Some(other) => out.push(other),
            },
            c => out.push(c),
        }
    }
    out
}

/// The content of a single-quoted YAML scalar, its opening quote already removed.
fn single_quoted(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            if chars.peek() == Some(&'\'') {
                chars.next();
                out.push('\'');
            } else {
                break;
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A plain YAML value without its trailing ` # comment`.
fn strip_comment(value: &str) -> &str {
    let bytes = value.as_bytes();
    let cut = (0..bytes.len())
        .find(|&i| bytes[i] == b'#' && (i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t'));
    match cut {
        Some(i) => value[..i].trim_end(),
        None => value,
    }
}

/// The description the body of a skill gives when its front matter gives none: its first
/// paragraph line, else its first heading, cut to [`FALLBACK_CHARS`].
pub fn body_description(body: &str) -> Option<String> {
    let lines: Vec<&str> = body.lines().collect();
    let mut first_heading: Option<String> = None;
    let mut fence: Option<&str> = None;
    let mut in_comment = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        i += 1;
        if let Some(marker) = fence {
            if line.starts_with(marker) {
                fence = None;
            }
            continue;
        }
        if in_comment {
            in_comment = !line.contains("-->");
            continue;
        }
        if line.is_empty() || is_thematic_break(line) || is_setext_underline(line) {
            continue;
        }
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| line.starts_with(m)) {
            fence = Some(marker);
            continue;
        }
        if line.starts_with("<!--") {
            in_comment = !line.contains("-->");
            continue;
        }
        if let Some(text) = atx_heading(line) {
            if first_heading.is_none() && !text.is_empty() {
                first_heading = Some(text.to_string());
            }
            continue;
        }
        if lines
            .get(i)
            .is_some_and(|next| is_setext_underline(next.trim()))
        {
            i += 1;
            if first_heading.is_none() {
                first_heading = Some(line.to_string());
            }
            continue;
        }
        return Some(cut(&collapse_whitespace(line), FALLBACK_CHARS));
    }
    first_heading.map(|heading| cut(&collapse_whitespace(&heading), FALLBACK_CHARS))
}

/// The text of an ATX heading line (`## Title ##` gives `Title`), or none for other lines.
fn atx_heading(line: &str) -> Option<&str> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if level == 0 || level > 6 {
        return None;
    }
    let rest = &line[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    let closed = rest.trim_end_matches('#');
    if closed.is_empty() || closed.ends_with([' ', '\t']) {
        Some(closed.trim())
    } else {
        Some(rest)
    }
}

/// Whether a (trimmed) line is a thematic break: three or more `-`, `*` or `_`, spaces allowed.
fn is_thematic_break(line: &str) -> bool {
    ['-', '*', '_'].into_iter().any(|mark| {
        line.chars().filter(|&c| c == mark).count() >= 3
            && line.chars().all(|c| c == mark || c == ' ' || c == '\t')
    })
}

/// Whether a (trimmed) line underlines a setext heading: only `=`, or only `-`.
fn is_setext_underline(line: &str) -> bool {
    !line.is_empty() && (line.chars().all(|c| c == '=') || line.chars().all(|c| c == '-'))
}

/// `text` with every run of white space made one space, and none at either end.
fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` characters, at the last word boundary when one is not too far
/// back, with `…` appended when anything was cut.
fn cut(text: &str, max: usize) -> String {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return text.to_string();
    };
    let head = &text[..end];
    let head = match head.rfind(' ') {
        Some(space) if head[..space].chars().count() >= max / 2 => &head[..space],
        _ => head,
    };
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_line_has_a_leading_space_and_an_em_dash() {
        assert_eq!(catalogue_line("deploy", "Ship it."), " deploy — Ship it.");
    }

    #[test]
    fn plain_front_matter_description() {
        let text = "---\nname: deploy\ndescription: Deploy the app to staging.\n---\n# Deploy\n";
        assert_eq!(describe(text), "Deploy the app to staging.");
    }

    #[test]
    fn plain_value_with_comment_and_continuation() {
        let fm = "description: Deploy the app # internal\nother: x\n";
        assert_eq!(front_matter_description(fm).unwrap(), "Deploy the app");
        let fm = "description: Deploy the app\n  to staging\nother: x\n";
        assert_eq!(
            front_matter_description(fm).unwrap(),
            "Deploy the app to staging"
        );
        let fm = "description:\n  On the next line\n";
        assert_eq!(front_matter_description(fm).unwrap(), "On the next line");
        // A `#` inside a word is not a comment.
        let fm = "description: Use C# here\n";
        assert_eq!(front_matter_description(fm).unwrap(), "Use C# here");
    }

    #[test]
    fn quoted_front_matter_descriptions() {
        let fm = "description: \"Say \\\"hi\\\": a: b # not a comment\"\n";
        assert_eq!(
            front_matter_description(fm).unwrap(),
            "Say \"hi\": a: b # not a comment"
        );
        let fm = "description: 'It''s: quoted'\n";
        assert_eq!(front_matter_description(fm).unwrap(), "It's: quoted");
        let fm = "description: \"caf\\u00e9\\tand\\nmore\"\n";
        assert_eq!(front_matter_description(fm).unwrap(), "café and more");
        let fm = "description: \"spans\n  two lines\"\nname: x\n";
        assert_eq!(front_matter_description(fm).unwrap(), "spans two lines");
    }

    #[test]
    fn block_front_matter_descriptions() {
        let fm = "name: x\ndescription: >\n  Folded text\n  over lines.\n\n  Second paragraph.\nlicense: MIT\n";
        assert_eq!(
            front_matter_description(fm).unwrap(),
            "Folded text over lines. Second paragraph."
        );
        let fm = "description: |-\n    Literal\n    block\n";
        assert_eq!(front_matter_description(fm).unwrap(), "Literal block");
    }

    #[test]
    fn only_the_top_level_description_key_counts() {
        let fm = "metadata:\n  description: nested\ndescriptions: no\n";
        assert_eq!(front_matter_description(fm), None);
        let fm = "description : spaced key\n";
        assert_eq!(front_matter_description(fm).unwrap(), "spaced key");
    }

    #[test]
    fn empty_or_null_descriptions_fall_back_to_the_body() {
        for fm in [
            "description:",
            "description: \"\"",
            "description: ~",
            "description: null",
        ] {
            let text = format!("---\n{fm}\n---\nBody line.\n");
            assert_eq!(describe(&text), "Body line.", "{fm}");
        }
    }

    #[test]
    fn front_matter_must_be_closed_and_at_the_top() {
        assert_eq!(
            split_front_matter("---\ndescription: x\n"),
            (None, "---\ndescription: x\n")
        );
        assert_eq!(split_front_matter("\n---\na: b\n---\n").0, None);
        assert_eq!(
            split_front_matter("---\r\ndescription: x\r\n---\r\nbody\r\n"),
            (Some("description: x\r\n"), "body\r\n")
        );
        assert_eq!(
            split_front_matter("---\na: b\n...\nbody"),
            (Some("a: b\n"), "body")
        );
        // An unclosed block is body text: its fence is a thematic break, the rest a paragraph.
        assert_eq!(describe("---\ndescription: x\n"), "description: x");
        assert_eq!(describe("\u{feff}---\ndescription: BOM\n---\n"), "BOM");
        assert_eq!(describe("---\r\ndescription: CRLF\r\n---\r\n"), "CRLF");
    }

    #[test]
    fn fallback_prefers_the_first_paragraph_line() {
        let text = "# Deploy\n\nShip the   app to staging.\nSecond line.\n";
        assert_eq!(describe(text), "Ship the app to staging.");
        let text = "---\nname: x\n---\n\n## Title ##\n\n---\n\nParagraph.\n";
        assert_eq!(describe(text), "Paragraph.");
    }

    #[test]
    fn fallback_skips_code_comments_and_breaks() {
        let text = "<!-- a\ncomment -->\n```sh\nmake deploy\n```\n***\n~~~\nx\n~~~\nText.\n";
        assert_eq!(describe(text), "Text.");
    }

    #[test]
    fn fallback_uses_the_first_heading_when_there_is_no_paragraph() {
        assert_eq!(describe("# Deploy the app\n## Steps\n"), "Deploy the app");
        assert_eq!(describe("### Closed ###\n"), "Closed");
        assert_eq!(describe("Setext title\n============\n\nBody.\n"), "Body.");
        assert_eq!(describe("Setext title\n---\n"), "Setext title");
        // `#tag` is not a heading (no space after the marks).
        assert_eq!(describe("# Title\n#tag line\n"), "#tag line");
    }

    #[test]
    fn fallback_is_cut_at_a_word_boundary() {
        let long = "word ".repeat(40);
        let description = describe(&long);
        assert!(description.ends_with("word…"), "{description}");
        assert!(description.chars().count() <= FALLBACK_CHARS + 1);
        let unbroken = "x".repeat(200);
        assert_eq!(
            describe(&unbroken),
            format!("{}…", "x".repeat(FALLBACK_CHARS))
        );
        let exact = "y".repeat(FALLBACK_CHARS);
        assert_eq!(describe(&exact), exact);
        let accents = "é".repeat(130);
        assert_eq!(describe(&accents).chars().count(), FALLBACK_CHARS + 1);
    }

    #[test]
    fn nothing_gives_no_description() {
        for text in [
            "",
            "\n\n",
            "   \n",
            "---\ndescription: \"\"\n---\n",
            "---\n***\n",
            "```\ncode\n```\n",
        ] {
            assert_eq!(describe(text), NO_DESCRIPTION, "{text:?}");
        }
    }

    #[test]
    fn front_matter_descriptions_are_not_cut() {
        let long = "z ".repeat(100);
        let text = format!("---\ndescription: {long}\n---\n");
        assert_eq!(describe(&text), long.trim());
    }
}
