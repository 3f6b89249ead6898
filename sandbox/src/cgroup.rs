//! A memory cgroup per command: one bound on the memory of its whole process tree (page cache
//! and tmpfs included), where an address-space limit per process would let N processes take
//! N times as much and break runtimes that reserve large virtual ranges.
//!
//! The cgroup is created below the helper's own cgroup in whichever hierarchy has the
//! `memory` controller: the unified (v2) one, else the v1 `memory` one. The zygote moves
//! itself into it before it starts the command ([`Cgroup::join`]: its single thread, by
//! writing `0` to `tasks` in v1, 30 µs; moving another process, or a thread group through
//! `cgroup.procs`, waits for an RCU grace period, 5–30 ms measured), so the command's init is
//! born in it, and everything the command starts inherits it. After the command the helper
//! reads whether the kernel killed anything for lack of memory ([`Cgroup::oom_killed`]). Once
//! the command's init is gone, its cgroup, empty, serves a later command: making and removing
//! a memory cgroup for every command cost about 0.2 ms of each of a session's bash calls.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where a shell's memory cgroups are made: below the helper's own cgroup, in the hierarchy
/// that has the `memory` controller.
pub(super) struct Cgroups {
    parent: PathBuf,
    v2: bool,
    /// The limit of each.
    bytes: u64,
    made: u64,
}

/// A cgroup created for one command.
pub(super) struct Cgroup {
    dir: PathBuf,
    v2: bool,
    /// The file a task moves itself in with (writing `0`), open for writing.
    join: File,
    /// The kills for lack of memory counted before its current command.
    kills_before: u64,
}

/// Why no memory cgroup can be made for commands.
#[derive(Debug, thiserror::Error)]
pub(super) enum CgroupError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: &'static str,
        source: std::io::Error,
    },
    /// A step on the cgroup directory `dir` failed: `doing` says which.
    #[error("{doing} {}: {source}", dir.display())]
    Step {
        doing: &'static str,
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("no cgroup hierarchy with the memory controller is mounted")]
    NoHierarchy,
    /// Why each hierarchy tried failed.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Tried(Vec<CgroupError>),
}

/// Why the zygote did not move into the memory cgroup it was given; it tells the helper.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
pub(super) enum NotEntered {
    #[error("no memory cgroup came to move into")]
    NoCgroup,
    /// The system's error, as text: it crosses to the helper.
    #[error("cannot move into a memory cgroup: {0}")]
    Write(String),
}

/// Why commands have no memory cgroups of their own (they are bounded per process instead).
#[derive(Clone, Debug, thiserror::Error)]
pub(super) enum NoCgroup {
    #[error(transparent)]
    Made(Arc<CgroupError>),
    #[error(transparent)]
    Entered(NotEntered),
    #[error("cannot reach the sandbox's zygote: {0}")]
    Zygote(Arc<std::io::Error>),
    #[error("the sandbox's zygote did not answer")]
    NoAnswer,
}

impl From<CgroupError> for NoCgroup {
    fn from(e: CgroupError) -> Self {
        NoCgroup::Made(Arc::new(e))
    }
}

impl Cgroups {
    /// Finds where this helper may make cgroups limited to `bytes`, and makes the first one;
    /// or says why none can be made.
    pub fn first(bytes: u64) -> Result<(Cgroups, Cgroup), CgroupError> {
        let read = |file: &'static str| {
            std::fs::read_to_string(file).map_err(|source| CgroupError::Read { file, source })
        };
        let mounts = read("/proc/self/mountinfo")?;
        let own = read("/proc/self/cgroup")?;
        let mut tried = Vec::new();
        for (parent, v2) in candidates(&mounts, &own) {
            if v2 && let Err(why) = enable_memory(&parent) {
                tried.push(why);
                continue;
            }
            sweep(&parent);
            let mut cgroups = Cgroups {
                parent,
                v2,
                bytes,
                made: 0,
            };
            match cgroups.make() {
                Ok(first) => return Ok((cgroups, first)),
                Err(why) => tried.push(why),
            }
        }
        Err(match tried.len() {
            0 => CgroupError::NoHierarchy,
            1 => tried.remove(0),
            _ => CgroupError::Tried(tried),
        })
    }

    /// Creates `<parent>/cordon-bash-<helper pid>-<n>` for the next command, limited to the
    /// bytes, swap included.
    pub fn make(&mut self) -> Result<Cgroup, CgroupError> {
        self.made += 1;
        let parent = &self.parent;
        let what = |source: std::io::Error, doing: &'static str| CgroupError::Step {
            doing,
            dir: parent.clone(),
            source,
        };
        // SAFETY: no arguments.
        let name = format!("cordon-bash-{}-{}", unsafe { libc::getpid() }, self.made);
        let dir = parent.join(name);
        // A leftover of an earlier helper with this helper's pid is empty: remove it first.
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).map_err(|e| what(e, "cannot create a cgroup in"))?;
        let v2 = self.v2;
        let setup = || -> Result<Cgroup, CgroupError> {
            let (limit, swap, join) = if v2 {
                ("memory.max", "memory.swap.max", "cgroup.procs")
            } else {
                (
                    "memory.limit_in_bytes",
                    "memory.memsw.limit_in_bytes",
                    "tasks",
                )
            };
            std::fs::write(dir.join(limit), self.bytes.to_string())
                .map_err(|e| what(e, "cannot set the memory limit below"))?;
            // Without swap accounting the file is absent, and there is no swap to escape to.
            let swap = dir.join(swap);
            if swap.exists() {
                let value = if v2 {
                    "0".to_string()
                } else {
                    self.bytes.to_string()
                };
                std::fs::write(&swap, value)
                    .map_err(|e| what(e, "cannot bound the swap use below"))?;
            }
            let join = OpenOptions::new()
                .write(true)
                .open(dir.join(join))
                .map_err(|e| what(e, "cannot open the cgroup's task list below"))?;
            Ok(Cgroup {
                dir: dir.clone(),
                v2,
                join,
                kills_before: 0,
            })
        };
        setup().inspect_err(|_| {
            let _ = std::fs::remove_dir(&dir);
        })
    }
}

