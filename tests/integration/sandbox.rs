//! The sandbox of bash commands as cordon sets it up, through the real binary: the kill that
//! nothing survives (cordon's, its helper's, the timeout's), the memory limit of the whole
//! tree, the receipt of the layers (`cordon doctor`, a session's `sandbox` field), the refusal
//! without user namespaces, and what a session's shell keeps between commands. `.ci/run` runs
//! these as root and again as an unprivileged user. What the shell does on its own (the
//! namespaces' view) is tested in the sandbox crate, sandbox/tests/shell.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::bash::MORE_TIME;
use crate::host::{is_root, marker, processes_with, wait_until_gone};
use crate::util::{Cordon, Live, Run};

fn bash(cordon: &Cordon, command: &str) -> Run {
    cordon.call("bash", json!({ "command": command }))
}

/// The pid of the sandbox helper that `cordon` (`parent`) started, once it runs.
/// Starts `cordon call bash` of a `sleep` that leaves a `setsid` grandchild sleeping too, both
/// marked with `mark` (cordon's output to `stdout`), and waits until both run: the cordon
/// process and its sandbox helper's pid.
fn sleep_with_a_setsid_grandchild(c: &Cordon, mark: &str, stdout: Stdio) -> (Child, u32) {
    let input = json!({
        "command": format!("setsid bash -c 'sleep 100; : {mark}' & sleep 100; : {mark}")
    });
    let cordon = c
        .command()
        .args(["call", "bash", &input.to_string()])
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let helper = helper_of(cordon.id());
    let until = Instant::now() + Duration::from_secs(20);
    while processes_with(mark).len() < 2 {
        assert!(Instant::now() < until, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (cordon, helper)
}

fn helper_of(parent: u32) -> u32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        for pid in processes_with("__sandbox") {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            if ppid == Some(parent) {
                return pid;
            }
        }
        assert!(Instant::now() < until, "no sandbox helper started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The memory cgroup directories that a helper `pid` of this test process created and that
/// are still there (one per command, `cordon-bash-<pid>-<n>`).
fn cgroups_of(helper: u32) -> Vec<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let prefix = format!("cordon-bash-{helper}-");
    own.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let base = if controllers.split(',').any(|c| c == "memory") {
                "/sys/fs/cgroup/memory"
            } else if controllers.is_empty() {
                "/sys/fs/cgroup"
            } else {
                return None;
            };
            Some(Path::new(base).join(path.trim_start_matches('/')))
        })
        .flat_map(|parent| std::fs::read_dir(parent).into_iter().flatten().flatten())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .map(|entry| entry.path())
        .collect()
}

#[test]
fn sigkill_of_cordon_leaves_no_process_cgroup_or_mount() {
    let c = Cordon::new();
    let mark = marker("orphan");
    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let (mut cordon, helper) = sleep_with_a_setsid_grandchild(&c, &mark, Stdio::null());
    cordon.kill().unwrap();
    cordon.wait().unwrap();
    let left = wait_until_gone(&mark, Duration::from_secs(5));
    assert!(left.is_empty(), "processes survived cordon: {left:?}");
    let until = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{helper}")).exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Path::new(&format!("/proc/{helper}")).exists(),
        "the helper lives on"
    );
    let left = cgroups_of(helper);
    assert!(left.is_empty(), "cgroups were left behind: {left:?}");
    let mounts_after = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert_eq!(mounts_before, mounts_after);
}

#[test]
fn sigkill_of_the_sandbox_helper_leaves_no_process() {
    let c = Cordon::new();
    let mark = marker("helperless");
    let (cordon, helper) = sleep_with_a_setsid_grandchild(&c, &mark, Stdio::piped());
    // SAFETY: signalling the helper this test found.
    unsafe { libc::kill(helper as i32, libc::SIGKILL) };
    let left = wait_until_gone(&mark, Duration::from_secs(5));
    assert!(left.is_empty(), "processes survived their helper: {left:?}");
    // cordon hears of it at once, and says the command could not finish.
    let out = cordon.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("without a report"), "{stdout}");
    // The next helper sweeps the cgroup the killed one left.
    assert_eq!(bash(&c, "echo on").stdout, "on\n");
    let left = cgroups_of(helper);
    assert!(left.is_empty(), "cgroups were left behind: {left:?}");
}

