//! What reaches a terminal: `cordon call` (and `cordon layer accept`) run on a real
//! pseudo-terminal (its controlling terminal, where permission prompts go, and its standard
//! error, where `--display` goes),
//! reading the exact bytes the terminal gets. A command, a file or a tool's output must not be
//! able to steer the terminal: its control characters arrive as visible escapes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use crate::util::Cordon;

/// What one run of `cordon` on a terminal showed there, and what it printed on standard output.
struct Shown {
    /// Every byte the terminal got, as written (the terminal adds no carriage returns).
    terminal: Vec<u8>,
    stdout: Vec<u8>,
}

impl Shown {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.terminal).into_owned()
    }
}

/// A new pseudo-terminal that passes output on untouched (no `\n` → `\r\n`) and does not echo
/// what is typed, so that every byte read from it is one cordon wrote: (master, slave).
fn pty() -> (File, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors it opened; the null arguments are optional.
    let opened = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    let (master, slave) = unsafe { (File::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [master.as_raw_fd(), slave.as_raw_fd()] {
        // SAFETY: fcntl on a descriptor this function owns; the child gets the slave as fd 2.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: termios is plain data, filled by tcgetattr before use.
    let mut termios: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: the slave is an open terminal and termios a valid buffer.
    unsafe {
        assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut termios), 0);
        termios.c_oflag &= !libc::OPOST;
        termios.c_lflag &= !libc::ECHO;
        assert_eq!(
            libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &termios),
            0
        );
    }
    (master, slave)
}

/// Runs `cordon <args>` with a new pseudo-terminal as its controlling terminal and standard
/// error (standard output is a pipe, as an agent reads it). When `answer` is given, it is typed
/// once the terminal shows the permission question. `NO_COLOR` is set unless `color`.
fn on_pty(cordon: &Cordon, args: &[&str], answer: Option<&str>, color: bool) -> Shown {
    let (master, slave) = pty();
    let mut command = cordon.command();
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    if !color {
        command.env("NO_COLOR", "1");
    }
    // SAFETY: setsid and ioctl are async-signal-safe. A new session, then the terminal on fd 2
    // as its controlling terminal: what /dev/tty opens in the child.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(2, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("start cordon on a terminal");
    // Only the child holds the slave now: the master reads end (EIO) when cordon exits.
    drop(slave);
    drop(command);

    let (chunks, received) = mpsc::channel();
    let mut reader = master.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            if chunks.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // A guard against a hang, not a timing assertion: a run takes well under a second.
    let patience = Duration::from_secs(120);
    let mut terminal = Vec::new();
    if let Some(answer) = answer {
        // A call's question ("Allow this call? [y]es, [a]lways, …") or a yes-or-no one.
        let question = b"[y]es, ";
        while !terminal.windows(question.len()).any(|w| w == question) {
            let chunk = received.recv_timeout(patience).unwrap_or_else(|e| {
                panic!(
                    "no permission question ({e}); the terminal showed {:?}",
                    String::from_utf8_lossy(&terminal)
                )
            });
            terminal.extend(chunk);
        }
        (&master).write_all(answer.as_bytes()).unwrap();
    }
    let mut stdout = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child.wait().unwrap();
    while let Ok(chunk) = received.recv_timeout(patience) {
        terminal.extend(chunk);
    }
    Shown { terminal, stdout }
}

/// Asserts that no byte of `shown` steers the terminal: no escape, bell or carriage return.
fn assert_inert(shown: &Shown) {
    for byte in [0x1b, 0x07, b'\r'] {
        assert!(
            !shown.terminal.contains(&byte),
            "byte {byte:#04x} reached the terminal: {:?}",
            shown.text()
        );
    }
}

/// Asks on a terminal about the bash call `command`, refuses it, checks that nothing ran and
/// that nothing steered the terminal, and returns what the terminal showed.
fn refuse_command(command: &str) -> String {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    let input = json!({ "command": command }).to_string();
    let shown = on_pty(&cordon, &["call", "bash", &input], Some("n\n"), false);
    assert_inert(&shown);
    assert_eq!(shown.stdout, b"[command rejected by the user]");
    assert!(!cordon.path("HIDDEN-RAN").exists());
    shown.text()
}

#[test]
fn a_command_cannot_hide_itself_in_the_permission_prompt() {
    let shown = refuse_command("touch HIDDEN-RAN # \r\x1b[2K🛠️ bash: ls -la");
    assert!(
        shown.contains(r"🛠️ bash: touch HIDDEN-RAN # \r\x1b[2K🛠️ bash: ls -la"),
        "{shown:?}"
    );
}

