//! The second layer of a command's confinement, inside its namespaces: Landlock, seccomp,
//! dropped capabilities, `no_new_privs` and resource limits. Prepared in the helper
//! ([`prepare`], which refuses what the kernel cannot enforce), the paths of the Landlock rules
//! opened once by the zygote in the view ([`Rules::open`]), and applied by each command's init
//! once its fresh mounts are in place ([`Plan::apply`]), before it forks bash.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use seccompiler::BpfProgram;

use super::refused::{CannotRun, Part};
use super::seccomp::{self, NoFilter};
use super::view::{self, DEVICES, ViewError};
use super::{HOME, Policy, READ_ROOTS};

/// The confinement of one command, ready to apply.
pub(super) struct Plan {
    /// The kernel's Landlock ABI version and the one the ruleset targets, or why there is no
    /// Landlock (allowed by [`OPTIONAL_LAYERS`]).
    landlock: Result<(i32, ABI), NoLandlock>,
    /// The seccomp program, or why there is none (allowed likewise).
    seccomp: Result<BpfProgram, NoFilter>,
}

/// The layers a user may let commands run without (`--sandbox-allow-missing`): the others have
/// no stand-in, and without them only `--unconfined-bash` runs commands.
pub const OPTIONAL_LAYERS: [&str; 2] = ["landlock", "seccomp"];

/// A layer of [`OPTIONAL_LAYERS`], as [`Policy::allow_missing`] names it; read (from the
/// wire, or a config file) by its `FromStr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum OptionalLayer {
    Landlock,
    Seccomp,
}

impl OptionalLayer {
    /// Its name, as the receipt and [`OPTIONAL_LAYERS`] spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            OptionalLayer::Landlock => "landlock",
            OptionalLayer::Seccomp => "seccomp",
        }
    }
}

/// A name that is not one of [`OPTIONAL_LAYERS`].
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a layer commands may run without; those are landlock and seccomp")]
pub struct NotOptional(String);

impl std::str::FromStr for OptionalLayer {
    type Err = NotOptional;

    fn from_str(text: &str) -> Result<Self, NotOptional> {
        match text {
            "landlock" => Ok(OptionalLayer::Landlock),
            "seccomp" => Ok(OptionalLayer::Seccomp),
            _ => Err(NotOptional(text.to_string())),
        }
    }
}

impl TryFrom<String> for OptionalLayer {
    type Error = NotOptional;

    fn try_from(text: String) -> Result<Self, NotOptional> {
        text.parse()
    }
}

impl From<OptionalLayer> for &'static str {
    fn from(layer: OptionalLayer) -> Self {
        layer.as_str()
    }
}

impl std::fmt::Display for OptionalLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Prepares the confinement of `policy`, or says which part the kernel cannot enforce.
pub(super) fn prepare(policy: &Policy) -> Result<Plan, CannotRun> {
    fn missing<E: std::fmt::Display>(
        policy: &Policy,
        layer: OptionalLayer,
        why: E,
    ) -> Result<E, CannotRun> {
        if policy.allow_missing.contains(&layer) {
            Ok(why)
        } else {
            Err(CannotRun::Missing {
                layer,
                why: why.to_string(),
            })
        }
    }
    let landlock = match landlock_abi() {
        // Landlock confines connecting to pathname Unix sockets from ABI 9 on; before,
        // AF_UNIX sockets are refused altogether (see the crate documentation).
        Ok(version) if ABI::from(version) >= ABI::V9 => Ok((version, ABI::V9)),
        Ok(version) => Ok((version, ABI::V6)),
        Err(why) => Err(missing(policy, OptionalLayer::Landlock, why)?),
    };
    let allow_unix = matches!(landlock, Ok((_, ABI::V9)));
    let seccomp = match seccomp::program(&policy.network, allow_unix) {
        Ok(filters) => Ok(filters),
        Err(why) => Err(missing(policy, OptionalLayer::Seccomp, why)?),
    };
    Ok(Plan { landlock, seccomp })
}

impl Plan {
    /// The kernel's Landlock ABI version, or why there is no Landlock.
    pub fn landlock(&self) -> Result<i32, &NoLandlock> {
        self.landlock.as_ref().map(|(v, _)| *v)
    }

    /// The Landlock ABI the rules target, if there is Landlock.
    pub fn abi(&self) -> Option<ABI> {
        self.landlock.as_ref().ok().map(|(_, abi)| *abi)
    }

