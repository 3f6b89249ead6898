//! The receipt of a command's confinement: the layers in force for the call, built from what
//! the helper actually set up, for `cordon doctor` and a session's `sandbox` field.

use super::confine::Plan;
use super::ns::SANDBOX_ID;
use super::proxy::PORT;
use super::setting::Setting;
use super::{Network, OptionalLayer, Policy};

/// The layers of a command's confinement, by name: the names a [`Layer`] has.
pub const LAYERS: [&str; 13] = [
    "user",
    "pid",
    "mount",
    "ipc",
    "uts",
    "cgroup",
    "view",
    "landlock",
    "seccomp",
    "capabilities",
    "memory",
    "processes",
    "network",
];

/// How far a layer of the confinement held for a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// In force as its detail says.
    Enforced,
    /// In force in the weaker form its detail names.
    Partial,
    /// Not in force.
    Off,
}

impl Enforcement {
    /// Its name, as the JSON of a [`Layer`] writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Enforced => "enforced",
            Enforcement::Partial => "partial",
            Enforcement::Off => "off",
        }
    }
}

/// One layer of a command's confinement as it held for the call: the receipt that
/// `cordon doctor` prints and a session's response to a bash call carries.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Layer {
    /// One of [`LAYERS`].
    pub name: String,
    pub enforcement: Enforcement,
    /// What holds, for the user.
    pub detail: String,
}

impl Layer {
    pub(crate) fn new(name: &str, enforcement: Enforcement, detail: impl Into<String>) -> Self {
        debug_assert!(LAYERS.contains(&name), "{name}");
        Layer {
            name: name.to_string(),
            enforcement,
            detail: detail.into(),
        }
    }
}

/// How a command's memory is bounded.
pub(super) enum Memory {
    /// This many bytes for its whole tree, by a memory cgroup of this version.
    Cgroup(u64, u8),
    /// This many bytes of address space per process, since no memory cgroup could be made,
    /// for this reason.
    PerProcess(u64, String),
    Unlimited,
}

/// Sets the `memory` layer of `layers` to what `memory` says.
pub(super) fn set_memory(layers: &mut [Layer], memory: &Memory) {
    let mib = |bytes: &u64| bytes >> 20;
    let layer = match memory {
        Memory::Cgroup(bytes, version) => Layer::new(
            "memory",
            Enforcement::Enforced,
            format!(
                "{} MiB for the whole process tree (a cgroup v{version} memory cgroup)",
                mib(bytes)
            ),
        ),
        Memory::PerProcess(bytes, why) => Layer::new(
            "memory",
            Enforcement::Partial,
            format!(
                "{} MiB of address space per process (RLIMIT_AS), not for the whole tree: no \
                 memory cgroup could be created ({why})",
                mib(bytes)
            ),
        ),
        Memory::Unlimited => Layer::new("memory", Enforcement::Off, "no limit was set"),
    };
    if let Some(slot) = layers.iter_mut().find(|l| l.name == "memory") {
        *slot = layer;
    }
}

