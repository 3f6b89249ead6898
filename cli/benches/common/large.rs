//! The large workspace of the bench targets: 10,000 directories, 100,000 files and nested git
//! repositories, where a call must cost what it costs in an empty workspace.

use std::path::Path;
use std::process::Command;

/// The directories of the large workspace, the files in each, and one nested repository in
/// every how many directories.
pub const LARGE_DIRS: usize = 10_000;
pub const FILES_PER_DIR: usize = 10;
pub const REPO_EVERY: usize = 1_000;

/// A workspace of [`LARGE_DIRS`] directories (100 of 100), [`FILES_PER_DIR`] files in each and
/// a git repository at its root and in every [`REPO_EVERY`]th directory.
pub fn large_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary workspace");
    let init = |at: &Path| {
        let done = Command::new("git")
            .args(["init", "-q"])
            .arg(at)
            .status()
            .expect("git runs");
        assert!(done.success());
    };
    init(dir.path());
    for n in 0..LARGE_DIRS {
        let sub = dir.path().join(format!("d{}/e{}", n / 100, n % 100));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            std::fs::write(sub.join(format!("f{f}.txt")), "x\n").unwrap();
        }
        if n % REPO_EVERY == 0 {
            init(&sub);
        }
    }
    dir
}