    /// Why there is no seccomp filter, if there is none.
    pub fn seccomp_missing(&self) -> Option<&NoFilter> {
        self.seccomp.as_ref().err()
    }

    /// Confines the calling process (a command's init, single-threaded, in its view):
    /// Landlock after `rules` and at most `tasks` tasks in its user namespace.
    pub fn apply(&self, rules: &Rules, tasks: u64) -> Result<(), CannotRun> {
        limit(libc::RLIMIT_CORE, 0)?;
        limit(libc::RLIMIT_NPROC, tasks)?;
        let landlock = |e: LandlockError| CannotRun::unconfinable(Part::Landlock, e);
        let ruleset = match &self.landlock {
            Ok((_, abi)) => Some(rules.ruleset(*abi).map_err(landlock)?),
            Err(_) => None,
        };
        drop_capabilities().map_err(|e| CannotRun::unconfinable(Part::Privileges, e))?;
        if let Some(ruleset) = ruleset {
            let status = ruleset
                .restrict_self()
                .map_err(|e| landlock(LandlockError::Restrict(e)))?;
            if status.ruleset != RulesetStatus::FullyEnforced {
                return Err(landlock(LandlockError::Partly(status.ruleset)));
            }
        }
        if let Ok(filter) = &self.seccomp {
            seccompiler::apply_filter(filter).map_err(|e| {
                CannotRun::unconfinable(
                    Part::Seccomp,
                    format!("cannot install the seccomp filter: {e}"),
                )
            })?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Landlock

/// The Landlock ABI version of the running kernel, if it is recent enough (6: signal scoping).
fn landlock_abi() -> Result<i32, NoLandlock> {
    // The crate hides the kernel's version on purpose (rules should not depend on it); here
    // it only decides whether to refuse, and how to say so.
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: no attribute, size 0.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    let errno = io::Error::last_os_error().raw_os_error();
    usable_abi(version, errno)
}

/// Why the kernel's Landlock cannot confine commands.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoLandlock {
    #[error(
        "Landlock is built into this kernel but not enabled (add landlock to the lsm= kernel \
         parameter)"
    )]
    Disabled,
    #[error(
        "this kernel has no Landlock (Linux 6.12 or later with CONFIG_SECURITY_LANDLOCK is \
         needed)"
    )]
    Absent,
    /// An ABI older than 6; what it lacks.
    #[error(
        "the kernel's Landlock ABI is {abi}, which lacks {}; Linux 6.12 or later (ABI 6) is \
         needed",
        lacks.join(", ")
    )]
    Old { abi: i32, lacks: Vec<&'static str> },
}

/// The Landlock ABI version for the kernel's answer to the version query (`version`, else
/// `errno`), or what it lacks.
fn usable_abi(version: libc::c_long, errno: Option<i32>) -> Result<i32, NoLandlock> {
    if version <= 0 {
        return Err(if errno == Some(libc::EOPNOTSUPP) {
            NoLandlock::Disabled
        } else {
            NoLandlock::Absent
        });
    }
    let abi = ABI::from(version as i32);
    if abi >= ABI::V6 {
        return Ok(version as i32);
    }
    let mut lacks = Vec::new();
    if abi < ABI::V3 {
        lacks.push("control of file truncation (ABI 3)");
    }
    if abi < ABI::V4 {
        lacks.push("TCP network rules (ABI 4)");
    }
    if abi < ABI::V5 {
        lacks.push("control of device ioctls (ABI 5)");
    }
    lacks.push("scoping of signals and abstract Unix sockets (ABI 6)");
    Err(NoLandlock::Old {
        abi: version as i32,
        lacks,
    })
}

