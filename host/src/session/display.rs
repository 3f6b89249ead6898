//! What a call looks like on a terminal: a header before it runs, a short preview after.

use serde_json::Value;

use crate::bindings::Declaration;

/// The longest key argument shown in a header, in characters.
const KEY_ARGUMENT_CHARS: usize = 120;

/// The lines shown for one call.
#[derive(Clone, Debug)]
pub struct Display {
    /// `<icon> <tool>: <key argument>`.
    pub header: String,
    /// The first lines of the output (or `(no output)`); none when the tool's output is not
    /// echoed.
    pub preview: Option<Vec<String>>,
}

impl Display {
    /// The display as plain text: the header, then the preview indented by two spaces.
    pub fn plain(&self) -> String {
        self.render(false)
    }

    /// The display for a terminal: as [`Display::plain`], with the preview dimmed when `color`.
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

/// The header of a call of `declaration` with `input`.
pub fn header(declaration: &Declaration, input: &Value) -> String {
    let d = &declaration.display;
    let argument = d
        .key_argument
        .as_deref()
        .and_then(|key| input.get(key))
        .map(summarize);
    match argument {
        Some(argument) => format!("{} {}: {argument}", d.icon, declaration.name),
        None => format!("{} {}", d.icon, declaration.name),
    }
}

/// The first `lines` lines of `output`, `(no output)` when it is empty, and a count of the
/// lines left out.
pub fn preview(output: &str, lines: usize) -> Vec<String> {
    if output.is_empty() {
        return vec!["(no output)".to_string()];
    }
    let all: Vec<&str> = output.lines().collect();
    let mut shown: Vec<String> = all.iter().take(lines).map(|l| l.to_string()).collect();
    if all.len() > lines {
        shown.push(format!("… ({} more lines)", all.len() - lines));
    }
    shown
}

/// A one-line form of an argument: its first line, cut to a readable length.
fn summarize(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let first = text.lines().next().unwrap_or_default();
    let mut line: String = first.chars().take(KEY_ARGUMENT_CHARS).collect();
    if line.len() < text.len() {
        line.push('…');
    }
    line
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
        let d = Display {
            header: "🛠️ bash: ls".into(),
            preview: Some(vec!["x".into()]),
        };
        assert_eq!(d.plain(), "🛠️ bash: ls\n  x");
        assert_eq!(d.render(true), "🛠️ bash: ls\n\x1b[2m  x\x1b[0m");
    }

    #[test]
    fn long_arguments_are_cut_to_one_line() {
        assert_eq!(summarize(&Value::from("ls\nrm x")), "ls…");
        assert_eq!(summarize(&Value::from("a")), "a");
    }
}