/// An embedder that stops a command (its call was cancelled) is told so: the command did not
/// end on its own, and it was not refused either.
#[test]
fn a_stopped_command_is_cancelled() {
    use cordon::sandbox::{Hooks, Policy, Shell, Status, Stop};
    let c = Cordon::new();
    let mark = marker("stopped");
    let mut policy = Policy::new(c.root());
    policy.helper = crate::util::binary();
    let stop = Stop::new().unwrap();
    let hooks = Hooks {
        stop: Some(stop.clone()),
        ..Hooks::default()
    };
    let command = format!("sleep 20; : {mark}");
    let stopper = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(20);
        while wait_until_gone(&mark, Duration::ZERO).is_empty() {
            assert!(Instant::now() < until, "the command did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.stop();
        wait_until_gone(&mark, Duration::from_secs(5))
    });
    let done = Shell::new(policy).run(&command, &hooks);
    assert_eq!(done.status, Status::Cancelled);
    assert_eq!(
        done.status.refusal().as_deref(),
        Some("the command was stopped: its call was cancelled")
    );
    assert_eq!(stopper.join().unwrap(), Vec::<u32>::new());
}

#[test]
fn a_self_regrowing_fork_chain_leaves_nothing_after_the_timeout() {
    let c = Cordon::new().with_args(&["--timeout", "2"]);
    let mark = marker("chain");
    c.write(
        "chain.py",
        "import os\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n        \
         continue\n    if pid == 0:\n        os.setsid()\n        continue\n    os._exit(0)\n",
    );
    let run = bash(&c, &format!("python3 chain.py {mark} & sleep 100"));
    assert!(
        run.stdout
            .ends_with(&format!("[error: 2s timeout exceeded]\n{MORE_TIME}")),
        "{run:?}"
    );
    let left = wait_until_gone(&mark, Duration::from_millis(500));
    assert!(
        left.is_empty(),
        "{} processes outlived the call",
        left.len()
    );
}

#[test]
fn a_memory_bomb_over_several_processes_stops_at_the_whole_command_limit() {
    let c = Cordon::new().with_args(&["--bash-memory", "256"]);
    if is_root() {
        // Four processes of 100 MiB each: each is under the limit, together they are over it.
        let hog = "python3 -c 'import time; b = bytearray(100 << 20); time.sleep(3)'";
        let run = bash(
            &c,
            &format!("for i in 1 2 3 4; do {hog} & done; wait; echo finished"),
        );
        assert!(
            run.stdout.ends_with(
                "[error: the command exceeded its memory limit of 256 MiB and was killed]"
            ),
            "{run:?}"
        );
    } else {
        // Without a memory cgroup, the limit holds per process: one process over it fails.
        let run = bash(&c, "python3 -c 'b = bytearray(300 << 20)' 2>&1 | tail -1");
        assert!(run.stdout.contains("MemoryError"), "{run:?}");
    }
}