#[test]
fn the_permission_prompt_shows_a_multi_line_command_whole() {
    let shown = refuse_command("echo hi\n\x1b[1A\x1b[2Ktouch HIDDEN-RAN\n");
    assert!(
        shown.contains(
            "🛠️ bash: echo hi…\nThe whole command (2 lines):\n  echo hi\n  \\x1b[1A\\x1b[2Ktouch HIDDEN-RAN\nAllow this call?"
        ),
        "{shown:?}"
    );
}

#[test]
fn a_file_cannot_hide_lines_in_the_diff_of_the_permission_prompt() {
    let cordon = Cordon::new().with_args(&["--permissions", "ask"]);
    let content = "fine\n\x1b[8mconcealed\x1b[0m\nrm -rf ~\n\x1b[1A\x1b[2Kfine again\n";
    let input = json!({"path": "t.sh", "content": content}).to_string();
    let shown = on_pty(&cordon, &["call", "write_file", &input], Some("n\n"), false);
    assert_inert(&shown);
    let text = shown.text();
    assert!(text.contains(r"\x1b[8mconcealed\x1b[0m"), "{text:?}");
    assert!(text.contains(r"\x1b[1A\x1b[2Kfine again"), "{text:?}");
    assert!(text.contains("rm -rf ~"), "{text:?}");
    assert!(!cordon.path("t.sh").exists());
}

#[test]
fn the_display_shows_control_characters_in_output_as_escapes() {
    let cordon = Cordon::new();
    // A command whose output retitles the window and clears the screen, and whose header
    // carries a right-to-left override.
    let input = json!({"command": "printf '\\033]0;title\\007\\033[2Jdone\\n' # \u{202e}txt"});
    let args = ["call", "--display", "bash", &input.to_string()];
    let shown = on_pty(&cordon, &args, None, false);
    assert_inert(&shown);
    // Compiling the plugin on a cold cache logs a line first.
    assert!(
        shown.text().ends_with(
        "🛠️ bash: printf '\\033]0;title\\007\\033[2Jdone\\n' # \\u{202e}txt\n  \\x1b]0;title\\x07\\x1b[2Jdone\n"
        ),
        "{:?}",
        shown.text()
    );
    // The model reads the output as the command wrote it.
    assert_eq!(shown.stdout, b"\x1b]0;title\x07\x1b[2Jdone\n");

    // In colour, cordon's own dimming stays around the escaped line.
    let shown = on_pty(&cordon, &args, None, true);
    assert!(
        shown
            .text()
            .contains("\n\x1b[2m  \\x1b]0;title\\x07\\x1b[2Jdone\x1b[0m\n"),
        "{:?}",
        shown.text()
    );
    assert!(!shown.terminal.contains(&0x07), "{:?}", shown.text());
}

/// With `--permissions ask`, `cordon layer accept` asks about each protected change on the
/// terminal instead of refusing it: no refuses the whole accept, yes accepts it. A name made in
/// the layer cannot steer the terminal either.
#[test]
fn layer_accept_asks_about_a_protected_change_on_the_terminal() {
    let cordon = Cordon::new().with_args(&["--layer", "work"]);
    cordon.write(".git/hooks/README", "hooks\n");
    let command = "printf 'x\\n' > .git/hooks/pre-commit && touch .envrc && mkdir -p .vscode \
                   && touch \".vscode/a$(printf '\\033[2K')b\"";
    let made = cordon.call("bash", json!({ "command": command }));
    assert_eq!(made.code, 0, "{made:?}");
    let accept = ["--permissions", "ask", "layer", "accept", "work"];

    let refused = on_pty(&cordon, &accept, Some("n\n"), false);
    assert_inert(&refused);
    let text = refused.text();
    assert!(text.contains(".envrc is protected"), "{text:?}");
    assert!(
        text.contains("Accept .envrc anyway?\n[y]es, [n]o: "),
        "{text:?}"
    );
    assert_eq!(
        text.matches("anyway?").count(),
        1,
        "one no, no more questions: {text:?}"
    );
    assert_eq!(refused.stdout, b"");
    assert!(!cordon.path(".git/hooks/pre-commit").exists());
    assert!(!cordon.path(".envrc").exists());

    let accepted = on_pty(&cordon, &accept, Some("y\ny\ny\n"), false);
    assert_inert(&accepted);
    let asked = accepted.text();
    assert!(
        asked.contains("Accept .git/hooks/pre-commit anyway?"),
        "{asked:?}"
    );
    assert!(
        asked.contains(r"Accept .vscode/a\x1b[2Kb anyway?"),
        "{asked:?}"
    );
    assert_eq!(cordon.read(".git/hooks/pre-commit"), "x\n");
    assert!(cordon.path(".envrc").exists());
    let out = String::from_utf8_lossy(&accepted.stdout);
    assert!(out.contains("added    .git/hooks/pre-commit"), "{out}");
}
