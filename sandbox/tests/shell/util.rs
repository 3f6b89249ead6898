//! The harness: a throwaway workspace and the policy its commands run under.

use std::path::PathBuf;

use cordon_sandbox::{Completion, Hooks, Policy, Shell};
use tempfile::TempDir;

/// A temporary workspace and the policy of every command run in it.
pub struct Sandbox {
    dir: TempDir,
    policy: Policy,
}

impl Sandbox {
    /// A fresh, empty workspace (in the host's `/tmp`, as the CLI's tests make theirs) and the
    /// default policy.
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cordon-ws-")
            .tempdir()
            .expect("create a temporary workspace");
        let policy = Policy::new(dir.path().canonicalize().unwrap());
        Sandbox { dir, policy }
    }

    /// Changes the policy of every command.
    pub fn with(mut self, change: impl FnOnce(&mut Policy)) -> Self {
        change(&mut self.policy);
        self
    }

    /// The workspace root, canonical (as commands see it).
    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    /// The absolute path of `rel` inside the workspace.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Writes `content` to `rel` inside the workspace, creating parents.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Reads `rel` inside the workspace as text.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
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
