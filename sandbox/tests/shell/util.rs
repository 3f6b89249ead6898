//! The harness: a throwaway workspace and the policy its commands run under.

use cordon_sandbox::{Completion, Hooks, Policy, Shell};

use crate::workspace::Workspace;

/// A temporary workspace and the policy of every command run in it.
pub struct Sandbox {
    dir: Workspace,
    policy: Policy,
}

/// The workspace's files: `root`, `path`, `write`, `read`.
impl std::ops::Deref for Sandbox {
    type Target = Workspace;

    fn deref(&self) -> &Workspace {
        &self.dir
    }
}

impl Sandbox {
    /// A fresh, empty workspace (in the host's `/tmp`, as the CLI's tests make theirs) and the
    /// default policy.
    pub fn new() -> Self {
        let dir = Workspace::new();
        let policy = Policy::new(dir.root());
        Sandbox { dir, policy }
    }

    /// Changes the policy of every command.
    pub fn with(mut self, change: impl FnOnce(&mut Policy)) -> Self {
        change(&mut self.policy);
        self
    }

    /// A shell kept for several commands, as `cordon session` keeps one.
    pub fn session(&self) -> Session {
        Session(Shell::new(self.policy.clone()))
    }
}

/// Runs `command` in a shell of its own, as `cordon call bash` does.
pub fn bash(sandbox: &Sandbox, command: &str) -> Completion {
    cordon_sandbox::run(&sandbox.policy, command)
}

/// A [`Shell`] whose commands run one after another.
pub struct Session(Shell);

impl Session {
    /// Runs `command`: what it printed.
    pub fn bash(&self, command: &str) -> String {
        self.0.run(command, &Hooks::default()).output
    }
}
