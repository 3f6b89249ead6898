//! A throwaway workspace and its files, for the sandbox's tests and the CLI's integration
//! tests alike (which include this file).

use std::path::PathBuf;

use tempfile::TempDir;

/// A fresh, empty workspace in the host's `/tmp`, removed when dropped.
pub struct Workspace(TempDir);

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cordon-ws-")
            .tempdir()
            .expect("create a temporary workspace");
        Workspace(dir)
    }

    /// The workspace root, canonical (as commands and cordon see it).
    pub fn root(&self) -> PathBuf {
        self.0.path().canonicalize().unwrap()
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
}