/// The paths of a command's Landlock rules, opened in the view: those the view holds for
/// every command, opened once by the zygote, and the names of those each command mounts
/// afresh, opened by its init (a rule holds for the file it was made on, not for the path).
pub(super) struct Rules {
    /// What stays: the workspace, the system directories, the extra paths, the devices.
    lasting: Vec<(OwnedFd, BitFlags<AccessFs>)>,
    /// What each command mounts afresh, and what they allow.
    fresh: Vec<(&'static str, BitFlags<AccessFs>)>,
}

impl Rules {
    /// Opens the lasting paths of `policy`'s rules (nothing when there is no Landlock, `abi`
    /// none). Called in the view.
    pub fn open(policy: &Policy, abi: Option<ABI>) -> Result<Rules, ViewError> {
        let Some(abi) = abi else {
            return Ok(Rules {
                lasting: Vec::new(),
                fresh: Vec::new(),
            });
        };
        let all = AccessFs::from_all(abi);
        let read = AccessFs::from_read(abi);
        let mut paths: Vec<(PathBuf, BitFlags<AccessFs>)> = Vec::new();
        // Writable: the workspace, the extra writable paths, a kept home.
        paths.push((policy.workspace.clone(), all));
        for path in &policy.extra_write {
            paths.push((view::extra(path, "writable")?, all));
        }
        if policy.home.is_some() {
            paths.push((HOME.into(), all));
        }
        // Readable: the system directories (their secrets are covered in the view), the extra
        // readable paths.
        for root in READ_ROOTS {
            if let Ok(path) = Path::new(root).canonicalize() {
                paths.push((path, read));
            }
        }
        for path in &policy.extra_read {
            paths.push((view::extra(path, "readable")?, read));
        }
        // The view holds only what the command may see: every directory of it may be listed.
        paths.push(("/".into(), AccessFs::ReadDir.into()));
        paths.push(("/sys/devices/system/cpu".into(), read));
        // The view's /dev holds only these devices; terminals also take their ioctls.
        let device_rw = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
        for device in DEVICES {
            let access = match device {
                "random" | "urandom" => AccessFs::ReadFile.into(),
                "tty" => device_rw | AccessFs::IoctlDev,
                _ => device_rw,
            };
            paths.push((Path::new("/dev").join(device), access));
        }
        let mut lasting = Vec::with_capacity(paths.len());
        for (path, access) in paths {
            // A device or system directory this machine lacks.
            let Ok(fd) = o_path(&path) else {
                continue;
            };
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(abi)
            };
            lasting.push((OwnedFd::from(fd), access));
        }
        let mut fresh = vec![
            ("/tmp", all),
            ("/dev/shm", all),
            ("/proc", AccessFs::ReadFile | AccessFs::ReadDir),
            (
                "/dev/pts",
                device_rw | AccessFs::ReadDir | AccessFs::IoctlDev,
            ),
        ];
        if policy.home.is_none() {
            fresh.push((HOME, all));
        }
        Ok(Rules { lasting, fresh })
    }

    /// The file-system and scope ruleset of a command, made in its init's view.
    fn ruleset(&self, abi: ABI) -> Result<RulesetCreated, LandlockError> {
        let landlock = LandlockError::Ruleset;
        // Without the host's network, the namespace's loopback is the commands' (their own
        // servers, the proxy of an allowlist): nothing else exists there to connect to.
        let ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .map_err(landlock)?;
        let mut created = ruleset
            .scope(Scope::from_all(abi))
            .map_err(landlock)?
            .create()
            .map_err(landlock)?;
        for (fd, access) in &self.lasting {
            created = created
                .add_rule(PathBeneath::new(fd.as_fd(), *access))
                .map_err(landlock)?;
        }
        for (path, access) in &self.fresh {
            let rule = |e: &dyn std::fmt::Display| LandlockError::Rule {
                path,
                why: e.to_string(),
            };
            let fd = PathFd::new(path).map_err(|e| rule(&e))?;
            created = created
                .add_rule(PathBeneath::new(fd, *access))
                .map_err(|e| rule(&e))?;
        }
        Ok(created)
    }
}

/// `path` opened with `O_PATH`, as a rule names it.
fn o_path(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
}