/// The receipt of the confined path for `policy`: every layer in force, as the helper set it
/// up, but for the memory, which each command's own ([`set_memory`]).
pub(super) fn confined(policy: &Policy, sandbox_user: bool, plan: &Plan) -> Vec<Layer> {
    let on = |name: &str, detail: String| Layer::new(name, Enforcement::Enforced, detail);
    let allowed_off = |layer: OptionalLayer, why: &dyn std::fmt::Display| {
        Layer::new(
            layer.as_str(),
            Enforcement::Off,
            format!(
                "unavailable ({why}); allowed by {}",
                Setting::AllowMissing(layer)
            ),
        )
    };
    let user = if sandbox_user {
        format!(
            "uid and gid 0 inside are nobody ({SANDBOX_ID}) outside; root's files in the \
             workspace and the extra paths show as the command's own (idmapped mounts)"
        )
    } else {
        // SAFETY: no arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        format!("uid {uid} and gid {gid}, mapped to themselves")
    };
    let network = match &policy.network {
        Network::Open => Layer::new(
            "network",
            Enforcement::Off,
            format!(
                "{}: the host's network, every address and port",
                Setting::BashNetwork
            ),
        ),
        Network::Off => on(
            "network",
            format!(
                "a network namespace with only its loopback; cordon's proxy \
                 (127.0.0.1:{PORT}) refuses every host; no socket but TCP, UDP and Unix \
                 socket pairs (seccomp)"
            ),
        ),
        Network::Allow(allowlist) => on(
            "network",
            format!(
                "a network namespace with only its loopback; out only through cordon's proxy \
                 (127.0.0.1:{PORT}), to {}",
                allowlist.describe()
            ),
        ),
    };
    vec![
        on("user", user),
        on(
            "pid",
            "a PID namespace of its own: only its processes are visible, and all die with its \
             init"
                .into(),
        ),
        on("mount", "a mount namespace of its own".into()),
        on("ipc", "System V and POSIX IPC of its own".into()),
        on("uts", "host name cordon".into()),
        on(
            "cgroup",
            "a cgroup namespace rooted at its own cgroup".into(),
        ),
        on(
            "view",
            "a fresh root: system directories read-only, the workspace and extra paths, private \
             /tmp, /dev/shm, HOME and /dev/pts, a fresh /proc; nothing else of the host"
                .into(),
        ),
        match plan.landlock() {
            Ok(version) => on(
                "landlock",
                format!("ABI {version}: files, signals and abstract Unix sockets"),
            ),
            Err(why) => allowed_off(OptionalLayer::Landlock, why),
        },
        match plan.seccomp_missing() {
            None => on(
                "seccomp",
                "no ptrace, namespaces, mounts, BPF, keyrings, io_uring or x32 system calls".into(),
            ),
            Some(why) => allowed_off(OptionalLayer::Seccomp, why),
        },
        on(
            "capabilities",
            "none, bounding set empty, securebits locked, no_new_privs".into(),
        ),
        Layer::new("memory", Enforcement::Off, "not known yet"),
        on(
            "processes",
            format!(
                "{} tasks at once (RLIMIT_NPROC of its user namespace)",
                policy.max_processes
            ),
        ),
        network,
    ]
}

/// The receipt of the unconfined path: every layer off.
pub(super) fn unconfined() -> Vec<Layer> {
    LAYERS
        .iter()
        .map(|name| Layer::new(name, Enforcement::Off, Setting::Unconfined.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(layers: &[Layer]) -> Vec<&str> {
        layers.iter().map(|l| l.name.as_str()).collect()
    }

    #[test]
    fn every_layer_is_named_once_in_order() {
        use crate::OptionalLayer;
        let mut policy = Policy::new("/".into());
        policy.network = Network::Open;
        policy.memory_limit = Some(1 << 30);
        policy.max_processes = 7;
        policy.allow_missing = vec![OptionalLayer::Landlock, OptionalLayer::Seccomp];
        let plan = crate::confine::prepare(&policy).unwrap();
        let mut layers = confined(&policy, false, &plan);
        set_memory(
            &mut layers,
            &Memory::PerProcess(1 << 30, "not delegated".into()),
        );
        assert_eq!(names(&layers), LAYERS);
        let find = |name: &str| layers.iter().find(|l| l.name == name).unwrap();
        assert_eq!(find("memory").enforcement, Enforcement::Partial);
        assert!(find("memory").detail.contains("1024 MiB"));
        assert!(find("memory").detail.contains("not delegated"));
        assert_eq!(find("network").enforcement, Enforcement::Off);
        assert!(find("processes").detail.starts_with("7 tasks"));
        let json = serde_json::to_value(&layers[0]).unwrap();
        assert_eq!(json["enforcement"], layers[0].enforcement.as_str());
        let off = unconfined();
        assert_eq!(names(&off), LAYERS);
        assert!(off.iter().all(|l| l.enforcement == Enforcement::Off));
    }
}
