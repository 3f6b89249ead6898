//! Why a command could not run ([`CannotRun`]): the part of the sandbox that refused it, and
//! the cause. It travels from the helper to the host as itself, and says it to the user with
//! the settings that would let the command run ([`Setting`]).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::OptionalLayer;
use super::setting::Setting;

/// The part of the sandbox a refusal comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Part {
    /// Landlock, the file and scope rules.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// Dropped capabilities, locked securebits and `no_new_privs`.
    Privileges,
    /// Resource limits (`RLIMIT_*`).
    Limits,
    /// The user, PID, mount, IPC, UTS, cgroup and network namespaces. (A memory cgroup that
    /// cannot be made refuses nothing: commands are then bounded per process.)
    Namespaces,
    /// The command's view of the file system.
    View,
    /// The proxy of an allowlist.
    Proxy,
    /// The sandbox helper, its zygote and inits, and the way to them.
    Helper,
    /// The call itself, before any of the sandbox (such as its timeout).
    Call,
}

/// Why a command could not run: what [`crate::Status::Refused`] holds. Its text says what
/// failed and what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CannotRun {
    /// The kernel cannot enforce an optional layer, which commands may not run without.
    #[error(
        "bash cannot run confined: {why}; start cordon with {} to run commands without this \
         layer (the others still apply), or with {} to run them without any kernel \
         confinement",
        Setting::AllowMissing(*layer),
        Setting::Unconfined
    )]
    Missing { layer: OptionalLayer, why: String },
    /// A part of the confinement could not be set up.
    #[error(
        "bash cannot run confined: {why}; start cordon with {} to run commands without the \
         kernel confinement (timeout, process-tree kill and output bound still apply)",
        Setting::Unconfined
    )]
    Unconfinable { part: Part, why: String },
    /// The command asked for a timeout outside 1 to `most` seconds.
    #[error(
        "a timeout of {} s was asked for; a command may be given 1 to {most} s (the user's {}): \
         ask for {most} or less, or split the work",
        asked.as_secs_f64(),
        Setting::MaxTimeout
    )]
    Timeout { asked: Duration, most: u32 },
    /// The sandbox failed on its way to the command, for a reason confinement cannot help.
    #[error("{why}")]
    Failed { part: Part, why: String },
}

impl CannotRun {
    /// `part` of the confinement could not be set up, for `why`.
    pub(super) fn unconfinable(part: Part, why: impl fmt::Display) -> Self {
        CannotRun::Unconfinable {
            part,
            why: why.to_string(),
        }
    }

    /// `part` failed, for `why`.
    pub(super) fn failed(part: Part, why: impl fmt::Display) -> Self {
        CannotRun::Failed {
            part,
            why: why.to_string(),
        }
    }

    /// The part of the sandbox that refused the command.
    pub fn part(&self) -> Part {
        match self {
            CannotRun::Missing {
                layer: OptionalLayer::Landlock,
                ..
            } => Part::Landlock,
            CannotRun::Missing {
                layer: OptionalLayer::Seccomp,
                ..
            } => Part::Seccomp,
            CannotRun::Timeout { .. } => Part::Call,
            CannotRun::Unconfinable { part, .. } | CannotRun::Failed { part, .. } => *part,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing installs a wording in these tests: the texts name the config file's keys.
    #[test]
    fn a_refusal_names_its_part_and_the_settings_that_let_the_command_run() {
        let missing = CannotRun::Missing {
            layer: OptionalLayer::Seccomp,
            why: "no seccomp".into(),
        };
        assert_eq!(missing.part(), Part::Seccomp);
        assert_eq!(
            missing.to_string(),
            "bash cannot run confined: no seccomp; start cordon with [bash] allow_missing = \
             [\"seccomp\"] to run commands without this layer (the others still apply), or with \
             [bash] unconfined = true to run them without any kernel confinement"
        );
        let timeout = CannotRun::Timeout {
            asked: Duration::from_millis(1500),
            most: 600,
        };
        assert_eq!(timeout.part(), Part::Call);
        assert!(
            timeout
                .to_string()
                .starts_with("a timeout of 1.5 s was asked for; a command may be given 1 to 600 s (the user's [bash] max_timeout)"),
            "{timeout}"
        );
        let view = CannotRun::unconfinable(Part::View, "cannot mount /x");
        assert_eq!(view.part(), Part::View);
        let back: CannotRun = serde_json::from_str(&serde_json::to_string(&view).unwrap()).unwrap();
        assert_eq!(back, view);
    }
}