/// Why a command's Landlock ruleset cannot be made or enforced.
#[derive(Debug, thiserror::Error)]
enum LandlockError {
    #[error("Landlock: {0}")]
    Ruleset(landlock::RulesetError),
    #[error("Landlock rule for {path}: {why}")]
    Rule { path: &'static str, why: String },
    #[error("Landlock refused the ruleset: {0}")]
    Restrict(landlock::RulesetError),
    #[error("Landlock enforced the ruleset only partly ({0:?})")]
    Partly(RulesetStatus),
}

// ---------------------------------------------------------------------------------------------
// Capabilities and limits

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
/// `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP`, `SECBIT_NO_CAP_AMBIENT_RAISE`, each with its
/// lock, and `SECBIT_KEEP_CAPS_LOCKED` (keep-caps itself off): exec as root grants nothing.
const SECUREBITS: libc::c_ulong = 0b1110_1111;

fn capabilities() -> io::Result<[CapData; 2]> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: a valid header and room for the two data words of version 3.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

fn prctl(option: libc::c_int, arg: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: prctl options taking integer arguments only.
    let result = unsafe {
        libc::prctl(
            option,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(result)
}

/// Drops every capability for good and sets no-new-privileges, then checks the result. The
/// caller holds every capability of its user namespace, so the bounding set can be emptied
/// and the securebits locked too.
fn drop_capabilities() -> Result<(), CapError> {
    let before = capabilities().map_err(CapError::Get)?;
    if before[0].effective & (1 << CAP_SETPCAP) != 0 {
        prctl(libc::PR_SET_SECUREBITS, SECUREBITS).map_err(CapError::LockSecurebits)?;
        // Past the last capability this kernel knows, dropping fails: that is the end.
        for cap in 0..64 {
            if prctl(libc::PR_CAPBSET_DROP, cap).is_err() {
                break;
            }
        }
    }
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
    )
    .map_err(CapError::ClearAmbient)?;
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let none = [CapData::default(); 2];
    // SAFETY: a valid header and the two data words of version 3.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, none.as_ptr()) } != 0 {
        return Err(CapError::Drop(io::Error::last_os_error()));
    }
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map_err(CapError::SetNoNewPrivs)?;

    // Check rather than trust.
    let after = capabilities().map_err(CapError::Get)?;
    if after
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0)
    {
        return Err(CapError::StillHeld);
    }
    if prctl(libc::PR_GET_NO_NEW_PRIVS, 0).ok() != Some(1) {
        return Err(CapError::NoNewPrivsUnset);
    }
    if bounding_set().map_err(CapError::ReadBoundingSet)? != 0 {
        return Err(CapError::BoundingSetKept);
    }
    let bits = prctl(libc::PR_GET_SECUREBITS, 0).unwrap_or(0) as libc::c_ulong;
    if bits & SECUREBITS != SECUREBITS {
        return Err(CapError::SecurebitsUnlocked);
    }
    Ok(())
}

/// Why the privileges of a command's init cannot be dropped for good.
#[derive(Debug, thiserror::Error)]
enum CapError {
    #[error("capget: {0}")]
    Get(io::Error),
    #[error("cannot lock the securebits: {0}")]
    LockSecurebits(io::Error),
    #[error("cannot clear the ambient capabilities: {0}")]
    ClearAmbient(io::Error),
    #[error("cannot drop the capabilities: {0}")]
    Drop(io::Error),
    #[error("cannot set no_new_privs: {0}")]
    SetNoNewPrivs(io::Error),
    #[error("capabilities are still held after dropping them")]
    StillHeld,
    #[error("no_new_privs is not set")]
    NoNewPrivsUnset,
    #[error("cannot read the bounding set: {0}")]
    ReadBoundingSet(io::Error),
    #[error("the capability bounding set cannot be emptied (CAP_SETPCAP is missing)")]
    BoundingSetKept,
    #[error("the securebits cannot be locked (CAP_SETPCAP is missing)")]
    SecurebitsUnlocked,
}

/// The capability bounding set of this process, as `/proc/self/status` gives it.
fn bounding_set() -> io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapBnd:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| io::Error::other("no CapBnd line"))
}

#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

/// Lowers both limits of `resource` to `value` (never raises them).
pub(super) fn limit(resource: Resource, value: u64) -> Result<(), CannotRun> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill, then to read.
    unsafe {
        if libc::getrlimit(resource, &mut current) != 0 {
            return Err(CannotRun::unconfinable(
                Part::Limits,
                format!("getrlimit: {}", io::Error::last_os_error()),
            ));
        }
        let value = value.min(current.rlim_max);
        let new = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        if libc::setrlimit(resource, &new) != 0 {
            return Err(CannotRun::unconfinable(
                Part::Limits,
                format!(
                    "cannot set resource limit {resource}: {}",
                    io::Error::last_os_error()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_kernels_are_refused_with_what_they_lack() {
        assert_eq!(usable_abi(7, None), Ok(7));
        let why = usable_abi(5, None).unwrap_err().to_string();
        assert!(why.contains("ABI is 5"), "{why}");
        assert!(why.contains("scoping of signals"), "{why}");
        assert!(!why.contains("truncation"), "{why}");
        let why = usable_abi(-1, Some(libc::ENOSYS)).unwrap_err().to_string();
        assert!(why.contains("no Landlock"), "{why}");
        let why = usable_abi(-1, Some(libc::EOPNOTSUPP)).unwrap_err();
        assert!(why.to_string().contains("not enabled"), "{why}");
        let refused = CannotRun::unconfinable(Part::Landlock, why);
        assert!(refused.to_string().contains("[bash] unconfined = true"));
    }
}
