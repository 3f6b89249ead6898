//! The `read_file` tool: shows a text file of the workspace, whole or a range of lines.
//!
//! The file is streamed and reading stops after the last line asked for (or once the output
//! passes what the host keeps, even inside a line), so reading the head of a large file stays
//! cheap. Only a regular file is opened: a FIFO or a device could block or never end.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek};
use std::path::Path;

use cordon_kit::textfile::{self, count};
use cordon_kit::{Context, Declaration, Kind, Outcome, Tool, path};
use schemars::JsonSchema;
use serde::Deserialize;

/// The `read_file` tool.
pub struct ReadFile;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// File path, relative to the workspace root.
    path: String,
    /// First line to show (1-based); 0 = from the first line.
    #[serde(default)]
    start: u64,
    /// Last line to show (1-based, inclusive); 0 = to the last line.
    #[serde(default)]
    end: u64,
    /// Prefix each line with its line number and a tab.
    #[serde(default)]
    numbered: bool,
}

const DESCRIPTION: &str = "Read a text file of the workspace. `path` is relative to the \
workspace root (an absolute path inside the workspace also works). Returns the file's lines \
exactly as they are. To read part of a long file, give `start` and `end`: 1-based line numbers, \
inclusive; 0 means from the first line / to the last line. Set `numbered` to prefix each line \
with its number and a tab (the numbers are not part of the file: never copy them into edit_file).";

impl Tool for ReadFile {
    type Input = Input;
    const NAME: &'static str = "read_file";

    fn declaration(_cwd: &str) -> Option<Declaration> {
        Some(
            Declaration::new(
                Self::NAME,
                Kind::Read,
                DESCRIPTION,
                cordon_kit::input_schema::<Input>(),
            )
            .shown_as("📖", Some("path"))
            .counted_as(textfile::file_ops_counter()),
        )
    }

    fn call(input: Input, context: &Context) -> Result<Outcome, String> {
        run(&input, context)
    }
}

cordon_kit::export_tools!(ReadFile);

fn run(input: &Input, context: &Context) -> Result<Outcome, String> {
    let given = input.path.as_str();
    if input.start != 0 && input.end != 0 && input.end < input.start {
        return Err(format!(
            "end {} is before start {}: give an end at or after the start, or end 0 to read to \
             the end of the file",
            input.end, input.start
        ));
    }
    let abs = path::resolve(&context.cwd, given)?;
    let root = Path::new(&context.cwd);
    let meta = textfile::regular_file(root, &abs, given, ReadFile::NAME)?
        .ok_or_else(|| textfile::missing(given))?;
    let file = File::open(&abs).map_err(|e| open_error(root, &abs, given, &e))?;
    let limit = textfile::output_limit(context.max_output);
    let mut reader = BufReader::new(file);
    let shown = match read_range(&mut reader, input.start, input.end, limit) {
        Ok(shown) => shown,
        Err(ReadError::NotUtf8) => {
            return Err(format!(
                "{given} is not UTF-8 text; read_file shows text files only"
            ));
        }
        Err(ReadError::PastEnd { lines }) => {
            return Err(format!(
                "start {} is past the end of {given}, which has {}",
                input.start,
                count(lines, "line", "lines")
            ));
        }
        Err(ReadError::Io(e)) => return Err(textfile::describe(root, &abs, given, &e)),
    };
    let line = (input.start > 0).then(|| u32::try_from(input.start).unwrap_or(u32::MAX));
    let (output, trailer) = render(&shown, input.numbered, limit);
    let mut outcome = Outcome::success(output).with_location(textfile::display(&abs), line);
    if shown.cut_shown() {
        // The host's truncation notice then counts the part of the file never read.
        let read = reader.stream_position().unwrap_or(meta.len());
        outcome.omitted_bytes = meta.len().saturating_sub(read);
    }
    Ok(match trailer {
        Some(trailer) => outcome.with_trailer(trailer),
        None => outcome,
    })
}

fn open_error(root: &Path, abs: &Path, given: &str, error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::NotFound => textfile::missing(given),
        io::ErrorKind::IsADirectory => textfile::directory(given),
        _ => textfile::describe(root, abs, given, error),
    }
}

