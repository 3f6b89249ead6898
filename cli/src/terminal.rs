//! The terminal side of `cordon call`: the display on standard error, and permission prompts
//! on the controlling terminal (`cordon layer accept` asks there too).

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Write};

use cordon::session::{Answer, Ask, PermissionRequest};

/// Whether standard error should get ANSI styling: a terminal, and `NO_COLOR` unset.
pub fn color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Asks on the controlling terminal (`/dev/tty`), so that standard input and output stay free
/// for the call. Without a terminal nobody can answer, and the call is refused.
pub struct TerminalAsk;

impl Ask for TerminalAsk {
    async fn ask(&mut self, request: &PermissionRequest) -> Answer {
        match prompt(request) {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(
                    "cannot ask for permission on the terminal ({e}); refusing the call"
                );
                Answer::Unasked
            }
        }
    }
}

/// Asks `question` on the controlling terminal, a yes or a no; the end of input is a no.
pub fn confirm(question: &str) -> std::io::Result<bool> {
    let (mut out, mut input) = tty()?;
    writeln!(out, "{question}")?;
    loop {
        write!(out, "[y]es, [n]o: ")?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(false);
        }
        match line.trim() {
            "y" | "yes" => return Ok(true),
            "n" | "no" => return Ok(false),
            _ => continue,
        }
    }
}

/// The controlling terminal, to write to and to read lines from.
fn tty() -> std::io::Result<(File, BufReader<File>)> {
    let tty = File::options().read(true).write(true).open("/dev/tty")?;
    Ok((tty.try_clone()?, BufReader::new(tty)))
}

fn prompt(request: &PermissionRequest) -> std::io::Result<Answer> {
    let (mut out, mut input) = tty()?;
    writeln!(out, "{}", request.header)?;
    if let Some(argument) = &request.argument {
        writeln!(out, "{argument}")?;
    }
    if !request.details.is_empty() {
        writeln!(out, "{}", request.details)?;
    }
    loop {
        write!(out, "Allow this call? [y]es, [a]lways, [n]o, ne[v]er: ")?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(Answer::RejectOnce);
        }
        match line.trim() {
            "y" | "yes" => return Ok(Answer::AllowOnce),
            "a" | "always" => return Ok(Answer::AllowAlways),
            "n" | "no" => return Ok(Answer::RejectOnce),
            "v" | "never" => return Ok(Answer::RejectAlways),
            _ => continue,
        }
    }
}
