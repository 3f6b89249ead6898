//! Counting lines, which the diff and the text-file helpers both need.

/// The number of lines in `text`: the newlines, plus one for a last line without one.
pub fn count_lines(text: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_with_or_without_a_final_newline() {
        assert_eq!(count_lines(""), 0);
        assert_eq!(count_lines("a"), 1);
        assert_eq!(count_lines("a\n"), 1);
        assert_eq!(count_lines("a\nb"), 2);
        assert_eq!(count_lines("\n\n"), 2);
        assert_eq!(count_lines("a\r\nb\r\n"), 2);
    }
}