#[test]
fn doctor_prints_the_receipt_of_every_layer() {
    let c = Cordon::new();
    let run = c.run(&["doctor", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let receipt: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(receipt["ran"], true, "{receipt}");
    let layers = receipt["layers"].as_array().unwrap();
    let names: Vec<&str> = layers.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, cordon::sandbox::LAYERS);
    for layer in layers {
        // Memory is partial only without a memory cgroup: per process, and said so.
        let expected = match layer["name"].as_str() {
            Some("memory") if !is_root() => "partial",
            _ => "enforced",
        };
        assert_eq!(layer["enforcement"], expected, "{layer}");
    }
    let text = c.run(&["doctor"]);
    assert_eq!(text.code, 0, "{text:?}");
    for name in cordon::sandbox::LAYERS {
        assert!(
            text.stdout.contains(&format!("\n  {name} ")),
            "{name}: {text:?}"
        );
    }
    // The receipt follows the options: the network is off when opened.
    let open = Cordon::new()
        .with_args(&["--bash-network"])
        .run(&["doctor", "--json"]);
    let receipt: serde_json::Value = serde_json::from_str(&open.stdout).unwrap();
    let network = &receipt["layers"].as_array().unwrap()[12];
    assert_eq!(network["enforcement"], "off", "{network}");
}

#[test]
fn a_session_response_to_bash_names_the_layers_in_force() {
    let c = Cordon::new();
    let lines = [
        json!({"id": 1, "tool": "bash", "input": {"command": "echo hi"}}),
        json!({"id": 2, "tool": "read_file", "input": {"path": c.write("a.txt", "a\n")}}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    let responses = c.session(lines);
    let sandbox = &responses[0]["sandbox"];
    let enforced: Vec<&str> = sandbox["enforced"]
        .as_array()
        .unwrap_or_else(|| panic!("no sandbox field: {}", responses[0]))
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for name in [
        "user", "pid", "mount", "view", "landlock", "seccomp", "network",
    ] {
        assert!(enforced.contains(&name), "{name}: {sandbox}");
    }
    assert!(sandbox["off"].as_object().unwrap().is_empty(), "{sandbox}");
    assert!(responses[1].get("sandbox").is_none(), "{}", responses[1]);
}

#[test]
fn without_user_namespaces_bash_is_refused_with_what_to_change() {
    let c = Cordon::new();
    let input = json!({"command": "echo ran > f"}).to_string();
    // A user namespace of this test's own in which no further one may be created, as in a
    // container whose seccomp profile refuses them.
    let out = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(crate::util::binary())
        .arg("--workspace")
        .arg(c.root())
        .args(["call", "bash", &input])
        .env("CORDON_CACHE_DIR", crate::util::cache_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let run = Run::from(out);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.starts_with("[error: bash could not run: "),
        "{run:?}"
    );
    assert!(run.stdout.contains("user.max_user_namespaces"), "{run:?}");
    assert!(run.stdout.contains("--unconfined-bash"), "{run:?}");
    assert!(!c.path("f").exists());
}

#[test]
fn only_layers_with_a_stand_in_may_be_allowed_missing() {
    let run = Cordon::new()
        .with_args(&["--sandbox-allow-missing", "user"])
        .run(&["doctor"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("[possible values: landlock, seccomp]"),
        "{run:?}"
    );
    // Allowed to be missing is not turned off: where the kernel has them, they hold.
    let run = Cordon::new()
        .with_args(&["--sandbox-allow-missing", "landlock,seccomp"])
        .run(&["doctor", "--json"]);
    let receipt: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    for layer in &receipt["layers"].as_array().unwrap()[7..9] {
        assert_eq!(layer["enforcement"], "enforced", "{layer}");
    }
}

/// In a session the next command's init is made ready ahead, and the helper hands it the
/// command itself when its protected paths are as they were: each command still gets its own
/// PID namespace, its timeout, and the protected paths as they are when it starts; `/tmp` is
/// the session's.
#[test]
fn commands_handed_to_an_init_ready_ahead_keep_a_fresh_view_their_timeout_and_protection() {
    let c = crate::protect::repository().with_args(&["--timeout", "2"]);
    let mut session = Live::start(&c);
    let mut bash = |command: &str| session.bash(command);
    // The pauses let the next init get ready before its command comes.
    assert_eq!(bash("echo mine > /tmp/mine; sleep 0.3; echo $$"), "2\n");
    for round in 0..3 {
        let out = bash(&format!(
            "cat /tmp/mine 2>/dev/null || echo fresh; ps -e --no-headers > /tmp/ps; wc -l < /tmp/ps; sleep 0.3 # {round}"
        ));
        // Not `ps | wc`: ps may read /proc before bash has started wc.
        assert_eq!(out, "mine\n3\n", "the init, bash and ps only");
    }
    // The user makes the missing .envrc between two commands.
    c.write(".envrc", "the user's\n");
    let out = bash("echo evil >> .envrc; exit 0");
    assert!(out.contains("Read-only file system"), "{out}");
    assert_eq!(c.read(".envrc"), "the user's\n");
    let started = Instant::now();
    let out = bash("sleep 0.3; echo waiting; sleep 100");
    assert_eq!(
        out,
        format!("waiting\n[error: 2s timeout exceeded]\n{MORE_TIME}")
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_eq!(bash("echo after"), "after\n");
    session.finish();
}

/// A session keeps no more memory cgroups than its next commands need, reusing the cgroup
/// of a command that is over: a long session does not pile them up, and a command killed for
/// lack of memory does not make the next one reported so.
#[test]
fn a_sessions_memory_cgroups_are_reused_and_a_kill_for_memory_stays_its_commands() {
    let c = Cordon::new().with_args(&["--bash-memory", "64"]);
    let mut session = Live::start(&c);
    let mut bash = |command: &str| session.bash(command);
    let killed = "[error: the command exceeded its memory limit of 64 MiB and was killed]";
    for round in 0..3 {
        assert_eq!(bash(&format!("echo {round}")), format!("{round}\n"));
        if is_root() {
            let hog = format!("python3 -c 'b = bytearray(100 << 20)' # {round}");
            let out = bash(&hog);
            assert!(out.ends_with(killed), "{out}");
        }
    }
    let helper = helper_of(session.child.id());
    // The cgroups of the next command and of the one after it, and one to reuse.
    let left = cgroups_down_to(helper, 3);
    assert!(
        left.len() <= 3,
        "the cgroups of ended commands stay: {left:?}"
    );
    session.finish();
    let left = cgroups_down_to(helper, 0);
    assert!(left.is_empty(), "cgroups were left behind: {left:?}");
}

/// The cgroups of `helper` once at most `count` are left, or after 5 s.
fn cgroups_down_to(helper: u32, count: usize) -> Vec<PathBuf> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left = cgroups_of(helper);
        if left.len() <= count || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
