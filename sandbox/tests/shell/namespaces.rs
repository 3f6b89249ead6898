//! The namespaces of a confined command: the work they let through (process pools, ptys),
//! what they hide (other processes, the host's `/tmp` and `/dev/shm`, root's files), and the
//! workspace they leave writable.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cordon_sandbox::Status;

use crate::host::{is_root, marker};
use crate::util::{Sandbox, bash};

#[test]
fn process_pools_and_ptys_work() {
    let c = Sandbox::new();
    let run = bash(
        &c,
        "python3 -c 'import multiprocessing as m; print(m.Pool(2).map(abs, [-1, -2]))'; \
         script -qc tty /dev/null",
    );
    assert_eq!(run.status, Status::Exited(0), "{run:?}");
    let mut lines = run.output.lines();
    assert_eq!(lines.next(), Some("[1, 2]"), "{run:?}");
    let tty = lines.next().unwrap_or_default().trim();
    assert!(tty.starts_with("/dev/pts/"), "{run:?}");
}

#[test]
fn tmp_and_shm_are_private_to_the_call() {
    let c = Sandbox::new();
    let name = marker("private");
    let run = bash(
        &c,
        &format!(
            "echo t > /tmp/{name} && echo s > /dev/shm/{name} && cat /tmp/{name} /dev/shm/{name} \
             && ls -A /tmp | grep -vc '^cordon-ws-' && ls -A /dev/shm | wc -l"
        ),
    );
    // /tmp holds the file and the mount point of the workspace (which is in the host's /tmp).
    assert_eq!(
        run.output, "t\ns\n1\n1\n",
        "the host's files showed: {run:?}"
    );
    for dir in ["/tmp", "/dev/shm"] {
        assert!(!Path::new(dir).join(&name).exists(), "{dir}/{name} leaked");
    }
    let again = bash(
        &c,
        &format!("ls /tmp/{name} /dev/shm/{name} 2>&1 | grep -c 'No such'"),
    );
    assert_eq!(again.output, "2\n", "{again:?}");
}

#[test]
fn no_set_id_file_can_be_made() {
    // As root, what the command makes in the workspace belongs to root on disk: a set-user-ID
    // file there would be root's outside the sandbox.
    let c = Sandbox::new();
    let run = bash(
        &c,
        "touch a && chmod u+s a; chmod g+s a; install -m 4755 /bin/true b; \
         python3 -c 'import os; os.open(\"c\", os.O_CREAT | os.O_WRONLY, 0o6755)'; \
         chmod 755 a && echo plain modes work",
    );
    assert!(run.output.ends_with("plain modes work\n"), "{run:?}");
    use std::os::unix::fs::PermissionsExt;
    for name in ["a", "b", "c"] {
        if let Ok(meta) = std::fs::metadata(c.path(name)) {
            assert_eq!(meta.permissions().mode() & 0o6000, 0, "{name}: {run:?}");
        }
    }
    assert!(
        run.output.matches("Operation not permitted").count() >= 4,
        "{run:?}"
    );
}

#[test]
fn the_init_is_out_of_the_commands_reach() {
    // Its descriptors lead to the helper's pipes; its memory holds the request.
    let run = bash(
        &Sandbox::new(),
        "ls /proc/1/fd; cat /proc/1/environ; echo forged > /proc/1/fd/2; kill -9 1; echo $?",
    );
    assert_eq!(
        run.output.matches("Permission denied").count(),
        3,
        "{run:?}"
    );
    // Signals from inside to the namespace's init are dropped, and the call goes on.
    assert!(run.output.ends_with("0\n"), "{run:?}");
}

#[test]
fn ps_sees_only_the_command_and_no_host_command_line() {
    let token = marker("token");
    // A group of its own, killed whole: its `sleep` would hold the test's output open.
    let mut host = Command::new("sh")
        .args(["-c", &format!("sleep 60; : {token}")])
        .process_group(0)
        .spawn()
        .unwrap();
    let c = Sandbox::new();
    let run = bash(
        &c,
        "ps -eo pid,args --no-headers; cat /proc/*/cmdline | tr '\\0' ' '",
    );
    // SAFETY: a signal to the process group this test made.
    unsafe { libc::kill(-(host.id() as i32), libc::SIGKILL) };
    host.wait().unwrap();
    assert!(!run.output.contains(&token), "{run:?}");
    let processes: Vec<&str> = run
        .output
        .lines()
        .take_while(|l| !l.contains("cmdline"))
        .collect();
    // The namespace's init, bash, ps (and cat with tr in the same line).
    assert!(
        processes.len() <= 5 && processes[0].trim_start().starts_with("1 "),
        "{run:?}"
    );
}

#[test]
fn a_file_only_root_may_read_stays_unreadable_when_cordon_is_root() {
    if !is_root() {
        return;
    }
    let path = PathBuf::from(format!("/usr/local/share/{}", marker("secret")));
    std::fs::write(&path, "root-only-content").unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let run = bash(&Sandbox::new(), &format!("cat {}", path.display()));
    std::fs::remove_file(&path).unwrap();
    assert!(!run.output.contains("root-only-content"), "{run:?}");
    assert!(run.output.contains("Permission denied"), "{run:?}");
}

#[test]
fn the_workspace_stays_writable_and_its_files_keep_their_owner() {
    let c = Sandbox::new();
    let existing = c.write("existing.txt", "old\n");
    let run = bash(
        &c,
        "echo more >> existing.txt && echo new > new.txt && id -u",
    );
    assert_eq!(run.status, Status::Exited(0), "{run:?}");
    assert_eq!(c.read("existing.txt"), "old\nmore\n");
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(&existing).unwrap().uid();
    assert_eq!(std::fs::metadata(c.path("new.txt")).unwrap().uid(), owner);
}

/// A session's `/tmp` lasts as long as the session: what one command leaves there the next
/// finds; another session, and each one-shot call, starts with an empty one.
#[test]
fn a_sessions_tmp_lasts_for_the_session_and_no_longer() {
    let c = Sandbox::new();
    let session = c.session();
    assert_eq!(
        session.bash("echo data > /tmp/out.txt && echo kept"),
        "kept\n"
    );
    assert_eq!(session.bash("cat /tmp/out.txt"), "data\n");
    drop(session);
    let gone = "cat /tmp/out.txt 2>/dev/null || echo gone";
    let session = c.session();
    assert_eq!(session.bash(gone), "gone\n");
    drop(session);
    let run = bash(&c, "echo data > /tmp/out.txt; cat /tmp/out.txt");
    assert_eq!(run.output, "data\n", "{run:?}");
    let run = bash(&c, gone);
    assert_eq!(run.output, "gone\n", "{run:?}");
}
