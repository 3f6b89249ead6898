//! What a call looks like on a terminal: a header before it runs, a short preview after.
//!
//! Everything here is meant for a person's screen, so the text taken from a call (its
//! arguments, its output) goes through [`escape`]: a command or a file cannot move the cursor,
//! erase a line, retitle the window or reorder text. What the model reads is never escaped.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde_json::Value;

use crate::bindings::Declaration;

/// The longest key argument shown in a header, in characters.
const KEY_ARGUMENT_CHARS: usize = 120;

/// The lines shown for one call on a terminal.
#[derive(Clone, Debug)]
pub struct TerminalView {
    /// `<icon> <tool>: <key argument>`.
    pub header: String,
    /// The first lines of the output (or `(no output)`); none when the tool's output is not
    /// echoed.
    pub preview: Option<Vec<String>>,
}

impl TerminalView {
    /// The display as plain text: the header, then the preview indented by two spaces.
    pub fn plain(&self) -> String {
        self.render(false)
    }

    /// The display for a terminal: as [`TerminalView::plain`], with the preview dimmed when `color`.
    pub fn render(&self, color: bool) -> String {
        let preview = self.render_preview(color);
        if preview.is_empty() {
            self.header.clone()
        } else {
            format!("{}\n{preview}", self.header)
        }
    }

    /// The preview alone, one indented line per output line (empty when there is none), for
    /// showing after the header was shown before the call ran.
    pub fn render_preview(&self, color: bool) -> String {
        let lines = self.preview.iter().flatten().map(|line| {
            if color {
                format!("\x1b[2m  {line}\x1b[0m")
            } else {
                format!("  {line}")
            }
        });
        lines.collect::<Vec<_>>().join("\n")
    }
}

/// The header of a call of `declaration` with `input`, escaped: one line, the icon then the
/// [`title`].
pub fn header(declaration: &Declaration, input: &Value) -> String {
    // The icon and the name are the plugin's, and a plugin is not trusted with the terminal.
    format!(
        "{} {}",
        escape(&declaration.display.icon),
        title(declaration, input)
    )
}

/// The title of a call of `declaration` with `input`, escaped: `<tool>: <key argument>`.
pub fn title(declaration: &Declaration, input: &Value) -> String {
    let title = match key_argument(declaration, input) {
        Some(argument) => format!("{}: {}", declaration.name, summarize(&argument)),
        None => declaration.name.clone(),
    };
    escape(&title).into_owned()
}

/// The key argument of a call whose header cuts it (it has several lines, or is longer than a
/// header shows), whole and escaped: a line naming it and counting its lines, then each line
/// indented by two spaces. None when the header shows the argument whole. A permission prompt
/// shows it under the header, so that the user sees everything they allow.
pub fn whole_argument(declaration: &Declaration, input: &Value) -> Option<String> {
    let key = declaration.display.key_argument.as_deref()?;
    let argument = key_argument(declaration, input)?;
    if !is_cut(&argument) {
        return None;
    }
    let lines: Vec<&str> = argument
        .strip_suffix('\n')
        .unwrap_or(&argument)
        .split('\n')
        .collect();
    let count = match lines.len() {
        1 => "1 line".to_string(),
        n => format!("{n} lines"),
    };
    let mut block = format!("The whole {key} ({count}):");
    for line in lines {
        block.push_str("\n  ");
        block.push_str(line);
    }
    Some(escape(&block).into_owned())
}

/// The first `lines` lines of `output`, escaped, `(no output)` when it is empty, and a count
/// of the lines left out.
pub fn preview(output: &str, lines: usize) -> Vec<String> {
    if output.is_empty() {
        return vec!["(no output)".to_string()];
    }
    let all: Vec<&str> = output.lines().collect();
    let mut shown: Vec<String> = all
        .iter()
        .take(lines)
        .map(|l| escape(l).into_owned())
        .collect();
    if all.len() > lines {
        shown.push(format!("… ({} more lines)", all.len() - lines));
    }
    shown
}

/// Text made safe to show on a terminal: every character that would steer the terminal or
/// hide or reorder text is replaced by a visible escape, and everything else is kept as is
/// (borrowed, when there is nothing to replace).
///
/// - line feed and tab are kept;
/// - carriage return → `\r`;
/// - the other C0 controls, escape included, and DEL → `\xNN` (`\x1b`, `\x07`, `\x7f`);
/// - the C1 controls, U+0080–U+009F → `\u{NN}` (`\u{9b}`);
/// - the bidirectional embeddings, overrides and isolates, U+202A–U+202E and U+2066–U+2069
///   → `\u{NNNN}` (`\u{202e}`).
///
/// A backslash is not doubled: text that already reads `\x1b` stays as it is, which is
/// ambiguous to read but harmless, since either way nothing reaches the terminal but visible
/// characters.
pub fn escape(text: &str) -> Cow<'_, str> {
    let Some(start) = text.find(steers) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..start]);
    for c in text[start..].chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if !steers(c) => out.push(c),
            c if c.is_ascii() => write!(out, "\\x{:02x}", u32::from(c)).unwrap(),
            c => write!(out, "\\u{{{:x}}}", u32::from(c)).unwrap(),
        }
    }
    Cow::Owned(out)
}

/// The most characters of one line of live output ([`live`]) shown; the rest is cut, with `…`.
pub const LIVE_LINE: usize = 200;

/// The newest `count` of `lines` that a running command printed, for a front door that shows
/// its output as it runs: each escaped ([`escape`]) and cut to [`LIVE_LINE`] characters.
pub fn live(lines: &[String], count: usize) -> Vec<String> {
    lines[lines.len().saturating_sub(count)..]
        .iter()
        .map(|line| {
            let shown = escape(line);
            match shown.char_indices().nth(LIVE_LINE) {
                Some((cut, _)) => format!("{}…", &shown[..cut]),
                None => shown.into_owned(),
            }
        })
        .collect()
}