/// The lines a read shows.
#[derive(Debug, PartialEq, Eq)]
struct Shown {
    /// The number of the first line shown.
    first: u64,
    /// The lines, each with its line ending when it has one.
    lines: Vec<String>,
    /// Whether every line of the range was read (reading stops early past the output limit).
    complete: bool,
    /// Whether the last line read is the file's last line.
    reaches_end: bool,
    /// Whether reading stopped inside the last line read, past the output limit.
    cut: bool,
}

impl Shown {
    /// Whether the output ends in a line cut where reading stopped. A cut line holds more
    /// characters than the limit left, so it is shown only as the one line shown.
    fn cut_shown(&self) -> bool {
        self.cut && self.lines.len() == 1
    }
}

#[derive(Debug)]
enum ReadError {
    NotUtf8,
    PastEnd { lines: usize },
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads lines `start..=end` (1-based; 0 = from the first / to the last) from `reader`, reading
/// nothing past line `end`, and stopping once the lines read pass `limit` characters, inside a
/// line if need be.
fn read_range<R: BufRead>(
    reader: &mut R,
    start: u64,
    end: u64,
    limit: usize,
) -> Result<Shown, ReadError> {
    let first = start.max(1);
    let last = if end == 0 { u64::MAX } else { end };
    let mut number = 0u64;
    while number + 1 < first && skip_line(reader)? {
        number += 1;
    }
    let mut lines = Vec::new();
    let mut chars = 0usize;
    let mut complete = true;
    let mut cut = false;
    loop {
        // Enough bytes for more characters than the limit leaves, however wide they are.
        let room = limit
            .saturating_sub(chars)
            .saturating_add(1)
            .saturating_mul(4);
        let mut buf = Vec::new();
        let ended = read_line(reader, &mut buf, room)?;
        if buf.is_empty() {
            break;
        }
        number += 1;
        let line = if ended {
            String::from_utf8(buf).map_err(|_| ReadError::NotUtf8)?
        } else {
            text_before_cut(buf)?
        };
        chars += line.chars().count();
        lines.push(line);
        if !ended {
            cut = true;
            complete = false;
            break;
        }
        if number >= last {
            break;
        }
        if chars > limit {
            complete = false;
            break;
        }
    }
    if start > 0 && number < start {
        return Err(ReadError::PastEnd {
            lines: number as usize,
        });
    }
    let reaches_end = reader.fill_buf()?.is_empty();
    Ok(Shown {
        first,
        lines,
        complete: complete || reaches_end,
        reaches_end,
        cut,
    })
}

/// How much of a skipped line is held at a time.
const SKIP_PIECE: usize = 64 * 1024;

/// Reads past the current line, checking that it is UTF-8, a piece at a time: a line may be
/// longer than the plugin's memory. Whether there was a line.
fn skip_line<R: BufRead>(reader: &mut R) -> Result<bool, ReadError> {
    let mut buf = Vec::new();
    let mut any = false;
    loop {
        let ended = read_line(reader, &mut buf, SKIP_PIECE)?;
        any |= !buf.is_empty();
        // A character cut at the end of a piece is checked with the next piece.
        let valid = match std::str::from_utf8(&buf) {
            Ok(_) => buf.len(),
            Err(e) if e.error_len().is_none() && !ended => e.valid_up_to(),
            Err(_) => return Err(ReadError::NotUtf8),
        };
        buf.drain(..valid);
        if ended {
            return Ok(any);
        }
    }
}

/// Appends the rest of the current line to `buf`, its newline included, but no more than
/// `max` bytes of it; whether the line ended (at a newline or the end of the file) within them.
fn read_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<bool> {
    let mut taken = 0;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            return Ok(true);
        }
        let room = &available[..available.len().min(max - taken)];
        let (piece, ended) = match memchr::memchr(b'\n', room) {
            Some(i) => (&room[..=i], true),
            None => (room, false),
        };
        buf.extend_from_slice(piece);
        let n = piece.len();
        reader.consume(n);
        taken += n;
        if ended {
            return Ok(true);
        }
        if taken == max {
            return Ok(reader.fill_buf()?.is_empty());
        }
    }
}

/// The text of a line cut after `bytes`, less a character the cut split.
fn text_before_cut(bytes: Vec<u8>) -> Result<String, ReadError> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) if e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
        }
        Err(_) => Err(ReadError::NotUtf8),
    }
}