impl Cgroup {
    /// The file a process moves itself into the cgroup with, by writing `0` (it must be
    /// single-threaded: in v1 this moves one thread, without the global lock that moving
    /// another process, or a thread group, takes).
    pub fn join(&self) -> BorrowedFd<'_> {
        self.join.as_fd()
    }

    /// The cgroup version of its hierarchy: 1 or 2.
    pub fn version(&self) -> u8 {
        if self.v2 { 2 } else { 1 }
    }

    /// Whether the kernel killed a process of the cgroup because it reached its limit during
    /// the command that is over; the count so far is the next command's baseline, should the
    /// cgroup serve another once it is empty (what the command left in the page cache then
    /// stays charged to it, and is reclaimed first when the next one needs the memory).
    pub fn oom_killed(&mut self) -> bool {
        let kills = self.kills();
        let before = std::mem::replace(&mut self.kills_before, kills);
        kills > before
    }

    /// How many processes the kernel killed in the cgroup for lack of memory so far.
    fn kills(&self) -> u64 {
        let file = if self.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .find_map(|line| line.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Removes the cgroup once its last task is gone.
    pub fn remove(self) {
        for _ in 0..200 {
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => return,
            }
        }
    }
}

/// The helper's own cgroup directories that have the `memory` controller: (directory, is v2),
/// v2 first.
fn candidates(mountinfo: &str, own: &str) -> Vec<(PathBuf, bool)> {
    let mut found = Vec::new();
    for v2 in [true, false] {
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let wanted = if v2 {
                id == "0" && controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "memory")
            };
            if !wanted {
                continue;
            }
            for (root, mount_point) in mounts(mountinfo, v2) {
                let relative = if root == "/" {
                    Some(path)
                } else {
                    path.strip_prefix(root.as_str())
                        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
                };
                if let Some(relative) = relative {
                    let dir = mount_point.join(relative.trim_start_matches('/'));
                    if !v2 || has_memory(&dir) {
                        found.push((dir, v2));
                    }
                }
            }
        }
    }
    found
}

/// The (root, mount point) of the mounted cgroup2 hierarchies (`v2`) or v1 `memory` ones.
fn mounts(mountinfo: &str, v2: bool) -> Vec<(String, PathBuf)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = *fields.get(sep + 1)?;
            let options = *fields.get(sep + 3)?;
            let matches = if v2 {
                fstype == "cgroup2"
            } else {
                fstype == "cgroup" && options.split(',').any(|o| o == "memory")
            };
            matches.then(|| (unescape(fields[3]), PathBuf::from(unescape(fields[4]))))
        })
        .collect()
}

/// Decodes the octal escapes (`\040` for a space) of a mountinfo field.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Some(value) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|octal| u8::from_str_radix(octal, 8).ok())
        {
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes the cgroups that helpers no longer alive left behind (a helper that was itself
/// killed cannot remove its own). A cgroup still in use is not empty, and removing it fails.
fn sweep(parent: &Path) {
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cordon-bash-"))
            .and_then(|rest| rest.split('-').next()?.parse::<u32>().ok())
        else {
            continue;
        };
        if !alive(pid) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Whether process `pid` runs: it exists and has not exited (a killed helper stays a zombie
/// until whoever inherited it reaps it).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which may hold spaces and parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z' | 'X') | None)
}

fn has_memory(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.controllers"))
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
}

/// Turns the memory controller on for the cgroups below `parent` (cgroup v2).
fn enable_memory(parent: &Path) -> Result<(), CgroupError> {
    let what = |source: std::io::Error, doing: &'static str| CgroupError::Step {
        doing,
        dir: parent.to_path_buf(),
        source,
    };
    let control = parent.join("cgroup.subtree_control");
    let enabled = std::fs::read_to_string(&control)
        .map_err(|e| what(e, "cannot read cgroup.subtree_control in"))?;
    if !enabled.split_whitespace().any(|c| c == "memory") {
        std::fs::write(&control, "+memory")
            .map_err(|e| what(e, "cannot enable the memory controller below"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_the_v1_memory_hierarchy() {
        let own = "8:pids:/a/b\n4:memory:/x\n0::/\n";
        let found = candidates(MOUNTINFO, own);
        // The v2 hierarchy of this test has no memory controller on this path.
        assert!(
            found.contains(&(PathBuf::from("/sys/fs/cgroup/memory/x"), false)),
            "{found:?}"
        );
    }

    #[test]
    fn unescapes_mount_points() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"/plain"), "/plain");
    }
}
