//! The memory cgroups of a shell's commands, kept by its helper: each is made before its
//! command is asked for, and the zygote moves into it right after starting the command before,
//! so that the command's init is born in it (a task moved into a v1 cgroup waits for an RCU
//! grace period, which would otherwise be paid on every call). A cgroup a command is over
//! with serves a later one once the zygote says its init is gone.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use super::cgroup::{Cgroup, Cgroups, NoCgroup};
use super::receipt::Memory;
use super::wire::{self, FromZygote, ToZygote};

/// The memory cgroups of commands: each is made before its command is asked for, and the
/// zygote moves into it right after starting the command before, so that the command's init
/// is born in it.
pub(super) struct Memories {
    bytes: Option<u64>,
    cgroups: Option<Cgroups>,
    /// The cgroup the zygote is in once it has read what was sent to it: its next command's.
    pub current: Option<Cgroup>,
    /// The cgroup for the command after the next, made while the commands run.
    spare: Option<Cgroup>,
    /// The cgroups of commands that are over, by call, until the zygote says their init is
    /// reaped (a cgroup that holds a task can serve no other command, nor be removed).
    over: HashMap<u64, Cgroup>,
    /// Cgroups of commands that are over, empty, for later commands.
    free: Vec<Cgroup>,
    /// Why commands cannot have memory cgroups of their own, if they cannot.
    pub missing: Option<NoCgroup>,
}

impl Memories {
    /// Makes the first cgroup of commands limited to `bytes` and moves the zygote (on
    /// `zygote`) into it; where none can be made, commands are bounded per process.
    pub fn start(bytes: Option<u64>, zygote: &OwnedFd) -> Memories {
        let mut memory = Memories {
            bytes,
            cgroups: None,
            current: None,
            spare: None,
            over: HashMap::new(),
            free: Vec::new(),
            missing: None,
        };
        let Some(bytes) = bytes else {
            return memory;
        };
        let first = Cgroups::first(bytes)
            .map_err(NoCgroup::from)
            .and_then(|(cgroups, first)| {
                wire::send(zygote.as_fd(), &ToZygote::Enter, &[first.join()])
                    .map_err(|e| NoCgroup::Zygote(Arc::new(e)))?;
                match wire::recv::<FromZygote>(zygote.as_fd()) {
                    Ok(Some((FromZygote::Entered { failed: None }, _))) => Ok((cgroups, first)),
                    Ok(Some((FromZygote::Entered { failed: Some(why) }, _))) => {
                        first.remove();
                        Err(NoCgroup::Entered(why))
                    }
                    _ => Err(NoCgroup::NoAnswer),
                }
            });
        match first {
            Ok((cgroups, first)) => {
                memory.cgroups = Some(cgroups);
                memory.current = Some(first);
                memory.replenish();
            }
            Err(why) => memory.missing = Some(why),
        }
        memory
    }

    /// How the next command's memory is bounded: by the cgroup the zygote is in, else per
    /// process.
    pub fn of_next(&self) -> Memory {
        match (self.bytes, &self.current, &self.missing) {
            (None, ..) => Memory::Unlimited,
            (Some(bytes), Some(cgroup), None) => Memory::Cgroup(bytes, cgroup.version()),
            (Some(bytes), _, why) => Memory::PerProcess(
                bytes,
                why.as_ref().map_or_else(String::new, ToString::to_string),
            ),
        }
    }

    /// The cgroup for the command after the next, for the zygote to move into once it has
    /// started the next; none where commands have none (from now on, when it cannot be made).
    pub fn make(&mut self) -> Option<Cgroup> {
        if self.missing.is_some() {
            return None;
        }
        self.replenish();
        self.spare.take()
    }

    /// Makes the spare cgroup, if there is none (and cgroups can be made): one that a command
    /// is over with, else a new one.
    pub fn replenish(&mut self) {
        if self.spare.is_some() || self.missing.is_some() {
            return;
        }
        self.spare = self.free.pop();
        if self.spare.is_none()
            && let Some(cgroups) = self.cgroups.as_mut()
        {
            match cgroups.make() {
                Ok(cgroup) => self.spare = Some(cgroup),
                Err(why) => self.missing = Some(why.into()),
            }
        }
    }

    /// Holds the cgroup of call `id`, which is over, until its init is reaped.
    pub fn over(&mut self, id: u64, cgroup: Cgroup) {
        self.over.insert(id, cgroup);
    }

    /// Keeps the cgroup of call `id`, whose init is reaped, for a later command; one more than
    /// the next command needs is removed.
    pub fn reaped(&mut self, id: u64) {
        let Some(cgroup) = self.over.remove(&id) else {
            return;
        };
        if self.free.is_empty() && self.missing.is_none() {
            self.free.push(cgroup);
        } else {
            cgroup.remove();
        }
    }

    /// Removes every cgroup of the shell (once its zygote, and with it every command, is
    /// killed).
    pub fn remove_all(&mut self) {
        let over = self.over.drain().map(|(_, cgroup)| cgroup);
        let made = [self.current.take(), self.spare.take()]
            .into_iter()
            .flatten();
        for cgroup in made.chain(over).chain(self.free.drain(..)) {
            cgroup.remove();
        }
    }
}