/// The output for `shown`, numbered or not, in whole lines within `limit` characters (at least
/// one line), and the trailer saying where to read on when lines were left out. The last line
/// keeps its line ending only when it is the end of the file.
fn render(shown: &Shown, numbered: bool, limit: usize) -> (String, Option<String>) {
    let last_number = shown.first + shown.lines.len() as u64;
    let width = last_number.saturating_sub(1).max(1).to_string().len();
    let mut out = String::new();
    let mut chars = 0usize;
    let mut kept = 0u64;
    for (number, line) in (shown.first..).zip(&shown.lines) {
        let prefix = if numbered {
            format!("{number:>width$}\t")
        } else {
            String::new()
        };
        let needed = prefix.chars().count() + line.chars().count();
        if kept > 0 && chars + needed > limit {
            break;
        }
        out.push_str(&prefix);
        out.push_str(line);
        chars += needed;
        kept += 1;
    }
    let cut = kept < shown.lines.len() as u64 || !shown.complete;
    if cut || !shown.reaches_end {
        if out.ends_with('\n') {
            out.pop();
        }
        if out.ends_with('\r') {
            out.pop();
        }
    }
    let trailer = cut.then(|| {
        let last = shown.first + kept.max(1) - 1;
        if shown.cut_shown() {
            return format!(
                "[output limit reached: line {last} is longer than the limit and only its start \
                 is shown; continue with start {}]",
                last + 1
            );
        }
        let lines = if last == shown.first {
            format!("line {last}")
        } else {
            format!("lines {}-{last}", shown.first)
        };
        format!(
            "[output limit reached: {lines} shown; continue with start {}]",
            last + 1
        )
    });
    (out, trailer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, start: u64, end: u64, numbered: bool) -> Result<String, String> {
        read_range(&mut text.as_bytes(), start, end, usize::MAX)
            .map(|shown| render(&shown, numbered, usize::MAX).0)
            .map_err(|e| format!("{e:?}"))
    }

    const TEXT: &str = "one\ntwo\nthree\nfour\n";

    #[test]
    fn the_whole_file_keeps_its_final_newline() {
        assert_eq!(read(TEXT, 0, 0, false).unwrap(), TEXT);
        assert_eq!(read("a\nb", 0, 0, false).unwrap(), "a\nb");
        assert_eq!(read("", 0, 0, false).unwrap(), "");
    }

    #[test]
    fn a_range_has_no_final_newline() {
        assert_eq!(read(TEXT, 2, 3, false).unwrap(), "two\nthree");
        assert_eq!(read(TEXT, 0, 1, false).unwrap(), "one");
        assert_eq!(read("a\r\nb\r\nc\r\n", 1, 2, false).unwrap(), "a\r\nb");
    }

    #[test]
    fn a_range_reaching_the_end_keeps_it() {
        assert_eq!(read(TEXT, 3, 0, false).unwrap(), "three\nfour\n");
        assert_eq!(read(TEXT, 3, 4, false).unwrap(), "three\nfour\n");
        assert_eq!(read(TEXT, 4, 99, false).unwrap(), "four\n");
    }

    #[test]
    fn start_past_the_end_is_refused_with_the_line_count() {
        assert!(matches!(
            read_range(&mut TEXT.as_bytes(), 5, 0, usize::MAX),
            Err(ReadError::PastEnd { lines: 4 })
        ));
        assert!(matches!(
            read_range(&mut "".as_bytes(), 1, 0, usize::MAX),
            Err(ReadError::PastEnd { lines: 0 })
        ));
    }

    #[test]
    fn numbers_are_right_aligned_and_tab_separated() {
        let text: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        assert_eq!(
            read(&text, 8, 11, true).unwrap(),
            " 8\tl8\n 9\tl9\n10\tl10\n11\tl11"
        );
        assert_eq!(read(&text, 0, 2, true).unwrap(), "1\tl1\n2\tl2");
        assert_eq!(read("x\ny", 0, 0, true).unwrap(), "1\tx\n2\ty");
    }

    #[test]
    fn invalid_utf8_is_refused() {
        assert!(matches!(
            read_range(&mut &b"ok\n\xff\xfe\n"[..], 0, 0, usize::MAX),
            Err(ReadError::NotUtf8)
        ));
    }

    /// A reader that fails if read past a given number of bytes.
    struct Bounded<'a> {
        data: &'a [u8],
        pos: usize,
        allowed: usize,
    }

    impl io::Read for Bounded<'_> {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            unreachable!("only used through BufRead")
        }
    }

    impl BufRead for Bounded<'_> {
        fn fill_buf(&mut self) -> io::Result<&[u8]> {
            assert!(self.pos <= self.allowed, "read past the range");
            // Hand out one byte at a time so reading past the range would be seen.
            Ok(&self.data[self.pos..(self.pos + 1).min(self.data.len())])
        }
        fn consume(&mut self, n: usize) {
            self.pos += n;
        }
    }

    #[test]
    fn reading_stops_after_the_end_line() {
        let data = b"a\nb\nc\nd\n";
        let mut reader = Bounded {
            data,
            pos: 0,
            allowed: 4,
        };
        let shown = read_range(&mut reader, 1, 2, usize::MAX).unwrap();
        assert_eq!(render(&shown, false, usize::MAX), ("a\nb".into(), None));
        assert_eq!(reader.pos, 4);
    }

    #[test]
    fn past_the_limit_whole_lines_are_shown_and_the_trailer_says_where_to_go_on() {
        let text: String = (1..=1000).map(|i| format!("line {i}\n")).collect();
        let shown = read_range(&mut text.as_bytes(), 0, 0, 30).unwrap();
        assert!(shown.lines.len() < 10);
        assert!(!shown.complete);
        let (out, trailer) = render(&shown, false, 30);
        assert_eq!(out, "line 1\nline 2\nline 3\nline 4");
        assert_eq!(
            trailer.as_deref(),
            Some("[output limit reached: lines 1-4 shown; continue with start 5]")
        );
        let shown = read_range(&mut text.as_bytes(), 998, 0, 16).unwrap();
        let (out, trailer) = render(&shown, true, 16);
        assert_eq!(out, "998\tline 998");
        assert_eq!(
            trailer.as_deref(),
            Some("[output limit reached: line 998 shown; continue with start 999]")
        );
        // The range fits exactly: no trailer, the end of the file keeps its newline.
        let shown = read_range(&mut text.as_bytes(), 999, 0, 19).unwrap();
        assert_eq!(
            render(&shown, false, 19),
            ("line 999\nline 1000\n".into(), None)
        );
    }

    #[test]
    fn a_line_past_the_limit_is_cut_where_reading_stops_never_inside_a_character() {
        let text = format!("a{}\nnext\n", "é".repeat(100));
        let shown = read_range(&mut text.as_bytes(), 0, 0, 10).unwrap();
        // 44 bytes read: the "a" and 21 whole "é", the half of the 22nd dropped.
        assert_eq!(shown.lines, [format!("a{}", "é".repeat(21))]);
        assert!(shown.cut_shown() && !shown.complete && !shown.reaches_end);
        let (out, trailer) = render(&shown, false, 10);
        assert_eq!(out, shown.lines[0]);
        assert_eq!(
            trailer.as_deref(),
            Some(
                "[output limit reached: line 1 is longer than the limit and only its start is \
                 shown; continue with start 2]"
            )
        );
        // After a line that fits, the cut one is left for the next read.
        let text = format!("short\n{}\n", "x".repeat(1000));
        let shown = read_range(&mut text.as_bytes(), 0, 0, 10).unwrap();
        assert!(shown.cut && !shown.cut_shown());
        assert_eq!(
            render(&shown, false, 10),
            (
                "short".into(),
                Some("[output limit reached: line 1 shown; continue with start 2]".into())
            )
        );
    }

    #[test]
    fn skipped_lines_are_checked_a_piece_at_a_time() {
        // Pieces end inside a two-byte character.
        let text = format!("a{}\nsecond\n", "é".repeat(SKIP_PIECE));
        assert_eq!(read(&text, 2, 0, false).unwrap(), "second\n");
        let mut bad = vec![b'a'; 3 * SKIP_PIECE];
        bad.extend_from_slice(b"\xff\nsecond\n");
        assert!(matches!(
            read_range(&mut &bad[..], 2, 0, usize::MAX),
            Err(ReadError::NotUtf8)
        ));
        assert!(matches!(
            read_range(&mut &b"ok\n\xc3"[..], 3, 0, usize::MAX),
            Err(ReadError::NotUtf8)
        ));
    }
}