/// Whether `c` steers a terminal or the order of text, rather than showing as itself.
fn steers(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// The text of the key argument of a call; none when the tool has none or the input lacks it.
fn key_argument(declaration: &Declaration, input: &Value) -> Option<String> {
    let key = declaration.display.key_argument.as_deref()?;
    Some(match input.get(key)? {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// A one-line form of an argument: its first line, cut to a readable length.
fn summarize(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut line: String = first.chars().take(KEY_ARGUMENT_CHARS).collect();
    if is_cut(text) {
        line.push('…');
    }
    line
}

/// Whether [`summarize`] shows less than all of `text`.
fn is_cut(text: &str) -> bool {
    let first = text.lines().next().unwrap_or_default();
    first.len() < text.len() || first.chars().nth(KEY_ARGUMENT_CHARS).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_shows_the_first_lines_and_counts_the_rest() {
        assert_eq!(preview("", 3), ["(no output)"]);
        assert_eq!(preview("a\nb\n", 3), ["a", "b"]);
        assert_eq!(preview("a\nb\nc\nd\n", 2), ["a", "b", "… (2 more lines)"]);
    }

    #[test]
    fn render_dims_only_in_color() {
        let d = TerminalView {
            header: "🛠️ bash: ls".into(),
            preview: Some(vec!["x".into()]),
        };
        assert_eq!(d.plain(), "🛠️ bash: ls\n  x");
        assert_eq!(d.render(true), "🛠️ bash: ls\n\x1b[2m  x\x1b[0m");
    }

    #[test]
    fn long_arguments_are_cut_to_one_line() {
        assert_eq!(summarize("ls\nrm x"), "ls…");
        assert_eq!(summarize("a"), "a");
        let long = "x".repeat(KEY_ARGUMENT_CHARS + 1);
        assert_eq!(summarize(&long), format!("{}…", &long[1..]));
    }

    #[test]
    fn plain_text_is_not_escaped_nor_copied() {
        for text in ["", "ls -la", "a\tb\nc\n", "🛠️ é ü ‘’ — \\x1b \\r"] {
            assert!(
                matches!(escape(text), Cow::Borrowed(t) if t == text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn what_steers_a_terminal_is_shown_as_escapes() {
        assert_eq!(escape("a\rb"), "a\\rb");
        assert_eq!(escape("\x1b[2K\x1b]0;t\x07"), "\\x1b[2K\\x1b]0;t\\x07");
        assert_eq!(
            escape("\0\x08\x0b\x0c\x1f\x7f"),
            "\\x00\\x08\\x0b\\x0c\\x1f\\x7f"
        );
        assert_eq!(
            escape("\u{80}\u{85}\u{9b}\u{a0}"),
            "\\u{80}\\u{85}\\u{9b}\u{a0}"
        );
        assert_eq!(
            escape("\u{202a}\u{202e}\u{2066}\u{2069}\u{2029}"),
            "\\u{202a}\\u{202e}\\u{2066}\\u{2069}\u{2029}"
        );
        assert_eq!(escape("é\tok\n\x1b"), "é\tok\n\\x1b");
    }

    fn declaration(icon: &str, key_argument: Option<&str>) -> Declaration {
        use crate::bindings::{Counter, Kind};
        Declaration {
            name: "bash".into(),
            description: String::new(),
            input_schema: String::new(),
            kind: Kind::Execute,
            display: crate::bindings::Display {
                icon: icon.into(),
                key_argument: key_argument.map(str::to_string),
                preview_output: true,
            },
            counter: Counter {
                key: "commands".into(),
                icon: "⚙".into(),
                singular: "command".into(),
                plural: "commands".into(),
            },
        }
    }

    #[test]
    fn headers_are_escaped_and_one_line() {
        let bash = declaration("🛠️", Some("command"));
        let input = serde_json::json!({"command": "touch x # \r\x1b[2K\u{202e}ls"});
        assert_eq!(
            header(&bash, &input),
            "🛠️ bash: touch x # \\r\\x1b[2K\\u{202e}ls"
        );
        let input = serde_json::json!({"command": "ls\n\x1b[1Arm -rf x"});
        assert_eq!(header(&bash, &input), "🛠️ bash: ls…");
        let hostile = declaration("\x1b[2J", None);
        assert_eq!(header(&hostile, &input), "\\x1b[2J bash");
    }

    #[test]
    fn an_argument_the_header_cuts_is_given_whole() {
        let bash = declaration("🛠️", Some("command"));
        let whole = |command: &str| whole_argument(&bash, &serde_json::json!({"command": command}));
        assert_eq!(whole("ls -la"), None);
        assert_eq!(whole(&"x".repeat(KEY_ARGUMENT_CHARS)), None);
        let long = "x".repeat(KEY_ARGUMENT_CHARS + 1);
        assert_eq!(
            whole(&long).unwrap(),
            format!("The whole command (1 line):\n  {long}")
        );
        assert_eq!(
            whole("ls\r\n\x1b[1Arm x\n\necho\n").unwrap(),
            "The whole command (4 lines):\n  ls\\r\n  \\x1b[1Arm x\n  \n  echo"
        );
        assert_eq!(
            whole_argument(&declaration("🛠️", None), &serde_json::json!({})),
            None
        );
    }

    #[test]
    fn previews_are_escaped() {
        assert_eq!(
            preview("\x1b]0;t\x07\x1b[2J\n", 3),
            ["\\x1b]0;t\\x07\\x1b[2J"]
        );
    }
}
